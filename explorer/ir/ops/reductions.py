"""Reductions: the monoid folds (`reduce_sum`, `reduce_max`, `reduce_min`, `reduce_prod`,
`reduce_and`, `reduce_or`), `argmax`/`argmin`, and the cumulative ops (`cumsum`, `cumprod`,
`cummax`, `cummin`, `cumlogsumexp`). `MONOID_REDUCTIONS` names the reduction that folds with
each monoid.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import dtypes
from ..graph import Attrs, TensorType, Type
from ..traits import MONOIDS, FusionRole, OpKind, Split
from .table import OPS, OpDef, OpError, Ref, check_axes, per_element_flops, register, sample_array


def _reduce_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = ts
    axes = check_axes(attrs, t.rank)
    return TensorType(tuple(d for i, d in enumerate(t.shape) if i not in axes), t.dtype)


def _reduce_flops(ins: Sequence[TensorType], out: Type, attrs: Attrs) -> int:
    return max(ins[0].size - out.size, 0)  # type: ignore[union-attr]


def _reducer(name: str, fn: Ref, monoid: str, sample_dtype: str = "f32") -> None:
    def ref(x, axes):
        x = np.asarray(x)
        if x.size == 0 and fn in (np.max, np.min):  # XLA folds from the monoid's identity
            identity = MONOIDS[monoid].identity_value(dtypes.from_numpy(x.dtype))
            return fn(x, axis=tuple(axes), initial=x.dtype.type(identity))
        return fn(x, axis=tuple(axes))

    def jax_fn(x, axes):
        import jax.lax as lax

        return getattr(lax, name)(x, tuple(axes))

    method = {np.sum: "sum", np.prod: "prod", np.max: "max", np.min: "min"}.get(fn)

    def program(x: list[str], ts: Sequence[Type], out: Type, a: Attrs) -> str | None:
        # ref's reduction as the array's method (np.sum's wrappers cost 1.5 us more; CuPy
        # arrays have the methods too), where no identity is needed
        if ts[0].size == 0:  # type: ignore[union-attr]
            return None
        return f"{x[0]}.{method}(axis={tuple(a['axes'])})"

    register(OpDef(name, OpKind.REDUCE, 1, ("axes",), _reduce_infer, ref, _reduce_flops, jax_fn,
                   lambda rng: ([sample_array(rng, (3, 4, 5), sample_dtype)], {"axes": (0, 2)}),
                   monoid=MONOIDS[monoid], split=Split.ACCUMULATE, fuse=FusionRole.REDUCTION,
                   program=program if method is not None else None))


_reducer("reduce_sum", np.sum, "add")
_reducer("reduce_max", np.max, "max")
_reducer("reduce_min", np.min, "min")
_reducer("reduce_prod", np.prod, "mul")


def _bitwise_reduce(ufunc: np.ufunc) -> Ref:
    """lax.reduce_and/reduce_or: logical on pred, bitwise on integers (an empty axis gives the
    identity: all bits set for `and`)."""
    return lambda x, axis: ufunc.reduce(x, axis=axis).astype(x.dtype, copy=False)


_reducer("reduce_and", _bitwise_reduce(np.bitwise_and), "and", "pred")
_reducer("reduce_or", _bitwise_reduce(np.bitwise_or), "or", "pred")

# Monoid name -> the reduction that folds with it (what a loop, an HLO reduce computation or
# an argmax's value merge becomes).
MONOID_REDUCTIONS: dict[str, str] = {row.monoid.name: name for name, row in OPS.items()
                                     if row.kind == OpKind.REDUCE and row.split == Split.ACCUMULATE
                                     and row.monoid is not None}


def _arg_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    axes = check_axes(a, t.rank)
    if len(axes) != 1:
        raise OpError("argmax/argmin reduce exactly one axis")
    return TensorType(tuple(d for i, d in enumerate(t.shape) if i not in axes), a["index_dtype"])


def _arg(name: str, fn: Ref, monoid: str) -> None:
    def jax_fn(x, axes, index_dtype):
        import jax.lax as lax

        return getattr(lax, name)(x, axes[0], dtypes.to_numpy(index_dtype))

    def ref(x, axes, index_dtype):
        x = np.asarray(x)
        if x.shape[axes[0]] == 0:  # XLA's fold starts from index 0
            return np.zeros(np.delete(x.shape, axes[0]), dtypes.to_numpy(index_dtype))
        return fn(x, axis=axes[0])

    register(OpDef(name, OpKind.REDUCE, 1, ("axes", "index_dtype"), _arg_infer,
                   ref, _reduce_flops, jax_fn,
                   lambda rng: ([sample_array(rng, (3, 4))], {"axes": (1,), "index_dtype": "i32"}),
                   monoid=MONOIDS[monoid], split=Split.ARG))


_arg("argmax", np.argmax, "max")
_arg("argmin", np.argmin, "min")


def _cumulative(name: str, fn: Ref) -> None:
    def ref(x, axis, reverse=False):
        if reverse:
            return np.flip(fn(np.flip(x, axis), axis=axis), axis)
        return fn(x, axis=axis)

    def jax_fn(x, axis, reverse=False):
        import jax.lax as lax

        return getattr(lax, name)(x, axis, reverse)

    register(OpDef(name, OpKind.OTHER, 1, ("axis", "reverse"),
                   lambda ts, a: ts[0] if 0 <= a["axis"] < ts[0].rank else (_ for _ in ()).throw(
                       OpError(f"{name}: axis {a['axis']} out of range for {ts[0]}")),
                   ref, per_element_flops(1), jax_fn,
                   lambda rng: ([sample_array(rng, (3, 4), low=0.5, high=1.5)], {"axis": 1, "reverse": True}),
                   split=Split.MAP, optional=("reverse",)))


_cumulative("cumsum", np.cumsum)
_cumulative("cumprod", np.cumprod)
_cumulative("cummax", np.maximum.accumulate)
_cumulative("cummin", np.minimum.accumulate)
_cumulative("cumlogsumexp", np.logaddexp.accumulate)
