"""The matmul a CPU program calls: its dots' program text says `matmul` (np.matmul's
semantics), and `matmul_for(graph)` picks the function bound under that name. A program
that calls SciPy's LAPACK or BLAS (pools.calls_scipy_blas) runs its dots on SciPy's BLAS too
(`scipy_matmul`), so one OpenBLAS pool serves the whole program (pools.py says why); other
programs, and every program where SciPy has no BLAS of its own, keep np.matmul.

Tried and left out: stacked products (attention's heads) as one single-threaded gemm per
entry on numba's threads. Alone, a GPT block's 8 heads of 256x32 @ 32x256 took 0.33 ms
against np.matmul's 0.87 ms on 2 cores; in the program, right after NumPy's dots whose
OpenBLAS threads still spin, 0.45-0.49 ms against 0.39-0.41 ms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir.graph import Graph
from . import pools


def matmul_for(g: Graph) -> Callable[[Any, Any], np.ndarray]:
    """The matmul `g`'s program calls."""
    if pools.calls_scipy_blas(g) and pools.scipy_pool() is not None:
        return scipy_matmul
    return np.matmul


def what(matmul: Callable[[Any, Any], np.ndarray]) -> str:
    """A matmul_for choice in words, for listings."""
    return "SciPy's gemm (np.matmul beyond 2-D)" if matmul is scipy_matmul else "np.matmul"


# multiply-adds up to which OpenBLAS runs a gemm on the calling thread alone (interface/gemm.c:
# SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD), so no pool wakes: np.matmul then, whose
# call costs 3 us where SciPy's gemm wrapper costs 13-16 (a GP gradient's 12x12 products)
ONE_THREAD = 65536 * 4


def scipy_matmul(a: Any, b: Any) -> np.ndarray:
    """np.matmul(a, b) through SciPy's BLAS gemm for 2-D float32/float64 operands (C = A B
    is C^T = B^T A^T in BLAS's column-major terms, so a row-major operand is passed as it
    is and the result comes back row-major); anything else, and products small enough for
    one thread (ONE_THREAD), through np.matmul."""
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.dtype.name not in _GEMM \
            or a.size == 0 or b.size == 0 or a.shape[0] * a.shape[1] * b.shape[1] <= ONE_THREAD:
        return np.matmul(a, b)
    x, tx = _column_major(b.T)
    y, ty = _column_major(a.T)
    return _GEMM[a.dtype.name]()(1.0, x, y, trans_a=tx, trans_b=ty).T


def _column_major(m: np.ndarray) -> tuple[np.ndarray, int]:
    """(an array whose Fortran layout is m, or m^T with the flag 1 to transpose it back)."""
    if m.flags.f_contiguous:
        return m, 0
    if m.flags.c_contiguous:
        return m.T, 1
    return np.asfortranarray(m), 0


def _gemm(name: str) -> Callable[[], Any]:
    def get() -> Any:
        import scipy.linalg.blas as blas

        return getattr(blas, name)

    return get


_GEMM = {"float32": _gemm("sgemm"), "float64": _gemm("dgemm")}
