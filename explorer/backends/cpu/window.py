"""Pooling (reduce_window_sum/max/min) and the max-pool gradient (select_and_scatter_add) of
rank-4 arrays as numba loops. Pooling: for each window offset, a pass over every output
position folding in that offset's element, parallel over the first two dimensions, the last
dimension innermost; where the last dimension is not windowed (NHWC images), over flat runs
of a row (contiguous in the input and the result, so the fold vectorizes). The
op rows' NumPy reference folds one dimension at a time with a copy of a strided view per
step; a CNN's 2x2 max pool of 64x32x32x16 took 0.7 ms that way.
Other ranks, base dilation and empty results keep the reference.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.ops import OPS
from ...ir.ops.windows import window_out_shape
from ...ir.traits import MONOIDS
from .numba_cache import cached_njit
from .numba_dialect import numba_takes

_OPS = {"reduce_window_sum": "add", "reduce_window_max": "max", "reduce_window_min": "min"}
# window elements folded before the loop runs on every core (waking the threads costs about
# 100 us: a 2x8x8x4 pool took 114 us in parallel)
PARALLEL_MIN = 1 << 18


@functools.cache
def _loops() -> dict[str, Any]:
    from numba import njit, prange

    from .scalar_helpers import maximum, minimum

    def make(combine, parallel):  # noqa: ANN001, ANN202
        @cached_njit(parallel=parallel, error_model="numpy")
        def fold(x, out, window, strides, low, dilation, identity):  # noqa: ANN001, ANN202
            # per output row (first two dimensions) and window offset, the input folded into
            # the row, element by element
            n0, n1, n2, n3 = out.shape
            for t in prange(n0 * n1):
                a, b = t // n1, t % n1
                for c in range(n2):
                    for e in range(n3):
                        out[a, b, c, e] = identity
                for i in range(window[0]):
                    xa = a * strides[0] - low[0] + i * dilation[0]
                    if xa < 0 or xa >= x.shape[0]:
                        continue
                    for j in range(window[1]):
                        xb = b * strides[1] - low[1] + j * dilation[1]
                        if xb < 0 or xb >= x.shape[1]:
                            continue
                        for c in range(n2):
                            for k in range(window[2]):
                                xc = c * strides[2] - low[2] + k * dilation[2]
                                if xc < 0 or xc >= x.shape[2]:
                                    continue
                                for m in range(window[3]):
                                    for e in range(n3):
                                        xe = e * strides[3] - low[3] + m * dilation[3]
                                        if 0 <= xe < x.shape[3]:
                                            out[a, b, c, e] = combine(out[a, b, c, e],
                                                                      x[xa, xb, xc, xe])

        @cached_njit(parallel=parallel, error_model="numpy")
        def fold_rows(x, out, window, strides, low, dilation, identity):  # noqa: ANN001, ANN202
            # the last dimension unwindowed (a pool over NHWC images): an output row (first
            # two dimensions) and an input row as flat runs, and for each window offset the
            # input's run at one position folded into the output's: contiguous, so the fold
            # vectorizes (a CNN's 2x2 max pool of 64x32x32x16: 1.1 ms element by element,
            # 0.6 ms this way, XLA 0.7 to 0.8 ms)
            n0, n1, n2, n3 = out.shape
            rows = x.reshape(x.shape[0], x.shape[1], x.shape[2] * n3)
            flat = out.reshape(n0, n1, n2 * n3)
            for t in prange(n0 * n1):
                a, b = t // n1, t % n1
                row = flat[a, b]
                row[:] = identity
                for i in range(window[0]):
                    xa = a * strides[0] - low[0] + i * dilation[0]
                    if xa < 0 or xa >= x.shape[0]:
                        continue
                    for j in range(window[1]):
                        xb = b * strides[1] - low[1] + j * dilation[1]
                        if xb < 0 or xb >= x.shape[1]:
                            continue
                        src = rows[xa, xb]
                        for k in range(window[2]):
                            for c in range(n2):
                                xc = c * strides[2] - low[2] + k * dilation[2]
                                if 0 <= xc < x.shape[2]:
                                    at, base = c * n3, xc * n3
                                    for e in range(n3):
                                        row[at + e] = combine(row[at + e], src[base + e])

        return fold, fold_rows

    @njit(inline="always")
    def _add(p, q):  # noqa: ANN001, ANN202
        return p + q

    return {(name, parallel): make(fn, parallel) for name, fn in
            (("add", _add), ("max", maximum), ("min", minimum)) for parallel in (False, True)}


@functools.cache
def _select_and_scatter(parallel: bool) -> Any:
    from numba import prange

    @cached_njit(parallel=parallel, error_model="numpy")
    def scatter(source, x, acc, window, strides, low, ge, fill):  # noqa: ANN001, ANN202
        # per window: its selected element (the first maximum for ge, minimum for le, a NaN
        # over a number; padding reads as `fill`), then the source value added there
        n0, n1, n2, n3 = source.shape
        for a in prange(n0):
            for b in range(n1):
                for c in range(n2):
                    for e in range(n3):
                        best = fill
                        at0, at1, at2, at3 = a * strides[0], b * strides[1], c * strides[2], \
                            e * strides[3]
                        first = True
                        for i in range(window[0]):
                            p0 = a * strides[0] + i
                            for j in range(window[1]):
                                p1 = b * strides[1] + j
                                for k in range(window[2]):
                                    p2 = c * strides[2] + k
                                    for m in range(window[3]):
                                        p3 = e * strides[3] + m
                                        q0, q1, q2, q3 = p0 - low[0], p1 - low[1], p2 - low[2], \
                                            p3 - low[3]
                                        v = fill
                                        if 0 <= q0 < x.shape[0] and 0 <= q1 < x.shape[1] and \
                                                0 <= q2 < x.shape[2] and 0 <= q3 < x.shape[3]:
                                            v = x[q0, q1, q2, q3]
                                        if first or (v > best if ge else v < best) or \
                                                (v != v and best == best):
                                            best = v
                                            at0, at1, at2, at3 = p0, p1, p2, p3
                                            first = False
                        acc[at0, at1, at2, at3] += source[a, b, c, e]

    def rows(ge):  # noqa: ANN001, ANN202
        @cached_njit(parallel=parallel, error_model="numpy")
        def scatter_rows(source, x, acc, window, strides, low, fill):  # noqa: ANN001, ANN202
            # the first and last dimensions unwindowed (a max pool over NHWC images): the
            # same selection for a whole row of the last dimension at once, with selects
            # rather than branches so that it vectorizes, then each selected element gets
            # its source value
            n0, n1, n2, n3 = source.shape
            for a in prange(n0):
                best = np.empty(n3, x.dtype)
                at1 = np.empty(n3, np.int64)
                at2 = np.empty(n3, np.int64)
                xa = a * strides[0] - low[0]
                for b in range(n1):
                    for c in range(n2):
                        for j in range(window[1]):
                            p1 = b * strides[1] + j
                            for k in range(window[2]):
                                p2 = c * strides[2] + k
                                q1, q2 = p1 - low[1], p2 - low[2]
                                first = j == 0 and k == 0
                                if 0 <= xa < x.shape[0] and 0 <= q1 < x.shape[1] and \
                                        0 <= q2 < x.shape[2]:
                                    for e in range(n3):
                                        v, w = x[xa, q1, q2, e], best[e]
                                        take = first or (v > w if ge else v < w) or \
                                            (v != v and w == w)
                                        best[e] = v if take else w
                                        at1[e] = p1 if take else at1[e]
                                        at2[e] = p2 if take else at2[e]
                                else:  # padding reads as `fill`
                                    for e in range(n3):
                                        w = best[e]
                                        take = first or (fill > w if ge else fill < w)
                                        best[e] = fill if take else w
                                        at1[e] = p1 if take else at1[e]
                                        at2[e] = p2 if take else at2[e]
                        for e in range(n3):
                            acc[a * strides[0], at1[e], at2[e], e] += source[a, b, c, e]

        return scatter_rows

    return scatter, {True: rows(True), False: rows(False)}


def select_and_scatter_add(source, operand, select_prim, window_dimensions,  # noqa: ANN001, ANN201
                           window_strides, padding):
    """The max-pool gradient as one numba loop (rank 4, `ge`/`le`); else the reference."""
    source, operand = np.asarray(source), np.asarray(operand)
    if operand.ndim != 4 or select_prim not in ("ge", "le") or operand.dtype.kind != "f" \
            or not numba_takes(operand.dtype) or source.size == 0:
        return OPS["select_and_scatter_add"].ref(source, operand, select_prim, window_dimensions,
                                                 window_strides, padding)
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(operand.shape, padding))
    acc = np.zeros(shape, source.dtype)
    ge = select_prim == "ge"
    fill = operand.dtype.type(-np.inf if ge else np.inf)
    # rows of the first dimension are written by their own windows only when its window is 1
    parallel = window_dimensions[0] == 1 and source.size * math.prod(window_dimensions) \
        >= PARALLEL_MIN
    ints = [np.asarray(v, np.int64) for v in (window_dimensions, window_strides,
                                               [lo for lo, _ in padding])]
    scatter, scatter_rows = _select_and_scatter(parallel)
    rows = (window_dimensions[0], window_dimensions[3], window_strides[3], padding[3][0],
            padding[3][1]) == (1, 1, 1, 0, 0)
    source, operand = np.ascontiguousarray(source), np.ascontiguousarray(operand)
    if rows:
        scatter_rows[ge](source, operand, acc, *ints, fill)
    else:
        scatter(source, operand, acc, *ints, ge, fill)
    if not any(lo or hi for lo, hi in padding):
        return acc
    return acc[tuple(slice(lo, n - hi) for n, (lo, hi) in zip(shape, padding))].copy()


def _pool(name: str) -> Any:
    monoid = _OPS[name]
    reference = OPS[name].ref

    def pool(x, window_dimensions, window_strides, padding, base_dilation=None,  # noqa: ANN001, ANN202
             window_dilation=None):
        x = np.asarray(x)
        positions = window_out_shape(name, x.shape, window_dimensions, window_strides, padding,
                                     base_dilation, window_dilation)
        if (x.ndim != 4 or any(b != 1 for b in base_dilation or ()) or min(positions) == 0
                or x.dtype.kind not in "fiu" or not numba_takes(x.dtype)):
            return reference(x, window_dimensions, window_strides, padding, base_dilation,
                             window_dilation)
        out = np.empty(positions, x.dtype)
        identity = x.dtype.type(MONOIDS[monoid].identity_value(dtypes.from_numpy(x.dtype)))
        ints = [np.asarray(v, np.int64) for v in (
            window_dimensions, window_strides, [lo for lo, _ in padding],
            window_dilation or (1,) * 4)]
        parallel = out.size * math.prod(window_dimensions) >= PARALLEL_MIN
        plain_last = (window_dimensions[3], window_strides[3], padding[3][0], padding[3][1],
                      (window_dilation or (1,) * 4)[3]) == (1, 1, 0, 0, 1)
        fold, fold_rows = _loops()[monoid, parallel]
        (fold_rows if plain_last else fold)(np.ascontiguousarray(x), out, *ints, identity)
        return out

    return pool


REFERENCES = {**{name: _pool(name) for name in _OPS},
              "select_and_scatter_add": select_and_scatter_add}
