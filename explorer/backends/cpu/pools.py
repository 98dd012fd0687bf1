"""The thread pools a CPU program shares the cores between: NumPy's OpenBLAS (the dots),
SciPy's own OpenBLAS (the LAPACK ops: cholesky, triangular_solve, ...; ir/ops_linalg.py's
SCIPY_LAPACK) and numba's (the parallel kernels; kernels.py lets its threads sleep).

OpenBLAS threads spin for a while after each call. With NumPy's and SciPy's pools both at
full width, a cholesky right after a matmul shares the cores with the matmul's spinning
threads: on 2 cores the GP gradient's 512x512 cholesky took 14 to 22 ms in its program
against 2.8 ms alone (bench/models.py). While a program that calls LAPACK runs, SciPy's pool
is held at one thread (threadpoolctl), and the whole gradient ran in 11 ms instead of 19 to
25. Where SciPy and NumPy share one BLAS (one pool), nothing is changed.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import PurePath
from typing import Any

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


@contextlib.contextmanager
def lapack_on_one_thread() -> Iterator[None]:
    pool = _scipy_pool()
    if pool is None:
        yield
        return
    before = pool.get_num_threads()
    pool.set_num_threads(1)
    try:
        yield
    finally:
        pool.set_num_threads(before)
