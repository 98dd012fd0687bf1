"""The pass registry: kebab-case name -> pass. `register` adds a user's pass from a notebook.

Adding a pass is one new module and one line at the bottom of this file.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from .base import Pass, PassReport, Rewrite, RewritePass

_REGISTRY: dict[str, Callable[[], Pass]] = {}


def register(factory: Callable[[], Pass] | Pass, name: str | None = None) -> Callable[[], Pass]:
    """Register a pass class (or instance, e.g. a `RewritePass`); returns it, so it works as
    a class decorator. Registering a name again replaces the earlier pass (notebook reruns)."""
    key = name or getattr(factory, "name", None)
    if not isinstance(key, str) or not key:
        raise ValueError("a pass needs a kebab-case `name` (a dataclass field with a default)")
    if key != key.lower() or " " in key or "_" in key:
        raise ValueError(f"pass names are kebab-case, got {key!r}")
    instance = factory() if isinstance(factory, type) else factory
    if not callable(instance) or getattr(instance, "name", None) != key:
        raise ValueError(f"{factory!r} does not make a pass named {key!r}")
    _REGISTRY[key] = factory if isinstance(factory, type) else (lambda: factory)  # type: ignore
    return factory  # type: ignore[return-value]


def names() -> list[str]:
    return list(_REGISTRY)


def get(name: str) -> Pass:
    try:
        return _REGISTRY[name]()
    except KeyError:
        known = ", ".join(_REGISTRY) or "none"
        raise KeyError(f"no pass named {name!r}; registered passes: {known}") from None


def _load(module: str) -> None:
    """Import a pass module that registers itself; a module that does not exist yet is
    skipped (its pass is then simply not registered), any other error is raised."""
    try:
        importlib.import_module(f"{__name__}.{module}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{module}":
            raise


from .cse import CSE  # noqa: E402
from .dce import DCE  # noqa: E402
from .simplify import Simplify  # noqa: E402

register(Simplify)
register(CSE)
register(DCE)
for _module in ("recognize_dot", "euclidean_distance", "dot_order", "fuse", "split"):
    _load(_module)

# The default pipeline, by name. `split` joins after dot-order when explore() is given a
# memory_limit; `fuse` groups what is left into kernels for the CPU and GPU backends.
DEFAULT_PIPELINE: tuple[str, ...] = tuple(
    p for p in ("simplify", "cse", "recognize-dot", "euclidean-distance", "dot-order",
                "simplify", "dce", "fuse")
    if p in _REGISTRY)

__all__ = ["DEFAULT_PIPELINE", "Pass", "PassReport", "Rewrite", "RewritePass", "get", "names",
           "register"]
