"""Gathers and scatters at indices that change from call to call, laid out once per node.

indexing.py's loops take the windows' flat starts; the op rows' references (gather_with,
scatter_with) work those out on every call with a dozen NumPy operations over the indices
(starts, bounds, clipping, masks, the window grid, the result's axes): at the test zoo's sizes
a GPT gradient's embedding lookup and its two scatter-adds took 77-82 us each, 30% of the
program. Here what depends only on the shapes and the dimension numbers (strides, bounds,
the window grid, the axes of the result and of the updates) is worked out when the program
is made, and a call is one numba loop over the index rows, which reads each row's start,
its bounds and its window in one pass.

Same semantics as the rows' references, bit for bit: a gather clips every start into the
operand ("fill" mode fills the windows whose index lies outside, with the row's fill value);
a scatter drops the windows that do not fit whole (clipping them first in "clip" mode) and
combines the others in order. Batching dimensions (take_along_axis's) start each row's
window at its position along the paired index dimension. `prepare` gives None where it does
not apply (a start_index_map naming a dimension twice, element types numba has no form
for, a rank-0 operand); the program then calls the reference form as before.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.graph import Attrs, TensorType
from ...ir.ops.indexing import default_fill
from . import scatter_parallel
from .indexing import PARALLEL_MIN, combines, window_grid
from .numba_cache import cached_njit
from .numba_dialect import numba_takes

SCATTERS = {"scatter": "put", "scatter-add": "add", "scatter-mul": "multiply",
            "scatter-min": "minimum", "scatter-max": "maximum"}


@functools.cache
def _loops() -> dict[Any, Any]:
    from numba import prange, uint64

    def gather_rows(xf, idx, imap, strides, upper, batching, grid, run, fill_mode, fill, outf):  # noqa: ANN001, ANN202
        width = grid.shape[0] * run
        if imap.shape[0] == 1 and batching.shape[0] == 0 and grid.shape[0] == 1:
            # one index per row, one contiguous run per window (x[i], an embedding lookup,
            # jnp.take): the tight loop, the start clamped without a branch
            d = imap[0]
            hi, step, g0 = upper[d], strides[d], grid[0]
            for b in prange(idx.shape[0]):
                s = np.int64(idx[b, 0])
                inside = s >= 0 and s <= hi
                o = uint64(min(max(s, 0), hi) * step + g0)
                q = uint64(b * run)
                if run == 1:
                    v = xf[o]
                    outf[q] = fill if fill_mode and not inside else v
                elif fill_mode and not inside:
                    for j in range(run):
                        outf[q + uint64(j)] = fill
                else:
                    for j in range(run):
                        outf[q + uint64(j)] = xf[o + uint64(j)]
            return
        for b in prange(idx.shape[0]):
            base, inside = 0, True
            for m in range(batching.shape[0]):  # (operand dim, divisor, size) per batching pair
                base += (b // batching[m, 1]) % batching[m, 2] * strides[batching[m, 0]]
            for k in range(imap.shape[0]):
                d = imap[k]
                s = np.int64(idx[b, k])
                if s < 0 or s > upper[d]:
                    inside = False
                    s = 0 if s < 0 else upper[d]
                base += s * strides[d]
            # offsets in bounds from here: unsigned, so that numba wraps no index (the
            # wrap-around test on a signed index kept the copies from vectorizing: 5x slower)
            q = uint64(b * width)
            if fill_mode and not inside:
                for w in range(width):
                    outf[q + uint64(w)] = fill
            elif width == 1:
                outf[q] = xf[uint64(base + grid[0])]
            else:
                for g in range(grid.shape[0]):
                    o, p = uint64(base + grid[g]), q + uint64(g * run)
                    for j in range(run):
                        outf[p + uint64(j)] = xf[o + uint64(j)]

    start = scatter_parallel.row_start()

    def scatter_rows(combine):  # noqa: ANN001, ANN202
        @cached_njit(error_model="numpy")
        def fn(outf, idx, imap, strides, upper, batching, grid, run, clip, vals):  # noqa: ANN001, ANN202
            width = grid.shape[0] * run
            for b in range(idx.shape[0]):  # in order: later windows combine after earlier
                base = start(idx, b, imap, strides, upper, batching, clip)
                if base < 0:  # the window does not fit whole: dropped
                    continue
                if width == 1:
                    o = uint64(base + grid[0])
                    outf[o] = combine(outf[o], vals[uint64(b)])
                    continue
                q = uint64(b * width)
                for g in range(grid.shape[0]):
                    o, p = uint64(base + grid[g]), q + uint64(g * run)
                    for j in range(run):
                        u = uint64(j)
                        outf[o + u] = combine(outf[o + u], vals[p + u])
        return fn

    return {("gather", False): cached_njit(error_model="numpy")(gather_rows),
            ("gather", True): cached_njit(parallel=True, error_model="numpy")(gather_rows),
            **{name: scatter_rows(fn) for name, fn in combines().items()}}


def _dims(a: Attrs, k: str) -> tuple[int, ...]:
    return tuple(a.get(k) or ())


def _common(x: TensorType, idx: TensorType, index_map: Sequence[int],
            obatch: Sequence[int], ibatch: Sequence[int], sizes: Sequence[int]
            ) -> tuple[np.ndarray, ...] | None:
    """(index map, operand strides, start bounds, batching pairs, window grid, row length) as
    the loops take them, or None where the prepared form does not apply. A batching pair
    (operand dim, divisor, size): the start along that operand dim is the row's position
    along the paired index batch dim, (row // divisor) % size."""
    if (x.rank == 0 or len(set(index_map)) != len(index_map) or len(obatch) != len(ibatch)
            or not numba_takes(dtypes.to_numpy(x.dtype)) or not dtypes.is_int(idx.dtype)
            or dtypes.bits(idx.dtype) < 8 or idx.rank == 0 or idx.shape[-1] != len(index_map)):
        return None
    strides, grid, run = window_grid(x.shape, sizes)
    upper = np.asarray(x.shape, np.int64) - np.asarray(sizes, np.int64)
    batch = idx.shape[:-1]
    batching = np.asarray([(od, math.prod(batch[bd + 1:]), batch[bd])
                           for od, bd in zip(obatch, ibatch)], np.int64).reshape(-1, 3)
    return np.asarray(index_map, np.int64), strides, upper, batching, grid, np.int64(run)


def prepare_gather(x: TensorType, idx: TensorType, a: Attrs) -> Callable[..., np.ndarray] | None:
    """gather(x, idx) for these types and attributes, or None (the reference then runs)."""
    sizes = tuple(a["slice_sizes"])
    index_map, collapsed = _dims(a, "start_index_map"), _dims(a, "collapsed_slice_dims")
    laid = _common(x, idx, index_map, _dims(a, "operand_batching_dims"),
                   _dims(a, "start_indices_batching_dims"), sizes)
    if laid is None:
        return None
    lead = idx.shape[:-1]
    rows, width = math.prod(lead), math.prod(sizes)
    np_dtype = dtypes.to_numpy(x.dtype)
    fill_value = a.get("fill_value")
    fill = np_dtype.type(default_fill(np_dtype) if fill_value is None else fill_value)
    fill_mode = a.get("mode", "promise_in_bounds") == "fill"
    # (lead..., sizes...) without the collapsed dims, then the window's dims to offset_dims
    dropped = (*collapsed, *_dims(a, "operand_batching_dims"))
    kept = (*lead, *(s for d, s in enumerate(sizes) if d not in dropped))
    nb = len(lead)
    perm = list(range(nb))  # np.moveaxis's order, as GatherPlan.run moves the window dims
    for dest, src in sorted(zip(_dims(a, "offset_dims"), range(nb, len(kept)))):
        perm.insert(dest, src)
    transpose = None if perm == list(range(len(kept))) else tuple(perm)
    k = idx.shape[-1]
    loop = _loops()[("gather", rows * width >= PARALLEL_MIN)]

    def gather(xv: np.ndarray, iv: np.ndarray) -> np.ndarray:
        out = np.empty((rows, width), np_dtype)
        loop(np.ascontiguousarray(xv).reshape(-1), np.ascontiguousarray(iv).reshape(rows, k),
             *laid, fill_mode, fill, out.reshape(-1))
        res = out.reshape(kept)
        return res if transpose is None else res.transpose(transpose)

    return gather


def prepare_scatter(op: str, x: TensorType, idx: TensorType, upd: TensorType,
                    a: Attrs) -> Callable[..., np.ndarray] | None:
    """scatter[-add, -mul, -min, -max](x, idx, upd) for these types and attributes, or None."""
    window = _dims(a, "update_window_dims")
    skipped = (*_dims(a, "inserted_window_dims"), *_dims(a, "operand_batching_dims"))
    kept = [d for d in range(x.rank) if d not in skipped]
    sizes = [1] * x.rank
    for w, d in zip(window, kept):
        sizes[d] = upd.shape[w]
    laid = _common(x, idx, _dims(a, "scatter_dims_to_operand_dims"),
                   _dims(a, "operand_batching_dims"), _dims(a, "scatter_indices_batching_dims"),
                   sizes)
    if laid is None:
        return None
    rows = math.prod(idx.shape[:-1])
    # the updates as (rows, window in operand dim order): the window dims moved after the
    # batch dims (np.moveaxis's order, as the reference moves them)
    perm = [*(d for d in range(upd.rank) if d not in window), *window]
    transpose = None if perm == list(range(upd.rank)) else tuple(perm)
    k, width = idx.shape[-1], math.prod(sizes)
    np_dtype = dtypes.to_numpy(x.dtype)
    clip = a.get("mode", "fill") == "clip"
    parallel = scatter_parallel.plan(SCATTERS[op], np_dtype, rows, width, math.prod(x.shape))
    loop = _loops()[SCATTERS[op]]

    def scatter(xv: np.ndarray, iv: np.ndarray, uv: np.ndarray) -> np.ndarray:
        out = np.array(xv, copy=True, order="C")
        vals = uv if transpose is None else uv.transpose(transpose)
        args = (np.ascontiguousarray(iv).reshape(rows, k), laid, clip,
                np.ascontiguousarray(vals, np_dtype).reshape(-1))
        if parallel is not None and scatter_parallel.threads() > 1:
            parallel(out.reshape(-1), *args)
        else:
            loop(out.reshape(-1), args[0], *laid, clip, args[3])
        return out

    scatter.method = (parallel.method() if parallel is not None  # type: ignore[attr-defined]
                      else f"serial loop ({rows * width} update elements)")
    scatter.strategy = parallel  # type: ignore[attr-defined]
    return scatter


def prepare(op: str, types: Sequence[Any], a: Attrs) -> Callable[..., np.ndarray] | None:
    """The prepared form of a gather or scatter node of these input types, or None."""
    if not all(isinstance(t, TensorType) for t in types):
        return None
    if op == "gather":
        return prepare_gather(types[0], types[1], a)
    if op in SCATTERS:
        return prepare_scatter(op, types[0], types[1], types[2], a)
    return None
