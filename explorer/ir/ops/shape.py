"""Rows that produce, move, re-index or relabel elements without computing: the sources
(`parameter`, `constant`, `iota`), broadcast, reshape, transpose, squeeze, expand_dims, rev,
the slices, concatenate, split, pad, tile, stack, unstack and get_tuple_element. Most are views
of their operand (traits.View); `pad_reference` is the NumPy `pad` that convolution and window
rows reuse.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtypes
from ..graph import Attrs, Literal, TensorType, TupleType, Type
from ..traits import FusionRole, OpKind, Split, View
from .table import OpDef, OpError, check_axes, lax_fn, no_flops, register, sample_array

# ---------------------------------------------------------------- sources: parameter, constant, iota


def _constant_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    value = attrs["value"]
    if not isinstance(value, Literal):
        raise OpError("constant: value must be a Literal")
    return value.type


def _bound(*args: Any, **attrs: Any) -> Any:
    raise OpError("parameters are bound to arguments, not computed")


# A parameter's type is declared, not inferred: the verifier checks it against `params`.
register(OpDef("parameter", OpKind.SOURCE, 0, ("index",), _bound, _bound, no_flops,
               optional=("index",)))
register(OpDef("constant", OpKind.SOURCE, 0, ("value",), _constant_infer,
               lambda value: value.array, no_flops, lambda value: value.array))


def _iota_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    shape = tuple(a["shape"])
    if not 0 <= a["dimension"] < len(shape):
        raise OpError(f"iota: dimension {a['dimension']} out of range for shape {shape}")
    return TensorType(shape, a["dtype"])


def _iota_ref(dtype: str, shape: tuple[int, ...], dimension: int) -> np.ndarray:
    ar = np.arange(shape[dimension], dtype=dtypes.to_numpy(dtype))
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return np.broadcast_to(ar.reshape(view), shape)


def _jax_iota(dtype: str, shape: tuple[int, ...], dimension: int) -> Any:
    import jax.lax as lax

    return lax.broadcasted_iota(dtypes.to_numpy(dtype), shape, dimension)


register(OpDef("iota", OpKind.SOURCE, 0, ("dtype", "shape", "dimension"), _iota_infer, _iota_ref,
               no_flops, _jax_iota, lambda rng: ([], {"dtype": "i32", "shape": (3, 4), "dimension": 1})))


# ---------------------------------------------------------------- shape ops


def _broadcast_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    shape, bdims = tuple(a["shape"]), tuple(a["broadcast_dimensions"])
    if len(bdims) != t.rank:
        raise OpError(f"broadcast_in_dim: {len(bdims)} broadcast_dimensions for rank {t.rank}")
    for src, dst in enumerate(bdims):
        if not 0 <= dst < len(shape) or t.shape[src] not in (1, shape[dst]):
            raise OpError(f"broadcast_in_dim: cannot broadcast {t} to {shape} via {bdims}")
    if list(bdims) != sorted(set(bdims)):
        raise OpError(f"broadcast_in_dim: broadcast_dimensions {bdims} must be increasing")
    return TensorType(shape, t.dtype)


def _broadcast_ref(x: np.ndarray, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]):
    view = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        view[dst] = x.shape[src]
    return np.broadcast_to(x.reshape(view), shape)


def _jax_broadcast(x: Any, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]) -> Any:
    import jax.lax as lax

    return lax.broadcast_in_dim(x, shape, broadcast_dimensions)


def _broadcast_program(x: list[str], ts: Sequence[Type], out: Type, a: Attrs) -> str:
    (t,) = ts
    view = [1] * len(a["shape"])
    for src, dst in enumerate(a["broadcast_dimensions"]):
        view[dst] = t.shape[src]  # type: ignore[union-attr]
    source = x[0] if tuple(view) == t.shape else f"{x[0]}.reshape({tuple(view)})"  # type: ignore[union-attr]
    if tuple(view) == tuple(a["shape"]):  # (only new unit axes: the reshape is all of it)
        return source
    return f"np.broadcast_to({source}, {tuple(a['shape'])})"


register(OpDef("broadcast_in_dim", OpKind.SHAPE, 1, ("shape", "broadcast_dimensions"), _broadcast_infer,
               _broadcast_ref, no_flops, _jax_broadcast,
               lambda rng: ([sample_array(rng, (4,))], {"shape": (3, 4), "broadcast_dimensions": (1,)}),
               view=View.STRIDED, split=Split.MAP, fuse=FusionRole.POINTWISE, program=_broadcast_program))


def _reshape_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    new = tuple(a["new_sizes"])
    if math.prod(new) != t.size:
        raise OpError(f"reshape: cannot reshape {t} ({t.size} elements) to {list(new)}")
    return TensorType(new, t.dtype)


register(OpDef("reshape", OpKind.SHAPE, 1, ("new_sizes",), _reshape_infer,
               lambda x, new_sizes: np.reshape(x, new_sizes), no_flops,
               lambda x, new_sizes: lax_fn("reshape")(x, tuple(new_sizes)),
               lambda rng: ([sample_array(rng, (3, 4))], {"new_sizes": (2, 6)}), view=View.RESHAPE,
               split=Split.MAP, program=lambda x, ts, out, a: f"{x[0]}.reshape({tuple(a['new_sizes'])})"))


def _transpose_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    perm = tuple(a["permutation"])
    if sorted(perm) != list(range(t.rank)):
        raise OpError(f"transpose: {perm} is not a permutation of rank {t.rank}")
    return TensorType(tuple(t.shape[p] for p in perm), t.dtype)


register(OpDef("transpose", OpKind.SHAPE, 1, ("permutation",), _transpose_infer,
               lambda x, permutation: np.transpose(x, permutation), no_flops, lax_fn("transpose"),
               lambda rng: ([sample_array(rng, (2, 3, 4))], {"permutation": (2, 0, 1)}), view=View.STRIDED,
               split=Split.MAP,
               program=lambda x, ts, out, a: f"{x[0]}.transpose({tuple(a['permutation'])})"))


def _squeeze_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    dims = check_axes(a, t.rank, "dimensions")
    for d in dims:
        if t.shape[d] != 1:
            raise OpError(f"squeeze: dimension {d} of {t} is not 1")
    return TensorType(tuple(s for i, s in enumerate(t.shape) if i not in dims), t.dtype)


register(OpDef("squeeze", OpKind.SHAPE, 1, ("dimensions",), _squeeze_infer,
               lambda x, dimensions: np.squeeze(x, tuple(dimensions)), no_flops, lax_fn("squeeze"),
               lambda rng: ([sample_array(rng, (3, 1, 4))], {"dimensions": (1,)}), view=View.RESHAPE,
               split=Split.MAP))


def _expand_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    dims = tuple(a["dimensions"])
    rank = t.rank + len(dims)
    if any(not 0 <= d < rank for d in dims) or len(set(dims)) != len(dims):
        raise OpError(f"expand_dims: bad dimensions {dims} for {t}")
    it = iter(t.shape)
    return TensorType(tuple(1 if i in dims else next(it) for i in range(rank)), t.dtype)


register(OpDef("expand_dims", OpKind.SHAPE, 1, ("dimensions",), _expand_infer,
               lambda x, dimensions: np.expand_dims(x, tuple(dimensions)), no_flops,
               lax_fn("expand_dims"), lambda rng: ([sample_array(rng, (3, 4))], {"dimensions": (0, 2)}),
               view=View.RESHAPE, split=Split.MAP))

register(OpDef("rev", OpKind.SHAPE, 1, ("dimensions",),
               lambda ts, a: (check_axes(a, ts[0].rank, "dimensions"), ts[0])[1],
               lambda x, dimensions: np.flip(x, tuple(dimensions)) if dimensions else x,
               no_flops, lax_fn("rev"), lambda rng: ([sample_array(rng, (3, 4))], {"dimensions": (1,)}),
               view=View.STRIDED, split=Split.MAP))


def _slice_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    start, limit = tuple(a["start_indices"]), tuple(a["limit_indices"])
    strides = tuple(a.get("strides") or (1,) * t.rank)
    if not len(start) == len(limit) == len(strides) == t.rank:
        raise OpError(f"slice: index lists do not match rank {t.rank}")
    shape = []
    for s, l, st, d in zip(start, limit, strides, t.shape):
        if not (0 <= s <= l <= d) or st < 1:
            raise OpError(f"slice: [{s}:{l}:{st}] out of bounds for dimension of size {d}")
        shape.append(max(0, -(-(l - s) // st)))
    return TensorType(tuple(shape), t.dtype)


def _slice_ref(x, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, strides))]


register(OpDef("slice", OpKind.SHAPE, 1, ("start_indices", "limit_indices", "strides"), _slice_infer,
               _slice_ref, no_flops, lax_fn("slice"),
               lambda rng: ([sample_array(rng, (5, 6))], {"start_indices": (1, 0), "limit_indices": (4, 6),
                                                          "strides": (1, 2)}),
               view=View.STRIDED, split=Split.MAP, optional=("strides",)))


def _dyn_slice_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    t, *idx = ts
    sizes = tuple(a["slice_sizes"])
    if len(idx) != t.rank or len(sizes) != t.rank:
        raise OpError(f"dynamic_slice: needs {t.rank} start indices and slice sizes")
    if any(i.shape != () or not dtypes.is_int(i.dtype) for i in idx):
        raise OpError("dynamic_slice: start indices must be integer scalars")
    if any(not 0 <= s <= d for s, d in zip(sizes, t.shape)):
        raise OpError(f"dynamic_slice: slice_sizes {sizes} do not fit {t}")
    return TensorType(sizes, t.dtype)


def _clamped_starts(shape, sizes, idx) -> list[int]:
    return [int(min(max(int(i), 0), d - s)) for i, d, s in zip(idx, shape, sizes)]


def _dyn_slice_ref(x, *idx, slice_sizes):
    starts = _clamped_starts(x.shape, slice_sizes, idx)
    return x[tuple(slice(s, s + n) for s, n in zip(starts, slice_sizes))]


def _jax_dyn_slice(x, *idx, slice_sizes):
    import jax.lax as lax

    return lax.dynamic_slice(x, idx, slice_sizes)


register(OpDef("dynamic_slice", OpKind.SHAPE, None, ("slice_sizes",), _dyn_slice_infer, _dyn_slice_ref,
               no_flops, _jax_dyn_slice,
               lambda rng: ([sample_array(rng, (5, 6)), np.int32(2), np.int32(5)], {"slice_sizes": (2, 3)})))


def _dyn_update_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    t, upd, *idx = ts
    if upd.rank != t.rank or upd.dtype != t.dtype or any(u > d for u, d in zip(upd.shape, t.shape)):
        raise OpError(f"dynamic_update_slice: update {upd} does not fit {t}")
    if len(idx) != t.rank:
        raise OpError(f"dynamic_update_slice: needs {t.rank} start indices")
    return t


def _dyn_update_ref(x, upd, *idx):
    starts = _clamped_starts(x.shape, upd.shape, idx)
    out = np.array(x, copy=True)
    out[tuple(slice(s, s + n) for s, n in zip(starts, upd.shape))] = upd
    return out


def _jax_dyn_update(x, upd, *idx):
    import jax.lax as lax

    return lax.dynamic_update_slice(x, upd, idx)


register(OpDef("dynamic_update_slice", OpKind.SHAPE, None, (), _dyn_update_infer, _dyn_update_ref,
               no_flops, _jax_dyn_update,
               lambda rng: ([sample_array(rng, (5, 6)), sample_array(rng, (2, 2)), np.int32(1),
                             np.int32(9)], {})))


def _concat_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    if not ts:
        raise OpError("concatenate needs at least one operand")
    d = a["dimension"]
    first = ts[0]
    if not 0 <= d < first.rank:
        raise OpError(f"concatenate: dimension {d} out of range for {first}")
    for t in ts:
        if t.dtype != first.dtype or t.rank != first.rank or any(
            x != y for i, (x, y) in enumerate(zip(t.shape, first.shape)) if i != d
        ):
            raise OpError(f"concatenate: {t} does not fit {first} along dimension {d}")
    shape = list(first.shape)
    shape[d] = sum(t.shape[d] for t in ts)
    return TensorType(tuple(shape), first.dtype)


def _jax_concat(*xs, dimension):
    import jax.lax as lax

    return lax.concatenate(xs, dimension)


register(OpDef("concatenate", OpKind.SHAPE, None, ("dimension",), _concat_infer,
               lambda *xs, dimension: np.concatenate(xs, axis=dimension), no_flops, _jax_concat,
               lambda rng: ([sample_array(rng, (2, 3)), sample_array(rng, (4, 3))], {"dimension": 0}),
               split=Split.MAP))


def _split_infer(ts: Sequence[TensorType], a: Attrs) -> TupleType:
    (t,) = ts
    axis, sizes = a["axis"], tuple(a["sizes"])
    if not 0 <= axis < t.rank or sum(sizes) != t.shape[axis]:
        raise OpError(f"split: sizes {sizes} along axis {axis} do not add up to {t}")
    return TupleType(tuple(
        TensorType(tuple(s if i == axis else d for i, d in enumerate(t.shape)), t.dtype)
        for s in sizes))


def _split_bounds(sizes: Sequence[int]) -> list[tuple[int, int]]:
    """Each piece's [start, stop) along the axis. The pieces are basic-index views, as
    np.split gives, without its ~25 us of Python (a GPT block's qkv split was 4% of its
    gradient's call at the zoo's sizes)."""
    ends = np.cumsum((0, *sizes)).tolist()
    return list(zip(ends, ends[1:]))


def _split_ref(x, sizes, axis):
    x = np.asarray(x)
    return tuple(x[(slice(None),) * axis + (slice(lo, hi),)] for lo, hi in _split_bounds(sizes))


def _split_program(x: list[str], ts: Sequence[Type], out: Type, a: Attrs) -> str:
    lead = ":, " * a["axis"]
    return "(" + "".join(f"{x[0]}[{lead}{lo}:{hi}], " for lo, hi in _split_bounds(a["sizes"])) + ")"


register(OpDef("split", OpKind.SHAPE, 1, ("sizes", "axis"), _split_infer, _split_ref, no_flops,
               lambda x, sizes, axis: tuple(lax_fn("split")(x, tuple(sizes), axis)),
               lambda rng: ([sample_array(rng, (5, 4))], {"sizes": (2, 3), "axis": 0}),
               program=_split_program))


def _pad_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    t, pv = ts
    cfg = tuple(tuple(c) for c in a["padding_config"])
    if pv.shape != () or pv.dtype != t.dtype or len(cfg) != t.rank:
        raise OpError(f"pad: padding value {pv} or config {cfg} does not fit {t}")
    shape = []
    for d, (lo, hi, interior) in zip(t.shape, cfg):
        n = lo + hi + d + max(d - 1, 0) * interior
        if interior < 0 or n < 0:
            raise OpError(f"pad: bad padding {(lo, hi, interior)} for dimension {d}")
        shape.append(n)
    return TensorType(tuple(shape), t.dtype)


def pad_reference(x, value, padding_config):
    """The NumPy reference of `pad` (per dimension (low, high, interior); negative low/high
    crop); conv and window rows reuse it to pad and dilate their operands."""
    cfg = [tuple(c) for c in padding_config]
    grown = [d + max(d - 1, 0) * i + max(lo, 0) + max(hi, 0) for d, (lo, hi, i) in zip(x.shape, cfg)]
    out = np.full(grown, value, dtype=x.dtype)
    out[tuple(slice(max(lo, 0), max(lo, 0) + (d - 1) * (i + 1) + 1 if d else max(lo, 0), i + 1)
              for d, (lo, hi, i) in zip(x.shape, cfg))] = x
    crop = tuple(slice(-min(lo, 0), g + min(hi, 0)) for g, (lo, hi, _) in zip(grown, cfg))
    return out[crop]


def _jax_pad(x, value, padding_config):
    import jax.lax as lax

    return lax.pad(x, value, [tuple(c) for c in padding_config])


register(OpDef("pad", OpKind.SHAPE, 2, ("padding_config",), _pad_infer, pad_reference, no_flops, _jax_pad,
               lambda rng: ([sample_array(rng, (3, 4)), np.float32(0.5)],
                            {"padding_config": ((1, 2, 1), (-1, 0, 0))})))


def _tile_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    reps = tuple(a["reps"])
    if len(reps) != t.rank or any(r < 0 for r in reps):
        raise OpError(f"tile: reps {reps} do not fit {t}")
    return TensorType(tuple(d * r for d, r in zip(t.shape, reps)), t.dtype)


register(OpDef("tile", OpKind.SHAPE, 1, ("reps",), _tile_infer, lambda x, reps: np.tile(x, reps),
               no_flops, lambda x, reps: lax_fn("tile")(x, tuple(reps)),
               lambda rng: ([sample_array(rng, (2, 3))], {"reps": (2, 1)})))


def _stack_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    if not ts or any(t != ts[0] for t in ts):
        raise OpError(f"stack: operands must have equal types, got {', '.join(map(str, ts))}")
    axis = a["axis"]
    if not 0 <= axis <= ts[0].rank:
        raise OpError(f"stack: axis {axis} out of range for {ts[0]}")
    shape = list(ts[0].shape)
    shape.insert(axis, len(ts))
    return TensorType(tuple(shape), ts[0].dtype)


def _jax_stack(*xs, axis):
    import jax.numpy as jnp

    return jnp.stack(xs, axis)


register(OpDef("stack", OpKind.SHAPE, None, ("axis",), _stack_infer,
               lambda *xs, axis: np.stack(xs, axis), no_flops, _jax_stack,
               lambda rng: ([sample_array(rng, (2, 3)), sample_array(rng, (2, 3))], {"axis": 1})))


def _unstack_infer(ts: Sequence[TensorType], a: Attrs) -> TupleType:
    (t,) = ts
    axis = a["axis"]
    if not 0 <= axis < t.rank:
        raise OpError(f"unstack: axis {axis} out of range for {t}")
    piece = TensorType(t.shape[:axis] + t.shape[axis + 1:], t.dtype)
    return TupleType((piece,) * t.shape[axis])


def _unstack_ref(x, axis):
    """The pieces along `axis`, each a basic-index view of `x` (as split's are)."""
    x = np.asarray(x)
    lead = (slice(None),) * axis
    return tuple(x[(*lead, k)] for k in range(x.shape[axis]))


def _unstack_program(x: list[str], ts: Sequence[Type], out: Type, a: Attrs) -> str:
    lead = ":, " * a["axis"]
    return "(" + "".join(f"{x[0]}[{lead}{k}], " for k in range(len(out.elements))) + ")"  # type: ignore[union-attr]


# The transpose of stack (JAX's unstack primitive: jnp.stack's gradient).
register(OpDef("unstack", OpKind.SHAPE, 1, ("axis",), _unstack_infer, _unstack_ref, no_flops,
               lambda x, axis: tuple(lax_fn("unstack")(x, axis)),
               lambda rng: ([sample_array(rng, (2, 3, 4))], {"axis": 1}),
               program=_unstack_program))


def _gte_infer(ts: Sequence[Type], a: Attrs) -> TensorType:
    (t,) = ts
    if not isinstance(t, TupleType) or not 0 <= a["index"] < len(t.elements):
        raise OpError(f"get_tuple_element: index {a['index']} does not fit {t}")
    return t.elements[a["index"]]


register(OpDef("get_tuple_element", OpKind.SHAPE, 1, ("index",), _gte_infer,  # type: ignore[arg-type]
               lambda x, index: x[index], no_flops, lambda x, index: x[index], view=View.RESHAPE,
               split=Split.MAP))
