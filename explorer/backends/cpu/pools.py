"""The BLAS a CPU program's dots and LAPACK ops run on, so that its pools do not fight.

NumPy's OpenBLAS (np.matmul) and SciPy's own OpenBLAS (the LAPACK ops: cholesky,
triangular_solve, ...; ir/ops_linalg.py's SCIPY_LAPACK) are two thread pools, and OpenBLAS
threads spin for a while after each call. With both at full width, a cholesky right after a
matmul shared the cores with the matmul's spinning threads: on 2 cores the GP gradient's
512x512 cholesky took 14 to 22 ms in its program against 2.8 ms alone. So a program that
calls LAPACK runs its dots on SciPy's BLAS too (`scipy_matmul`: gemm on the operands' own
memory, a transposed operand passed as transposed): one pool at full width. (Before, SciPy's
pool was held at one thread instead, and the GP gradient's two 512x512 triangular solves
took 2.8 ms each.) Other programs keep np.matmul. Where SciPy and NumPy share one BLAS
there is one pool already, and np.matmul it is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

import numpy as np

from ...ir.control_ops import bodies
from ...ir.graph import Graph
from ...ir.ops_linalg import SCIPY_LAPACK


def calls_lapack(g: Graph) -> bool:
    """Whether `g` (or a body inside it) runs an op through SciPy's LAPACK."""
    return any(n.op in SCIPY_LAPACK or any(calls_lapack(b) for _, b in bodies(n))
               for n in g.nodes)


@functools.cache
def _scipy_pool() -> Any:
    """threadpoolctl's controller of SciPy's own BLAS, or None (one shared BLAS, or no
    threadpoolctl)."""
    try:
        import scipy.linalg  # noqa: F401  (loads SciPy's BLAS, so that it is listed)
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    blas = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]
    scipy = [c for c in blas  # scipy.libs/ (Linux wheels), scipy/.dylibs/ (macOS wheels)
             if any(d.startswith("scipy") for d in PurePath(c.filepath).parent.parts[-2:])]
    if len(blas) < 2 or len(scipy) != 1:
        return None
    return scipy[0]


def matmul_for(g: Graph) -> Callable[[Any, Any], np.ndarray]:
    """The matmul `g`'s program calls (its dots' program text says `matmul`)."""
    return scipy_matmul if calls_lapack(g) and _scipy_pool() is not None else np.matmul


def scipy_matmul(a: Any, b: Any) -> np.ndarray:
    """np.matmul(a, b) through SciPy's BLAS gemm for 2-D float32/float64 operands (C = A B
    is C^T = B^T A^T in BLAS's column-major terms, so a row-major operand is passed as it
    is and the result comes back row-major); anything else through np.matmul."""
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.dtype.name not in _GEMM \
            or a.size == 0 or b.size == 0:
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
