"""Sorting rows: `sort` (several operands sorted by their first `num_keys`, NaNs last, as
lax.sort) and `top_k` (the k largest along an axis, in XLA's total order: `top_k_key`, which the
backends' top-k merges share).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from ..graph import Attrs, TensorType, TupleType, Type
from ..traits import OpKind, Split
from .table import OpDef, OpError, register, sample_array


def _sort_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    first = ts[0]
    if any(t.shape != first.shape for t in ts):
        raise OpError("sort: operands must have the same shape")
    if not 0 <= a["dimension"] < first.rank:
        raise OpError(f"sort: dimension {a['dimension']} out of range for {first}")
    return first if len(ts) == 1 else TupleType(tuple(ts))


def _sort_key(k: np.ndarray) -> np.ndarray:
    """A key NumPy sorts as lax.sort does (NaNs last): ml_dtypes' floats (bfloat16, float8)
    compare NaNs as unordered in argsort, so they sort as float32 (exact)."""
    if k.dtype.kind == "V":  # ml_dtypes' element types, all exact in float32
        return k.astype(np.float32)
    return k


def _sort_ref(*xs, dimension, is_stable=True, num_keys=1):
    keys = [_sort_key(np.moveaxis(k, dimension, -1)) for k in xs[:num_keys]]
    perm = np.lexsort(keys[::-1], axis=-1) if num_keys > 1 else np.argsort(keys[0], axis=-1,
                                                                          kind="stable")
    out = tuple(np.moveaxis(np.take_along_axis(np.moveaxis(x, dimension, -1), perm, -1), -1,
                            dimension) for x in xs)
    return out[0] if len(xs) == 1 else out


def _jax_sort(*xs, dimension, is_stable=True, num_keys=1):
    import jax.lax as lax

    out = lax.sort(xs, dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    return out[0] if len(xs) == 1 else tuple(out)


def _sort_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    n = ins[0].shape[a["dimension"]]
    return int(ins[0].size * max(1.0, math.log2(max(n, 1))))


register(OpDef("sort", OpKind.OTHER, None, ("dimension", "is_stable", "num_keys"), _sort_infer, _sort_ref,
               _sort_flops, _jax_sort,
               lambda rng: ([sample_array(rng, (3, 5)), sample_array(rng, (3, 5), "i32")],
                            {"dimension": 1, "is_stable": True, "num_keys": 1}),
               split=Split.MAP, optional=("is_stable", "num_keys")))


def _topk_infer(ts: Sequence[TensorType], a: Attrs) -> TupleType:
    (t,) = ts
    axis = a.get("axis", t.rank - 1)
    if t.rank == 0 or not 0 <= axis < t.rank or not 0 <= a["k"] <= t.shape[axis]:
        raise OpError(f"top_k: k={a['k']} does not fit {t} along axis {axis}")
    shape = tuple(a["k"] if i == axis else d for i, d in enumerate(t.shape))
    return TupleType((TensorType(shape, t.dtype), TensorType(shape, "i32")))


def top_k_key(xp: Any, x: Any) -> Any:
    """A float64 key whose stable ascending sort is lax.top_k's order: XLA's total order,
    descending, so +NaN first, then +inf, the finite values (+0.0 above -0.0), -inf, and -NaN
    last (the NaN that sqrt or log of a negative number gives on x86 has its sign bit set)."""
    if x.dtype == ml_dtypes.bfloat16:  # (not an xp.floating: as float32, exactly, NaN signs kept)
        x = x.astype(np.float32)
    key = xp.negative(x.astype(xp.float64))  # exact for every integer type up to 2**53
    if xp.issubdtype(x.dtype, xp.floating):
        big, nan, neg = xp.finfo(xp.float64).max, xp.isnan(x), xp.signbit(x)
        key[xp.isposinf(x)], key[xp.isneginf(x)] = -big, big
        key[nan & ~neg], key[nan & neg] = -xp.inf, xp.inf
        key[(x == 0) & neg] = 5e-324  # -0.0 ranks just below +0.0, as in XLA's total order
    return key


def _topk_ref(x, k, axis=-1):
    moved = np.moveaxis(x, axis, -1)
    key = top_k_key(np, moved)
    idx = np.argsort(key, axis=-1, kind="stable")[..., :k]
    vals = np.take_along_axis(moved, idx, -1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx.astype(np.int32), -1, axis)


def _jax_topk(x, k, axis=-1):
    import jax.lax as lax

    if axis in (-1, x.ndim - 1):
        return tuple(lax.top_k(x, k))
    import jax.numpy as jnp

    v, i = lax.top_k(jnp.moveaxis(x, axis, -1), k)
    return jnp.moveaxis(v, -1, axis), jnp.moveaxis(i, -1, axis)


def _topk_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    return int(ins[0].size * max(1.0, math.log2(max(a["k"], 2))))


register(OpDef("top_k", OpKind.OTHER, 1, ("k", "axis"), _topk_infer, _topk_ref, _topk_flops, _jax_topk,
               lambda rng: ([sample_array(rng, (3, 6))], {"k": 2, "axis": 1}), split=Split.TOP_K,
               optional=("axis",)))
