"""Rows for XLA's general `gather` and `scatter` (and scatter-add/-mul/-min/-max): what
`x[idx]`, `x[:, idx]`, `take_along_axis`, embedding lookups and `x.at[i].set/add/mul/min/max`
trace to, and what the gradient of a gather is (a scatter-add).

JAX's GatherDimensionNumbers / ScatterDimensionNumbers become flat attributes named as their
fields (plain tuples, so they print and parse), the index vector is always the indices' last
dimension (as JAX emits it), and GatherScatterMode becomes `mode`, one of "clip", "fill" and
"promise_in_bounds". Out of bounds, as JAX does on CPU: a gather clamps the start of each
slice ("clip" and "promise_in_bounds") or fills the whole slice with `fill_value` ("fill";
None means NaN for floats, the lowest value of a signed type, the highest of an unsigned one,
true for pred); a scatter clamps the start of each window ("clip") or drops any window that
does not fit whole ("fill", "promise_in_bounds"). Duplicate indices accumulate for the
combining scatters; for `scatter` (replace) the last update wins, as on XLA:CPU.

Split: both map chunks of the indices' batch dimensions to chunks of the result (an
embedding lookup over a batch of tokens runs chunk by chunk; the table passes whole).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes
from ..graph import Attrs, TensorType
from ..traits import OpKind, Split
from .table import OpDef, OpError, no_flops, register, sample_array

MODES = ("clip", "fill", "promise_in_bounds")
GATHER_DIMS = ("offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
               "start_indices_batching_dims")
SCATTER_DIMS = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                "operand_batching_dims", "scatter_indices_batching_dims")
_FLAGS = ("indices_are_sorted", "unique_indices")


def mode_name(mode: Any) -> str:
    """JAX's GatherScatterMode (enum, its int value, or a string) as our attribute value."""
    if isinstance(mode, str) and mode in MODES:
        return mode
    names = {1: "clip", 2: "fill", 3: "promise_in_bounds"}
    value = getattr(mode, "value", mode)
    if value not in names:
        raise OpError(f"gather/scatter mode {mode!r} is not supported (one of {MODES})")
    return names[value]


def _dims(a: Attrs, key: str) -> tuple[int, ...]:
    return tuple(a.get(key) or ())


def _check_mode(op: str, a: Attrs) -> None:
    if a.get("mode", "promise_in_bounds") not in MODES:
        raise OpError(f"{op}: mode {a.get('mode')!r} is not one of {MODES}")


def _index_batch(idx: TensorType, op: str) -> tuple[int, ...]:
    if idx.rank == 0 or not dtypes.is_int(idx.dtype):
        raise OpError(f"{op}: indices {idx} must be integers with the index vector last")
    return idx.shape[:-1]


# ---------------------------------------------------------------- gather


def _gather_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    x, idx = ts
    _check_mode("gather", a)
    batch = _index_batch(idx, "gather")
    offset, collapsed, start_map, obatch, ibatch = (_dims(a, k) for k in GATHER_DIMS)
    sizes = tuple(a["slice_sizes"])
    if len(sizes) != x.rank or any(not 0 <= s <= d for s, d in zip(sizes, x.shape)):
        raise OpError(f"gather: slice_sizes {sizes} do not fit {x}")
    if len(start_map) != idx.shape[-1] or any(not 0 <= d < x.rank for d in start_map):
        raise OpError(f"gather: start_index_map {start_map} does not fit {x} and indices {idx}")
    if len(obatch) != len(ibatch) or any(sizes[d] != 1 for d in collapsed + obatch):
        raise OpError("gather: collapsed and batching dims need slice size 1 and must pair up")
    kept = [s for d, s in enumerate(sizes) if d not in collapsed + obatch]
    rank = len(batch) + len(kept)
    if len(offset) != len(kept) or any(not 0 <= d < rank for d in offset):
        raise OpError(f"gather: offset_dims {offset} do not fit {len(kept)} slice dims")
    it_b, it_k = iter(batch), iter(kept)
    return TensorType(tuple(next(it_k) if d in offset else next(it_b) for d in range(rank)),
                      x.dtype)


def default_fill(dtype: np.dtype) -> Any:
    name = dtypes.from_numpy(dtype)
    if dtypes.is_float(name) or name.startswith("c"):  # (bfloat16 too, not np.inexact)
        return np.nan
    if dtypes.is_bool(name):
        return True
    info = dtypes.iinfo(name)  # (int4/uint4 too, which np.iinfo does not know)
    return info.min if name.startswith("i") else info.max


