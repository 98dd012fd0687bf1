"""Arguments as JAX users pass them: pytrees whose array leaves are traced and whose other
leaves are static, as `equinox.filter_jit` treats them.

Traced (dynamic) leaves: NumPy and JAX arrays (typed PRNG keys included, held as their key
data), NumPy scalars, and Python numbers passed directly as an argument (`f(x, 2.0)`), which
JAX traces too. Static leaves, closed over at trace time: everything else — functions (an
equinox module's activation), strings, Python config values inside a container (a module's
`num_heads`, a dict's `training=True`), and Python `bool`s anywhere, which models branch on.
A static leaf is part of the signature: calling a compiled function with another value traces
again; running a trace with another value is an error that names the argument.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np


class ArgumentMismatch(ValueError):
    """Arguments whose structure or static values differ from the traced ones."""


def is_key(x: Any) -> bool:
    return jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key)


def is_traced(leaf: Any, top_level: bool) -> bool:
    """Whether a leaf is traced (else static); `top_level`: it is an argument itself."""
    if isinstance(leaf, bool):
        return False
    if isinstance(leaf, np.ndarray):
        return leaf.dtype != object
    if isinstance(leaf, np.generic | jax.Array):
        return True
    if isinstance(leaf, int | float | complex):
        return top_level
    return hasattr(leaf, "shape") and hasattr(leaf, "dtype") and not isinstance(leaf, type)


def static_key(v: Any) -> Any:
    """What a static leaf is compared by: itself when hashable, else its identity."""
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    return v


@dataclass(frozen=True)
class ArgSpec:
    """Which leaves of `args` are traced, and the static leaves' values."""

    tree: Any  # the pytree structure of the argument tuple
    dynamic: tuple[bool, ...]  # per leaf
    static: tuple[Any, ...]  # the static leaves, in order
    paths: tuple[Any, ...]  # the key paths of the dynamic leaves
    static_paths: tuple[Any, ...]  # and of the static ones

    @classmethod
    def of(cls, args: Sequence[Any]) -> ArgSpec:
        with_paths, tree = jax.tree_util.tree_flatten_with_path(tuple(args))
        dynamic = tuple(is_traced(leaf, len(path) == 1) for path, leaf in with_paths)
        static = tuple(leaf for (_, leaf), d in zip(with_paths, dynamic) if not d)
        paths = tuple(path for (path, _), d in zip(with_paths, dynamic) if d)
        static_paths = tuple(path for (path, _), d in zip(with_paths, dynamic) if not d)
        return cls(tree, dynamic, static, paths, static_paths)

    @property
    def signature(self) -> Any:
        """Hashable: equal for argument tuples that trace the same way (with equal shapes)."""
        return (self.tree, self.dynamic, tuple(static_key(s) for s in self.static))

    def dynamic_leaves(self, args: Sequence[Any], describe: Callable[[int], str]) -> list[Any]:
        """The traced leaves of `args`, which must match this spec's structure and statics."""
        leaves, tree = jax.tree_util.tree_flatten(tuple(args))
        if tree != self.tree:
            raise ArgumentMismatch(f"the arguments are shaped like {tree}, but the function was "
                                   f"traced with arguments shaped like {self.tree}")
        out, s = [], 0
        for leaf, dynamic in zip(leaves, self.dynamic):
            if dynamic:
                out.append(leaf)
                continue
            if static_key(leaf) != static_key(self.static[s]):
                raise ArgumentMismatch(
                    f"static argument {describe(s)} is {leaf!r}, but the function was traced "
                    f"with {self.static[s]!r}: explore it again for another value")
            s += 1
        return out

    def rebuild(self, dynamic: Sequence[Any]) -> tuple[Any, ...]:
        """The argument tuple with these traced leaves and the static ones."""
        it_d, it_s = iter(dynamic), iter(self.static)
        leaves = [next(it_d) if d else next(it_s) for d in self.dynamic]
        return jax.tree_util.tree_unflatten(self.tree, leaves)

    def closed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn` as a function of the traced leaves alone (statics closed over)."""

        def flat_fn(*dynamic: Any) -> Any:
            return fn(*self.rebuild(dynamic))

        flat_fn.__name__ = getattr(fn, "__name__", type(fn).__name__)
        flat_fn.__wrapped__ = fn  # type: ignore[attr-defined]
        return flat_fn


def host_value(x: Any) -> np.ndarray:
    """A traced leaf as the host array the graph's parameter holds (a key as its key data)."""
    if is_key(x):
        x = jax.random.key_data(x)
    return np.asarray(x)
