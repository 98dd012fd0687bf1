"""Batched outer products (a `dot_general` without a contraction, batched or not) as one
numba loop over the batch and the rows, not np.matmul's loop for a contraction of one.

np.matmul runs a stack of products as one gemm call per batch entry, or, where the entries'
strides do not suit BLAS or the contraction is one element long, its own unblocked loop: a
vmap'd layer's per-example outer products x_b g_b^T (DP-SGD's per-example gradients; no
contracting dimension, a contraction of length 1 to matmul) took 2.3 ms for 128 examples of
128x128 on a 2-core AMD EPYC VM, where this loop writes them in 0.16 ms.

`prepare(types, attrs)` chooses by shape (`choose`): the loop where the contraction is at most
SMALL_K long (an outer product, or a contraction over a dimension of size 0: zeros) of at
least LOOP_MIN elements whose operands' element type is one numba takes (not bool, no
mixed-precision accumulation); np.matmul (the program form of the op table's row) for
everything else, and the listing says which and why. The loop reads the operands as
C-contiguous (batch, m, k) and (batch, k, n) arrays (transposed and reshaped as the op
table's program form does; a copy, where one is needed, of operands m*n/(m+n) times smaller
than the result, so that numba builds the loop once per element type), runs the rows of all
entries in parallel when the product is large enough to pay numba's thread pool, and
accumulates each entry's k terms in order in the result's type, as a naive matmul does.

Where an outer product is only read through its squared norms or a batch-weighted sum (DP-SGD),
dot-order's rules (passes/outer_products.py) remove it before it reaches this loop.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.graph import Attrs, TensorType
from ...ir.ops import dot_dims
from .numba_cache import cached_njit

# the longest contraction the loop takes: np.matmul is slow at k = 1 only (its loop for a
# contraction of one; 2.3 ms against the loop's 0.16 for 128 entries of 128x1 @ 1x128), and
# from k = 2 on its per-entry gemm matches or beats the loop (128 entries of 32x2 @ 2x32:
# 0.013 ms against 0.042; 64 of 64x8 @ 8x64: 0.05 against 0.34; measured on a 2-core AMD
# EPYC VM, one BLAS thread)
SMALL_K = 1
# output elements from which the loop pays its call (a transpose, a reshape and np.empty
# around the numba call: 1.7 us for a 3x6 outer product, np.matmul's 1.2; at 64x64 2.3 us
# against np.matmul's 5.9)
LOOP_MIN = 512
# multiply-adds from which the rows run on numba's threads (waking them costs ~7 us: a
# 256x256 outer product took 4.7 us serial and 11.6 parallel, 128 of 128x128 the same either
# way on a loaded 2-core VM)
PARALLEL_MIN = 1 << 20
_TYPES = frozenset({"f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"})


def choose(types: Sequence[Any], a: Attrs) -> tuple[str | None, str]:
    """("loop" or None, why): whether a dot_general of inputs of these types runs as the
    batched loop, and the reason in words for the listing (None: np.matmul as written)."""
    lhs, rhs = types
    if not isinstance(lhs, TensorType) or not isinstance(rhs, TensorType):
        return None, "not two tensors"
    lc, rc, lb, rb = dot_dims(a)
    pet = a.get("preferred_element_type")
    if pet and pet != lhs.dtype:
        return None, f"accumulates in {pet}: np.matmul on converted operands"
    if lhs.dtype not in _TYPES:
        return None, f"{lhs.dtype} operands: np.matmul"
    k = math.prod(lhs.shape[d] for d in lc)
    if k > SMALL_K:
        return None, f"a contraction of {k}{', one gemm per batch entry' if lb else ''}"
    size = math.prod(d for i, d in enumerate(lhs.shape) if i not in lc) * \
        math.prod(d for i, d in enumerate(rhs.shape) if i not in (*rc, *rb))
    if 0 < size < LOOP_MIN:
        return None, f"{size} < {LOOP_MIN} elements: np.matmul's call is cheaper"
    return "loop", "an outer product" if k == 1 else "an empty contraction"


def prepare(types: Sequence[Any], a: Attrs) -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    """The dot_general as a function of its two arrays running the batched loop, its views
    worked out now; None where `choose` leaves it to np.matmul. The function's `method` names
    the method for the listing."""
    how, why = choose(types, a)
    if how is None:
        return None
    lhs, rhs = types
    lc, rc, lb, rb = dot_dims(a)
    lf = [i for i in range(lhs.rank) if i not in (*lc, *lb)]
    rf = [i for i in range(rhs.rank) if i not in (*rc, *rb)]
    bs = tuple(lhs.shape[i] for i in lb)
    nb, m = math.prod(bs), math.prod(lhs.shape[i] for i in lf)
    n, k = math.prod(rhs.shape[i] for i in rf), math.prod(lhs.shape[i] for i in lc)
    lperm, rperm = (*lb, *lf, *lc), (*rb, *rc, *rf)
    out_shape = (*bs, *(lhs.shape[i] for i in lf), *(rhs.shape[i] for i in rf))
    dtype = dtypes.to_numpy(lhs.dtype)
    parallel = nb * m > 1 and nb * m * n * max(k, 1) >= PARALLEL_MIN
    loop = _loop(parallel)

    def batched(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        # contiguous (a copy of the small operands at most): one numba build per element type
        x3 = np.ascontiguousarray(np.asarray(x).transpose(lperm).reshape(nb, m, k))
        y3 = np.ascontiguousarray(np.asarray(y).transpose(rperm).reshape(nb, k, n))
        out = np.empty((nb, m, n), dtype)
        if out.size:
            loop(x3, y3, out)
        return out.reshape(out_shape)

    batched.method = (f"batched loop over {nb} entries of ({m}x{k})({k}x{n})"  # type: ignore[attr-defined]
                      f"{', parallel' if parallel else ''} ({why})")
    return batched


@functools.cache
def _loop(parallel: bool) -> Any:
    from numba import prange

    @cached_njit(parallel=parallel, error_model="numpy")
    def loop(x, y, out):  # noqa: ANN001, ANN202
        # out[b] = x[b] @ y[b], k small: each output row is k scaled rows of y[b], summed in
        # order of k (k = 0: zeros)
        nb, m, k = x.shape
        n = y.shape[2]
        for t in prange(nb * m):
            b, i = t // m, t % m
            row = out[b, i]
            if k == 0:
                row[:] = 0
                continue
            s = x[b, i, 0]
            yr = y[b, 0]
            for j in range(n):
                row[j] = s * yr[j]
            for q in range(1, k):
                s = x[b, i, q]
                yr = y[b, q]
                for j in range(n):
                    row[j] += s * yr[j]
        return out

    return loop
