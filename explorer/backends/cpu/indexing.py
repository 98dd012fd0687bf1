"""gather and the scatters as numba loops: the op rows' semantics (ir/ops/indexing.py's
gather_with and scatter_with: starts, bounds, fill and clip modes) with the windows read and
written by a compiled loop instead of NumPy's fancy indexing over an int64 array of every
element's flat position (and, for the scatters, instead of `ufunc.at`, which is slow: a GPT
gradient's embedding scatter-add of 256x256 values took 0.84 ms through np.add.at).

Each window is its start's flat offset plus a small grid of offsets over all but its last
dimension, then a contiguous run along the last; windows are read in parallel when the
result is large, and written in order (later windows win, as the reference's).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ir.ops.indexing import gather_plan, gather_with, scatter_with
from .numba_cache import cached_njit
from .numba_dialect import numba_takes

PARALLEL_MIN = 1 << 20  # elements read before a gather runs on every core


def window_grid(shape: Sequence[int], sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray, int]:
    """(the operand's C-order strides, the flat offsets of a window's rows from its start,
    the length of a row): what every window of `sizes` in an array of `shape` shares."""
    strides = np.cumprod((*shape[1:], 1)[::-1])[::-1].astype(np.int64)
    grid = np.zeros((), np.int64)
    for d, s in enumerate(sizes[:-1]):
        grid = grid[..., None] + np.arange(s, dtype=np.int64) * strides[d]
    return strides, np.ascontiguousarray(grid.reshape(-1)), int(sizes[-1])


def _layout(shape: Sequence[int], starts: np.ndarray, sizes: Sequence[int]
            ) -> tuple[np.ndarray, np.ndarray, int]:
    """(each window's flat offset, the offsets of its rows, the length of a row)."""
    strides, grid, run = window_grid(shape, sizes)
    base = np.ascontiguousarray((starts.reshape(-1, len(shape)) @ strides).astype(np.int64))
    return base, grid, run


@functools.cache
def combines() -> dict[str, Any]:
    """The scatters' combine functions as numba inlines, by their ufunc's name ("put": plain
    scatter, the later write wins)."""
    from numba import njit

    from .scalar_helpers import maximum, minimum

    @njit(inline="always")
    def _second(a, b):  # noqa: ANN001, ANN202
        return b

    @njit(inline="always")
    def _add(a, b):  # noqa: ANN001, ANN202
        return a + b

    @njit(inline="always")
    def _mul(a, b):  # noqa: ANN001, ANN202
        return a * b

    return {"put": _second, "add": _add, "multiply": _mul, "maximum": maximum, "minimum": minimum}


@functools.cache
def _kernels() -> dict[str, Any]:
    from numba import njit, prange, uint64

    # offsets as unsigned (every window lies inside): numba then wraps no index, whose
    # test on a signed one kept the copies from vectorizing (a 32768x64 row gather: 1.2 ms
    # against 0.23)
    def take_loop(xf, base, grid, run, out):  # noqa: ANN001, ANN202
        for b in prange(base.shape[0]):
            for w in range(grid.shape[0]):
                o, p = uint64(base[b] + grid[w]), uint64(w * run)
                for j in range(run):
                    out[b, p + uint64(j)] = xf[o + uint64(j)]

    def put_loop(combine):  # noqa: ANN001, ANN202
        @njit(cache=True, error_model="numpy")
        def fn(outf, base, grid, run, vals):  # noqa: ANN001, ANN202
            for b in range(base.shape[0]):
                for w in range(grid.shape[0]):
                    o, p = uint64(base[b] + grid[w]), uint64(w * run)
                    for j in range(run):
                        u = uint64(j)
                        outf[o + u] = combine(outf[o + u], vals[b, p + u])
        return fn

    return {"take": cached_njit()(take_loop),
            "take_parallel": cached_njit(parallel=True)(take_loop),
            **{name: put_loop(fn) for name, fn in combines().items()}}


def _compiles(x: np.ndarray) -> bool:
    """Whether the loops take `x`: numba's element types (kernel_codegen.numba_takes), at
    least one dimension; the others keep the reference's fancy indexing."""
    return x.ndim > 0 and numba_takes(x.dtype)


def take(x: np.ndarray, starts: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    if not _compiles(x):
        from ...ir.ops.indexing import take_windows

        return take_windows(x, starts, sizes)
    return _take_laid_out(x, *_layout(x.shape, starts, sizes)).reshape((*starts.shape[:-1], -1))


def _take_laid_out(x: np.ndarray, base: np.ndarray, grid: np.ndarray, run: int) -> np.ndarray:
    """The windows of `x` at a layout of `_layout`, one row each."""
    out = np.empty((len(base), len(grid) * run), x.dtype)
    k = _kernels()["take_parallel" if out.size >= PARALLEL_MIN else "take"]
    k(np.ascontiguousarray(x).reshape(-1), base, grid, run, out)
    return out


def prepared_gather(shape: Sequence[int], dtype: Any, idx: np.ndarray,
                    attrs: dict[str, Any]) -> Callable[[np.ndarray], np.ndarray]:
    """The gather of an operand of `shape` and `dtype` at indices known ahead (a constant
    index table: a diagonal, a fixed permutation): its plan and window layout made once,
    each call then one loop over the windows."""
    plan = gather_plan(shape, dtype, idx, **attrs)
    if not (len(shape) > 0 and numba_takes(np.dtype(dtype))):
        return functools.partial(plan.run, take)
    layout = _layout(shape, plan.starts, plan.sizes)
    return functools.partial(plan.run, lambda x, starts, sizes: _take_laid_out(x, *layout))


def put(out: np.ndarray, starts: np.ndarray, sizes: Sequence[int], values: np.ndarray,
        combine: Any) -> None:
    if not _compiles(out):
        from ...ir.ops.indexing import put_windows

        put_windows(out, starts, sizes, values, combine)
        return
    base, grid, run = _layout(out.shape, starts, sizes)
    fn = _kernels()["put" if combine is None else combine.__name__]
    fn(out.reshape(-1), base, grid, run, np.ascontiguousarray(values, out.dtype))


# the op rows' references, with the windows moved by the loops above
REFERENCES = {"gather": gather_with(take),
              **{name: scatter_with(combine, put) for name, combine in (
                  ("scatter", None), ("scatter-add", np.add), ("scatter-mul", np.multiply),
                  ("scatter-min", np.minimum), ("scatter-max", np.maximum))}}