def _starts(shape: Sequence[int], idx: np.ndarray, index_map: Sequence[int],
            obatch: Sequence[int], ibatch: Sequence[int]) -> np.ndarray:
    """(batch..., rank) starts in the operand: index components on `index_map`, the position
    along the indices' batching dims on the operand's batching dims, else 0."""
    batch_shape = idx.shape[:-1]
    starts = np.zeros((*batch_shape, len(shape)), np.int64)
    for k, d in enumerate(index_map):
        starts[..., d] = idx[..., k]
    for od, bd in zip(obatch, ibatch):
        pos = np.arange(batch_shape[bd]).reshape([-1 if i == bd else 1
                                                  for i in range(len(batch_shape))])
        starts[..., od] = pos
    return starts


def _flat_windows(shape: Sequence[int], starts: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Flat (C-order) positions in an array of `shape` of the windows of `sizes` at each
    start: int64 of shape (batch..., prod(sizes)), one allocation of the result's size."""
    strides = np.cumprod((*shape[1:], 1)[::-1])[::-1].astype(np.int64)
    base = starts @ strides
    grid = np.zeros((), np.int64)
    for d, s in enumerate(sizes):
        grid = (grid[..., None] + np.arange(s, dtype=np.int64) * strides[d])
    return base[..., None] + grid.reshape(-1)


def take_windows(x: np.ndarray, starts: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """The windows of `sizes` at each of `starts` (batch..., rank), all in bounds, as
    (batch..., prod(sizes)): one fancy index of the flat positions."""
    return np.ravel(x)[_flat_windows(x.shape, starts, sizes)]


def put_windows(out: np.ndarray, starts: np.ndarray, sizes: Sequence[int], values: np.ndarray,
                combine: Any) -> None:
    """Combine `values` (k, prod(sizes)) into the windows of `out` at `starts` (k, rank), all
    in bounds, in order: assigned (combine None, the last write wins) or by a ufunc's `at`."""
    flat = _flat_windows(out.shape, starts, sizes)
    values = values.reshape(flat.shape)
    if combine is None:
        out.reshape(-1)[flat] = values
    else:
        combine.at(out.reshape(-1), flat, values)


def gather_with(take: Callable[[np.ndarray, np.ndarray, Sequence[int]], np.ndarray]) -> Any:
    """lax.gather's semantics, reading the windows through `take` (take_windows, or a
    backend's compiled loop)."""
    def gather(x, idx, *, slice_sizes, offset_dims, collapsed_slice_dims, start_index_map,
               operand_batching_dims=(), start_indices_batching_dims=(), mode="promise_in_bounds",
               fill_value=None, indices_are_sorted=False, unique_indices=False):
        return _gather(take, x, idx, tuple(slice_sizes), offset_dims, collapsed_slice_dims,
                       start_index_map, operand_batching_dims, start_indices_batching_dims, mode,
                       fill_value)
    return gather


@dataclass(frozen=True)
class GatherPlan:
    """What a gather does for one operand shape and one index array: the clipped window
    starts, which windows fill (mode "fill"), and how the windows become the result. A
    backend whose indices are known ahead (a constant index table) makes it once; `run`
    then reads the windows of each operand through `take`."""

    starts: np.ndarray
    sizes: tuple[int, ...]
    lead: tuple[int, ...]
    ok: np.ndarray | None
    fill: Any
    drop: tuple[int, ...]
    offset_dims: tuple[int, ...]

    def run(self, take: Callable[[np.ndarray, np.ndarray, Sequence[int]], np.ndarray],
            x: np.ndarray) -> np.ndarray:
        out = take(x, self.starts, self.sizes).reshape((*self.lead, *self.sizes))
        if self.ok is not None:
            out = np.where(self.ok, out, np.asarray(self.fill, x.dtype))
        out = out.reshape(tuple(n for i, n in enumerate(out.shape) if i not in self.drop))
        nb = len(self.lead)
        return np.moveaxis(out, list(range(nb, out.ndim)), list(self.offset_dims))


def gather_plan(shape: Sequence[int], dtype: Any, idx: Any, *, slice_sizes: Sequence[int],
                offset_dims: Sequence[int], collapsed_slice_dims: Sequence[int],
                start_index_map: Sequence[int], operand_batching_dims: Sequence[int] = (),
                start_indices_batching_dims: Sequence[int] = (), mode: str = "promise_in_bounds",
                fill_value: Any = None, **_: Any) -> GatherPlan:
    """lax.gather's plan for an operand of `shape` and `dtype` and the indices `idx`."""
    idx = np.asarray(idx, np.int64)
    sizes = tuple(slice_sizes)
    starts = _starts(shape, idx, start_index_map, operand_batching_dims,
                     start_indices_batching_dims)
    upper = np.asarray(shape) - np.asarray(sizes)
    ok = None
    if mode == "fill":
        bounds = upper[list(start_index_map)]
        inside = np.all((idx >= 0) & (idx <= bounds), axis=-1)
        ok = inside.reshape((*inside.shape, *[1] * len(sizes)))
    fill = default_fill(np.dtype(dtype)) if fill_value is None else fill_value
    drop = tuple(idx.ndim - 1 + d for d in (*collapsed_slice_dims, *operand_batching_dims))
    return GatherPlan(np.clip(starts, 0, upper), sizes, idx.shape[:-1], ok, fill, drop,
                      tuple(offset_dims))


def _gather(take, x, idx, sizes, offset_dims, collapsed_slice_dims, start_index_map,  # noqa: ANN001, ANN202
            operand_batching_dims, start_indices_batching_dims, mode, fill_value):
    plan = gather_plan(x.shape, x.dtype, idx, slice_sizes=sizes, offset_dims=offset_dims,
                       collapsed_slice_dims=collapsed_slice_dims, start_index_map=start_index_map,
                       operand_batching_dims=operand_batching_dims,
                       start_indices_batching_dims=start_indices_batching_dims, mode=mode,
                       fill_value=fill_value)
    return plan.run(take, x)


def _jax_gather(x, idx, *, slice_sizes, mode="promise_in_bounds", fill_value=None,
                indices_are_sorted=False, unique_indices=False, **dims):
    import jax.lax as lax

    dn = lax.GatherDimensionNumbers(**{k: tuple(dims.get(k) or ()) for k in GATHER_DIMS})
    return lax.gather(x, idx, dn, tuple(slice_sizes), mode=mode, fill_value=fill_value,
                      indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)


def _gather_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    """An embedding lookup of a (2, 3) batch of token ids, some out of range (filled)."""
    table = sample_array(rng, (5, 4))
    ids = rng.integers(-1, 7, size=(2, 3, 1)).astype(np.int32)
    return [table, ids], {"offset_dims": (2,), "collapsed_slice_dims": (0,),
                          "start_index_map": (0,), "operand_batching_dims": (),
                          "start_indices_batching_dims": (), "slice_sizes": (1, 4),
                          "mode": "fill", "fill_value": None}


def _gather_split(ins: Sequence[TensorType], out: TensorType, a: Attrs) -> dict[int, tuple]:
    """Result axis -> operand axes: the indices' batch dims (not batching dims, which pair
    with the operand) map to the result's non-offset dims in order."""
    offset = _dims(a, "offset_dims")
    ibatch = _dims(a, "start_indices_batching_dims")
    result_batch = [d for d in range(out.rank) if d not in offset]
    return {r: (None, b) for b, r in enumerate(result_batch) if b not in ibatch}


_GATHER_ATTRS = ("slice_sizes", *GATHER_DIMS, "mode", "fill_value", *_FLAGS)
register(OpDef("gather", OpKind.OTHER, 2, _GATHER_ATTRS, _gather_infer, gather_with(take_windows),
               no_flops, _jax_gather, _gather_sample, split=Split.MAP, split_axes=_gather_split,
               optional=("operand_batching_dims", "start_indices_batching_dims", "mode", "fill_value",
                         *_FLAGS)))


# ---------------------------------------------------------------- scatter


def _scatter_infer(op: str):
    def infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
        x, idx, upd = ts
        _check_mode(op, a)
        batch = _index_batch(idx, op)
        window, inserted, to_operand, obatch, ibatch = (_dims(a, k) for k in SCATTER_DIMS)
        if upd.dtype != x.dtype:
            raise OpError(f"{op}: updates {upd} and operand {x} differ in element type")
        if len(to_operand) != idx.shape[-1] or any(not 0 <= d < x.rank for d in to_operand):
            raise OpError(f"{op}: scatter_dims_to_operand_dims {to_operand} do not fit {x}")
        kept = [d for d in range(x.rank) if d not in inserted + obatch]
        if len(window) != len(kept) or upd.rank != len(batch) + len(window):
            raise OpError(f"{op}: updates {upd} do not fit {len(batch)} scatter dims and "
                          f"{len(kept)} window dims")
        scatter_dims = [d for d in range(upd.rank) if d not in window]
        if tuple(upd.shape[d] for d in scatter_dims) != batch:
            raise OpError(f"{op}: updates {upd} do not match the indices' batch {batch}")
        if any(upd.shape[w] > x.shape[d] for w, d in zip(window, kept)):
            raise OpError(f"{op}: update window of {upd} is larger than {x}")
        return x

    return infer


def scatter_with(combine: Any, put: Callable[..., None] = put_windows) -> Any:
    """lax.scatter's semantics (combine None) or scatter-add/mul/min/max's (a ufunc), writing
    the windows through `put` (put_windows, or a backend's compiled loop)."""
    def ref(x, idx, upd, *, update_window_dims, inserted_window_dims,
            scatter_dims_to_operand_dims, operand_batching_dims=(),
            scatter_indices_batching_dims=(), mode="fill", indices_are_sorted=False,
            unique_indices=False):
        idx = np.asarray(idx, np.int64)
        window = tuple(update_window_dims)
        skipped = (*inserted_window_dims, *operand_batching_dims)
        kept = [d for d in range(x.ndim) if d not in skipped]
        sizes = [1] * x.ndim
        for w, d in zip(window, kept):
            sizes[d] = upd.shape[w]
        # updates as (batch..., window in operand dim order, size 1 where skipped)
        nb = idx.ndim - 1
        moved = np.moveaxis(upd, list(window), list(range(nb, nb + len(window))))
        moved = moved.reshape((*moved.shape[:nb], *sizes))
        starts = _starts(x.shape, idx, scatter_dims_to_operand_dims, operand_batching_dims,
                         scatter_indices_batching_dims)
        upper = np.asarray(x.shape) - np.asarray(sizes)
        if mode == "clip":
            starts = np.clip(starts, 0, upper)
        fits = np.all((starts >= 0) & (starts <= upper), axis=-1)
        flat_starts = starts[fits]  # (k, rank): the windows that fit whole
        values = moved[fits]  # (k, *sizes)
        # C order: the windows are written through a flat view (a copy of a transposed
        # operand keeps its layout, and reshaping it to flat would copy, losing the writes)
        out = np.array(x, copy=True, order="C")
        if flat_starts.shape[0]:
            put(out, flat_starts, sizes, values.reshape(len(values), -1), combine)
        return out

    return ref


def _jax_scatter(fn: str):
    def lower(x, idx, upd, *, mode="fill", indices_are_sorted=False, unique_indices=False, **dims):
        import jax.lax as lax

        dn = lax.ScatterDimensionNumbers(**{k: tuple(dims.get(k) or ()) for k in SCATTER_DIMS})
        return getattr(lax, fn)(x, idx, upd, dn, indices_are_sorted=indices_are_sorted,
                                unique_indices=unique_indices, mode=mode)

    return lower


def _scatter_sample(mode: str, unique: bool):
    def sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
        """`x.at[ids].op(u)` on rows of a (6, 3) operand, some ids out of range."""
        x = sample_array(rng, (6, 3), low=0.5, high=1.5)
        if unique:
            ids = rng.permutation(np.arange(-1, 8))[:4]
        else:
            ids = rng.integers(-1, 8, size=4)
        upd = sample_array(rng, (4, 3), low=0.5, high=1.5)
        return [x, ids.astype(np.int32).reshape(4, 1), upd], {
            "update_window_dims": (1,), "inserted_window_dims": (0,),
            "scatter_dims_to_operand_dims": (0,), "operand_batching_dims": (),
            "scatter_indices_batching_dims": (), "mode": mode, "indices_are_sorted": False,
            "unique_indices": unique}

    return sample


def _scatter_flops(ins: Sequence[TensorType], out: Any, a: Attrs) -> int:
    return ins[2].size


_SCATTER_ATTRS = (*SCATTER_DIMS, "mode", *_FLAGS)
for _name, _combine, _lax_fn, _mode in (("scatter", None, "scatter", "fill"),
                                        ("scatter-add", np.add, "scatter_add", "fill"),
                                        ("scatter-mul", np.multiply, "scatter_mul", "clip"),
                                        ("scatter-min", np.minimum, "scatter_min", "fill"),
                                        ("scatter-max", np.maximum, "scatter_max", "clip")):
    register(OpDef(_name, OpKind.OTHER, 3, _SCATTER_ATTRS, _scatter_infer(_name),
                   scatter_with(_combine), no_flops if _combine is None else _scatter_flops,
                   _jax_scatter(_lax_fn), _scatter_sample(_mode, _combine is None),
                   optional=("operand_batching_dims", "scatter_indices_batching_dims", "mode",
                             *_FLAGS)))
