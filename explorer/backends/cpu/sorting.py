"""top_k as a numba loop: each row keeps a sorted buffer of its best k, parallel over rows.

The op row's NumPy reference sorts every row in full (a stable argsort of lax.top_k's key) and
keeps k: O(n log n) a row, and builds the float64 key of the whole input first; one pass that
keeps the best k so far is O(n) plus a shift of the buffer for the few elements that enter
it, with the key computed per element (the fused kernels' `top_k_key`: XLA's total order, +NaN
first, -NaN last). The order is the reference's exactly: an element enters the buffer only if
its key is strictly above the k-th's, and it is placed after the keys equal to it, so ties
keep the first index, as a stable sort does. 2,000 rows of 20,000 float32, k = 8: 0.7 s with
the reference, 0.05 s here (jax.jit: 0.14 s), on 2 cores.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...ir.ops import OPS
from .numba_cache import cached_njit
from .numba_dialect import numba_takes

# elements before the rows are spread over the cores (waking the threads costs about 0.1 ms)
PARALLEL_MIN = 1 << 16


@functools.cache
def _select() -> dict[bool, Any]:
    from numba import prange

    from .scalar_helpers import top_k_key

    def make(parallel: bool) -> Any:
        @cached_njit(parallel=parallel)
        def select(x, k, idx):  # noqa: ANN001, ANN202
            rows, n = x.shape
            for r in prange(rows):
                best = np.empty(k, np.float64)
                m = 0
                for j in range(n):
                    v = top_k_key(x[r, j])
                    if m == k:
                        if not v > best[k - 1]:
                            continue
                        pos = k - 1
                    else:
                        pos = m
                        m += 1
                    while pos > 0 and best[pos - 1] < v:
                        best[pos] = best[pos - 1]
                        idx[r, pos] = idx[r, pos - 1]
                        pos -= 1
                    best[pos] = v
                    idx[r, pos] = j

        return select

    return {p: make(p) for p in (False, True)}


def top_k(x: np.ndarray, k: int, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """lax.top_k along `axis`: the k largest in XLA's total order, and their indices."""
    if k == 0 or x.size == 0 or x.dtype.kind == "b" or not numba_takes(x.dtype):
        return OPS["top_k"].ref(x, k, axis)
    moved = np.moveaxis(x, axis, -1)
    rows = np.ascontiguousarray(moved).reshape(-1, moved.shape[-1])
    idx = np.empty((rows.shape[0], k), np.int32)
    _select()[bool(rows.size >= PARALLEL_MIN)](rows, k, idx)
    idx = idx.reshape(*moved.shape[:-1], k)
    vals = np.take_along_axis(moved, idx, -1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)


REFERENCES = {"top_k": top_k}
