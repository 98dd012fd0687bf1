"""Rows for dense linear algebra as `jax.lax.linalg` emits it: `cholesky`, `triangular_solve`,
`lu` (with pivots and permutation), `qr`, `eigh` and `svd`, each over leading batch
dimensions.

The references call SciPy's LAPACK, the same library jaxlib's CPU kernels call, so results
agree with JAX on CPU to rounding, signs of eigen/singular vectors and of Q's columns
included (they are unique only up to sign, so tests that compare across implementations should
compare reconstructions). As in JAX, `cholesky` reads only the lower triangle and returns NaNs
for a matrix that is not positive definite, rather than raising.

Split: every row maps chunks of a batch dimension to chunks of each result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import scipy.linalg as sla

from ..graph import Attrs, TensorType, TupleType, Type
from ..traits import OpKind, Split
from .table import OpDef, OpError, register, sample_array


def _matrix(op: str, t: TensorType, square: bool = True, bf16: bool = False
            ) -> tuple[tuple[int, ...], int, int]:
    """(batch, m, n) of a matrix operand; `bf16`: bfloat16 is taken too (as lax's
    triangular_solve takes it; its other rows do not)."""
    if t.rank < 2 or not (t.dtype.startswith(("f", "c")) or (bf16 and t.dtype == "bf16")):
        raise OpError(f"{op}: needs a floating-point matrix (rank >= 2), got {t}")
    m, n = t.shape[-2:]
    if square and m != n:
        raise OpError(f"{op}: needs square matrices, got {t}")
    return t.shape[:-2], m, n


def _batched(fn: Callable[..., Any], *xs: np.ndarray, batch_rank: int) -> Any:
    """fn over the leading `batch_rank` dims of each x (matrices after); results stacked."""
    if batch_rank == 0:  # one matrix: no stacking, but never a view of an input
        out = fn(*xs)
        fresh = [np.array(o) if any(np.may_share_memory(o, x) for x in xs) else o
                 for o in (out if isinstance(out, tuple) else (out,))]
        return tuple(fresh) if isinstance(out, tuple) else fresh[0]
    batch = xs[0].shape[:batch_rank]
    outs = [fn(*(x[i] for x in xs)) for i in np.ndindex(*batch)]
    if not isinstance(outs[0], tuple):
        return np.stack(outs).reshape((*batch, *outs[0].shape))
    return tuple(np.stack(o).reshape((*batch, *o[0].shape)) for o in zip(*outs))


def _batch_axes(ins: Sequence[TensorType], out: Type, a: Attrs) -> dict[int, tuple]:
    return {d: (d,) * len(ins) for d in range(ins[0].rank - 2)}


def _spd(rng: np.random.Generator, batch: tuple[int, ...] = (2,), n: int = 4) -> np.ndarray:
    a = rng.normal(size=(*batch, n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(np.float32)


# The ops whose NumPy reference calls SciPy's LAPACK: SciPy brings its own OpenBLAS, a second
# thread pool beside NumPy's (backends/cpu/pools.py keeps the two from fighting).
SCIPY_LAPACK: set[str] = set()


def _row(name: str, arity: int, attrs: tuple[str, ...], infer: Any, ref: Any, flops: Any,
         jax: Any, sample: Any, optional: tuple[str, ...] = ()) -> None:
    SCIPY_LAPACK.add(name)
    register(OpDef(name, OpKind.OTHER, arity, attrs, infer, ref, flops, jax, sample,
                   split=Split.MAP, split_axes=_batch_axes, optional=optional))


def _cube(k: float) -> Callable[[Sequence[TensorType], Type, Attrs], int]:
    def flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
        t = ins[0]
        m, n = t.shape[-2:]
        return int(k * max(m, n) * min(m, n) ** 2 * (t.size // max(m * n, 1)))

    return flops


# ---------------------------------------------------------------- cholesky


def _cholesky_one(a: np.ndarray) -> np.ndarray:
    try:
        return sla.cholesky(a, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return np.full_like(a, np.nan)


def _jax_cholesky(x):
    import jax.lax.linalg as la

    return la.cholesky(x, symmetrize_input=False)


_row("cholesky", 1, (), lambda ts, a: (_matrix("cholesky", ts[0]), ts[0])[1],
     lambda x: _batched(_cholesky_one, x, batch_rank=x.ndim - 2), _cube(1 / 3), _jax_cholesky,
     lambda rng: ([_spd(rng)], {}))


# ---------------------------------------------------------------- triangular_solve


def _trsm_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    tri, b = ts
    batch, m, _ = _matrix("triangular_solve", tri, bf16=True)
    k = b.shape[-2] if a["left_side"] else b.shape[-1] if b.rank else -1
    if b.rank != tri.rank or b.shape[:-2] != batch or k != m or b.dtype != tri.dtype:
        raise OpError(f"triangular_solve: {b} does not fit the triangular {tri} "
                      f"(left_side={a['left_side']})")
    return b


def _trsm_ref(a, b, *, left_side, lower, transpose_a, conjugate_a=False, unit_diagonal=False):
    def one(t, rhs):
        if conjugate_a:
            t = np.conj(t)
        if not left_side:  # x @ op(t) = rhs  <=>  op(t)^T @ x^T = rhs^T
            x = sla.solve_triangular(t, rhs.T, lower=lower, trans=0 if transpose_a else 1,
                                     unit_diagonal=unit_diagonal, check_finite=False)
            return x.T
        return sla.solve_triangular(t, rhs, lower=lower, trans=1 if transpose_a else 0,
                                    unit_diagonal=unit_diagonal, check_finite=False)

    if b.dtype == ml_dtypes.bfloat16:  # (SciPy takes no ml_dtypes type: solve in float32)
        return _trsm_ref(a.astype(np.float32), b.astype(np.float32), left_side=left_side,
                         lower=lower, transpose_a=transpose_a, conjugate_a=conjugate_a,
                         unit_diagonal=unit_diagonal).astype(b.dtype)
    return _batched(one, a, b, batch_rank=a.ndim - 2).astype(b.dtype, copy=False)


def _jax_trsm(a, b, **kw):
    import jax.lax.linalg as la

    return la.triangular_solve(a, b, **kw)


def _trsm_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    m = ins[0].shape[-1]
    return m * ins[1].size


def _trsm_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    left = bool(rng.integers(2))
    b = sample_array(rng, (2, 4, 3) if left else (2, 3, 4))
    return [np.linalg.cholesky(_spd(rng)).astype(np.float32), b], {
        "left_side": left, "lower": True, "transpose_a": bool(rng.integers(2)),
        "conjugate_a": False, "unit_diagonal": bool(rng.integers(2))}


_row("triangular_solve", 2, ("left_side", "lower", "transpose_a", "conjugate_a", "unit_diagonal"),
     _trsm_infer, _trsm_ref, _trsm_flops, _jax_trsm, _trsm_sample,
     optional=("conjugate_a", "unit_diagonal"))


# ---------------------------------------------------------------- lu


def _lu_infer(ts: Sequence[TensorType], a: Attrs) -> TupleType:
    (t,) = ts
    batch, m, n = _matrix("lu", t, square=False)
    return TupleType((t, TensorType((*batch, min(m, n)), "i32"), TensorType((*batch, m), "i32")))


def _lu_one(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lu, piv = sla.lu_factor(a, check_finite=False)
    perm = np.arange(a.shape[0])
    for i, p in enumerate(piv):
        perm[[i, p]] = perm[[p, i]]
    return lu, piv.astype(np.int32), perm.astype(np.int32)


def _jax_lu(x):
    import jax.lax.linalg as la

    return tuple(la.lu(x))


_row("lu", 1, (), _lu_infer, lambda x: _batched(_lu_one, x, batch_rank=x.ndim - 2),
     _cube(2 / 3), _jax_lu, lambda rng: ([sample_array(rng, (2, 4, 4))], {}))


# ---------------------------------------------------------------- qr


def _qr_infer(ts: Sequence[TensorType], a: Attrs) -> TupleType:
    (t,) = ts
    batch, m, n = _matrix("qr", t, square=False)
    if a.get("pivoting"):
        raise OpError("qr: pivoting is not first-class")
    k = m if a["full_matrices"] else min(m, n)
    return TupleType((TensorType((*batch, m, k), t.dtype), TensorType((*batch, k, n), t.dtype)))


def _qr_ref(x, full_matrices, pivoting=False):
    mode = "full" if full_matrices else "economic"
    return _batched(lambda a: sla.qr(a, mode=mode, check_finite=False), x,
                    batch_rank=x.ndim - 2)


def _jax_qr(x, full_matrices, pivoting=False):
    import jax.lax.linalg as la

    return tuple(la.qr(x, full_matrices=full_matrices))


_row("qr", 1, ("full_matrices", "pivoting"), _qr_infer, _qr_ref, _cube(2), _jax_qr,
     lambda rng: ([sample_array(rng, (2, 5, 3))], {"full_matrices": bool(rng.integers(2)),
                                                   "pivoting": False}), optional=("pivoting",))


# ---------------------------------------------------------------- eigh


def _eigh_infer(ts: Sequence[TensorType], a: Attrs) -> TupleType:
    (t,) = ts
    batch, m, _ = _matrix("eigh", t)
    if a.get("subset_by_index") not in (None, (0, m)):
        raise OpError("eigh: subset_by_index is not first-class")
    real = {"c64": "f32", "c128": "f64"}.get(t.dtype, t.dtype)
    return TupleType((t, TensorType((*batch, m), real)))


def _eigh_ref(x, lower=True, sort_eigenvalues=True, subset_by_index=None, algorithm=None):
    def one(a):
        w, v = sla.eigh(a, lower=lower, driver="evd", check_finite=False)
        return v, w

    return _batched(one, x, batch_rank=x.ndim - 2)


def _jax_eigh(x, lower=True, sort_eigenvalues=True, subset_by_index=None, algorithm=None):
    import jax.lax.linalg as la

    return tuple(la.eigh(x, lower=lower, symmetrize_input=False,
                         sort_eigenvalues=sort_eigenvalues))


_row("eigh", 1, ("lower", "sort_eigenvalues", "subset_by_index", "algorithm"), _eigh_infer,
     _eigh_ref, _cube(9), _jax_eigh, lambda rng: ([_spd(rng)], {"lower": True}),
     optional=("lower", "sort_eigenvalues", "subset_by_index", "algorithm"))


# ---------------------------------------------------------------- svd


def _svd_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    (t,) = ts
    batch, m, n = _matrix("svd", t, square=False)
    if a.get("subset_by_index") not in (None, (0, min(m, n))):
        raise OpError("svd: subset_by_index is not first-class")
    real = {"c64": "f32", "c128": "f64"}.get(t.dtype, t.dtype)
    s = TensorType((*batch, min(m, n)), real)
    if not a.get("compute_uv", True):
        return s
    k = (m, n) if a["full_matrices"] else (min(m, n), min(m, n))
    return TupleType((s, TensorType((*batch, m, k[0]), t.dtype),
                      TensorType((*batch, k[1], n), t.dtype)))


def _svd_ref(x, full_matrices, compute_uv=True, subset_by_index=None, algorithm=None):
    def one(a):
        if not compute_uv:
            return sla.svd(a, compute_uv=False, lapack_driver="gesdd", check_finite=False)
        u, s, vt = sla.svd(a, full_matrices=full_matrices, lapack_driver="gesdd",
                           check_finite=False)
        return s, u, vt

    return _batched(one, x, batch_rank=x.ndim - 2)


def _jax_svd(x, full_matrices, compute_uv=True, subset_by_index=None, algorithm=None):
    import jax.lax.linalg as la

    out = la.svd(x, full_matrices=full_matrices, compute_uv=compute_uv)
    if not compute_uv:
        return out
    u, s, vt = out  # the primitive's results are (s, u, vt)
    return s, u, vt


_row("svd", 1, ("full_matrices", "compute_uv", "subset_by_index", "algorithm"), _svd_infer,
     _svd_ref, _cube(12), _jax_svd,
     lambda rng: ([sample_array(rng, (2, 5, 3))], {"full_matrices": bool(rng.integers(2)),
                                                   "compute_uv": bool(rng.integers(3))}),
     optional=("compute_uv", "subset_by_index", "algorithm"))
