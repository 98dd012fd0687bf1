"""Cholesky factorizations and triangular solves of one matrix, laid out when the program is
made: the LAPACK routine (potrf, trtrs) looked up once for the element type, and a call is
that routine on the arrays. The op rows' references go through scipy.linalg's public
functions, whose checks and wrappers (batch dispatch, array validation, looking the routine
up) cost 10-30 us a call: a GP gradient at the test zoo's size (12x12) made five such calls,
100 us of its 450. The routine and its arguments are the ones scipy.linalg passes
(`_cholesky`, `_solve_triangular` in scipy/linalg: a C-ordered triangle is passed
transposed, as the other triangle, to be read in Fortran order), so results are the
reference's bit for bit; where LAPACK reports a failure (a matrix that is not positive
definite, a singular triangle), or an operand is empty, the call runs the reference, which
says what the row says then (NaNs for cholesky, SciPy's error for a singular solve).
Batches of matrices keep the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.graph import Attrs, TensorType
from ...ir.ops import OPS

_FLOATS = ("f32", "f64")


def _routine(name: str, dtype: str) -> Any:
    from scipy.linalg.lapack import get_lapack_funcs

    (fn,) = get_lapack_funcs((name,), dtype=dtypes.to_numpy(dtype))
    return fn


def _matrices(types: Sequence[Any], count: int) -> bool:
    return (len(types) == count and all(isinstance(t, TensorType) and t.rank == 2
                                        and t.dtype == types[0].dtype and t.size > 0
                                        for t in types)
            and types[0].dtype in _FLOATS)


def prepare_cholesky(types: Sequence[Any], a: Attrs) -> Callable[[np.ndarray], np.ndarray] | None:
    """The lower Cholesky factor of one matrix through potrf; None for a batch or another
    element type (the reference runs)."""
    if not _matrices(types, 1):
        return None
    potrf, ref = _routine("potrf", types[0].dtype), OPS["cholesky"].ref

    def cholesky(x: np.ndarray) -> np.ndarray:
        c, info = potrf(x, lower=True, overwrite_a=False, clean=True)
        return c if info == 0 else ref(x)

    return cholesky


def prepare_triangular_solve(types: Sequence[Any], a: Attrs
                             ) -> Callable[[np.ndarray, np.ndarray], np.ndarray] | None:
    """op(a) x = b (left_side) or x op(a) = b solved through trtrs for one matrix; None for
    a batch or another element type."""
    if not _matrices(types, 2):
        return None
    trtrs, ref = _routine("trtrs", types[0].dtype), OPS["triangular_solve"].ref
    attrs = dict(a)
    left, lower, unit = attrs["left_side"], attrs["lower"], attrs.get("unit_diagonal", False)
    # the reference's system: x op(a) = b is op(a)^T x^T = b^T
    trans = int(attrs["transpose_a"]) if left else int(not attrs["transpose_a"])

    def triangular_solve(t: np.ndarray, b: np.ndarray) -> np.ndarray:
        rhs = b if left else b.T
        if t.flags.f_contiguous:
            x, info = trtrs(t, rhs, overwrite_b=False, lower=lower, trans=trans, unitdiag=unit)
        else:  # (Fortran order reads a C-ordered triangle as the other one, transposed)
            x, info = trtrs(t.T, rhs, overwrite_b=False, lower=not lower, trans=1 - trans,
                            unitdiag=unit)
        if info != 0:
            return ref(t, b, **attrs)
        return x if left else x.T

    return triangular_solve


PREPARERS = {"cholesky": prepare_cholesky, "triangular_solve": prepare_triangular_solve}
