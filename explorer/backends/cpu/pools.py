"""The BLAS pools a CPU program runs on, so that they do not fight (dots.py acts on it).

NumPy's OpenBLAS (np.matmul) and SciPy's own OpenBLAS (the LAPACK ops: cholesky,
triangular_solve, ...; ir/ops/linalg.py's SCIPY_LAPACK) are two thread pools, and OpenBLAS
threads spin for a while after each call. With both at full width, a cholesky right after a
matmul shared the cores with the matmul's spinning threads: on 2 cores the GP gradient's
512x512 cholesky took 14 to 22 ms in its program against 2.8 ms alone. So a program that
calls LAPACK runs its dots on SciPy's BLAS too (dots.scipy_matmul: gemm on the operands' own
memory, a transposed operand passed as transposed): one pool at full width. (Before, SciPy's
pool was held at one thread instead, and the GP gradient's two 512x512 triangular solves
took 2.8 ms each.) Other programs keep np.matmul. Where SciPy and NumPy share one BLAS
there is one pool already, and np.matmul it is.
"""

from __future__ import annotations

import functools
from pathlib import PurePath
from typing import Any

from ...ir.graph import Graph
from ...ir.ops.linalg import SCIPY_LAPACK
from ...ir.ops.regions import bodies


def calls_lapack(g: Graph) -> bool:
    """Whether `g` (or a body inside it) runs an op through SciPy's LAPACK."""
    return any(n.op in SCIPY_LAPACK or any(calls_lapack(b) for _, b in bodies(n))
               for n in g.nodes)


def calls_scipy_blas(g: Graph) -> bool:
    """Whether `g` (or a body inside it) runs an op on SciPy's BLAS or LAPACK: the LAPACK
    ops, and convolutions (conv.py's products are SciPy's gemm: its shifted method
    accumulates in place, beta = 1, which np.matmul cannot)."""
    return any(n.op in SCIPY_LAPACK or n.op == "conv_general_dilated"
               or any(calls_scipy_blas(b) for _, b in bodies(n)) for n in g.nodes)


@functools.cache
def scipy_pool() -> Any:
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
