"""The pass registry: kebab-case name -> pass. `register` adds a user's pass from a notebook."""

from __future__ import annotations

from collections.abc import Callable

from .base import Pass, PassReport, Rewrite

_REGISTRY: dict[str, Callable[[], Pass]] = {}


def register(factory: Callable[[], Pass] | Pass, name: str | None = None) -> Callable[[], Pass]:
    """Register a pass class (or instance); returns it, so it works as a decorator."""
    key = name or getattr(factory, "name", None)
    if not isinstance(key, str) or not key:
        raise ValueError("a pass needs a kebab-case `name`")
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


# The default pipeline, by name; filled as passes are registered (see issue tracker).
DEFAULT_PIPELINE: tuple[str, ...] = ()

__all__ = ["DEFAULT_PIPELINE", "Pass", "PassReport", "Rewrite", "get", "names", "register"]
