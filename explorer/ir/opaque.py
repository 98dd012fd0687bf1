"""A JAX primitive the op table has no row for, kept as it is so that it still runs.

The JAX frontend turns an equation whose primitive has no row into an `opaque` node (the row
that also holds unknown HLO instructions, ir/ops/regions.py) whose `impl` attribute is a
`JaxImpl`: the primitive and its parameters exactly as the jaxpr had them. Every backend runs
it through JAX's own implementation of the primitive (`JaxImpl.__call__` on host arrays,
`JaxImpl.bind` on the JAX backend's traced values), so a program `jax.jit` accepts always
runs, while passes see a node they know nothing about and leave alone.

An impl prints as `jax<"name:N">`, a token naming the live object. Parsing the text back in
the process that traced it finds the same object; elsewhere it gives an `UnboundImpl`, which
prints the same and says, when run, that the primitive's implementation is not in this process.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any

import numpy as np

_LIVE: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_COUNTER = itertools.count()
_LOCK = threading.Lock()


class OpaqueImplError(RuntimeError):
    """An opaque node cannot run here."""


class OpaqueImpl:
    """Compared, hashed and printed by its token."""

    __slots__ = ("token",)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpaqueImpl) and self.token == other.token

    def __hash__(self) -> int:
        return hash(self.token)

    def __repr__(self) -> str:
        return f'jax<"{self.token}">'


class JaxImpl(OpaqueImpl):
    """A JAX primitive with its parameters; equal only to itself (and its token's parse)."""

    __slots__ = ("primitive", "params", "in_avals", "out_avals", "_jitted", "__weakref__")

    def __init__(self, primitive: Any, params: dict[str, Any], in_avals: tuple, out_avals: tuple) -> None:
        self.primitive, self.params = primitive, dict(params)
        self.in_avals, self.out_avals = tuple(in_avals), tuple(out_avals)
        with _LOCK:
            self.token = f"{primitive.name}:{next(_COUNTER)}"
            _LIVE[self.token] = self
        self._jitted: Any = None

    @property
    def name(self) -> str:
        return self.primitive.name

    def bind(self, *xs: Any) -> Any:
        """The primitive on JAX values (inside a trace, or eagerly): one value, or a tuple
        when the primitive has multiple results (even one). Key-typed operands arrive as their key data
        (u32[..., 2], how the IR holds keys) and are wrapped back; key results unwrapped."""
        import jax

        args = [_wrap_key(x, a) for x, a in zip(xs, self.in_avals)]
        try:  # a higher-order primitive binds its sub-jaxprs as functions (JAX's subfuns):
            got = self.primitive.get_bind_params(self.params)  # params (JAX 0.10), or
            subfuns, params = ([], got) if isinstance(got, dict) else got  # (subfuns, params)
        except (KeyError, TypeError, ValueError) as e:
            raise OpaqueImplError(f"the JAX primitive {self.name!r} of an opaque node cannot be "
                                  f"bound again from its parameters ({type(e).__name__}: {e})") from None
        out = self.primitive.bind(*subfuns, *args, **params)
        outs = list(out) if self.primitive.multiple_results else [out]
        outs = [jax.random.key_data(o) if _is_key(a) else o for o, a in zip(outs, self.out_avals)]
        return tuple(outs) if self.primitive.multiple_results else outs[0]

    def __call__(self, *xs: Any) -> Any:
        """The primitive on host (NumPy) arrays, compiled once by `jax.jit`; NumPy results
        that own their memory (so tracemalloc counts them as the reference backend's own)."""
        import jax

        if self._jitted is None:
            self._jitted = jax.jit(self.bind)
        out = self._jitted(*[np.asarray(x) for x in xs])
        if isinstance(out, tuple):
            return tuple(np.array(o, copy=True) for o in out)
        return np.array(out, copy=True)


class UnboundImpl(OpaqueImpl):
    """An impl read from text whose JaxImpl is not alive in this process."""

    __slots__ = ()

    def __init__(self, token: str) -> None:
        self.token = token

    def __call__(self, *xs: Any) -> Any:
        raise OpaqueImplError(
            f"the JAX primitive of opaque node {self!r} was read from text: its implementation "
            f"lives in the process that traced it, so it cannot run here")

    bind = __call__


def lookup(token: str) -> JaxImpl | UnboundImpl:
    """The live impl a printed token names, or an UnboundImpl."""
    found = _LIVE.get(token)
    return found if found is not None else UnboundImpl(token)


def _is_key(aval: Any) -> bool:
    import jax

    return jax.dtypes.issubdtype(getattr(aval, "dtype", None), jax.dtypes.prng_key)


def _wrap_key(x: Any, aval: Any) -> Any:
    if not _is_key(aval):
        return x
    import jax

    return jax.random.wrap_key_data(x, impl=aval.dtype._impl)
