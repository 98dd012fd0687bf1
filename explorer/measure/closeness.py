"""How close two sets of outputs are: the project's one notion of "the same values".

A value's scale is its magnitude: the largest finite entry's absolute value, at least 1. An
error is relative to that scale, so a tiny entry beside big ones is not held to a precision
its own size cannot carry. Element types have their own tolerance (sums re-associate):
integers and booleans must match exactly. Non-finite values (NaN, infinities) must sit where
the wanted ones do; only the finite rest is compared.

`check_outputs` is what measurement and reproducers check a backend's outputs with, against
the reference interpreter's (TOLERANCE); `mismatch` says where two arrays differ under a
tolerance the caller chooses (the tests' assertions wrap it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir import dtypes

# Relative error a backend's outputs may have against the reference's, by element type.
TOLERANCE = {"f16": 2e-2, "bf16": 5e-2, "f32": 1e-3, "f64": 1e-9, "c64": 1e-3, "c128": 1e-9}


def holds_no_data(a: np.ndarray) -> bool:
    """A float0 array (the tangent type of integer inputs): a shape and no values."""
    return a.dtype.kind == "V" and a.dtype.itemsize == 0


def magnitude(want: Any) -> float:
    """The scale of `want`: its largest finite absolute value, at least 1."""
    w = np.asarray(want)
    if holds_no_data(w):
        return 1.0
    if w.dtype.kind not in "fc":  # integers, booleans, bfloat16: as float64
        w = w.astype(np.float64)
    return max(1.0, float(np.max(np.abs(w[np.isfinite(w)]), initial=0.0)))


def relative_error(got: Sequence[Any], want: Sequence[np.ndarray]) -> float:
    """The worst error of `got` against `want`, output by output, relative to each wanted
    output's magnitude; infinite where a shape differs or a non-finite value moved."""
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        if holds_no_data(g) or holds_no_data(w):  # float0: only the shape and type to match
            if g.shape != w.shape or g.dtype != w.dtype:
                return float("inf")
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        if g64.shape != w64.shape:
            return float("inf")
        finite = np.isfinite(w64)
        if not np.array_equal(np.isfinite(g64), finite):
            return float("inf")
        error = float(np.max(np.abs(g64[finite] - w64[finite]), initial=0.0))
        worst = max(worst, error / magnitude(w64))
    return worst


def within_tolerance(error: float, want: Sequence[np.ndarray]) -> bool:
    """Whether `error` is within the tightest TOLERANCE of `want`'s element types (0 for
    integers and booleans)."""
    names = [dtypes.from_numpy(np.asarray(w).dtype) for w in want
             if not holds_no_data(np.asarray(w))]
    return error <= min((TOLERANCE.get(n, 0.0) for n in names), default=0.0)


def check_outputs(got: Sequence[Any], want: Sequence[np.ndarray]) -> tuple[bool, float]:
    """(whether every output is within its own element type's tolerance of the reference's,
    the worst relative error): an integer output must match exactly, a float32 one beside it
    within float32's tolerance."""
    if len(got) != len(want):
        return False, float("inf")
    ok, worst = True, 0.0
    for g, w in zip(got, want, strict=True):
        error = relative_error([g], [w])
        ok = ok and within_tolerance(error, [w])
        worst = max(worst, error)
    return ok, worst


def mismatch(got: Any, want: Any, rtol: float, atol: float) -> str:
    """Where `got` differs from `want`, or "" where it does not: the shapes must agree;
    floating-point and complex entries must satisfy |got - want| <= atol + rtol * |want|
    (NaN matching NaN, an infinity itself), others must be equal."""
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return f"shape {list(g.shape)} where {list(w.shape)} is wanted"
    if holds_no_data(g) or holds_no_data(w):
        return "" if g.dtype == w.dtype else f"type {g.dtype} where {w.dtype} is wanted"
    if w.dtype.kind in "biu" and g.dtype.kind in "biu":
        bad = g != w
    else:
        wide = np.complex128 if "c" in (g.dtype.kind, w.dtype.kind) else np.float64
        g, w = g.astype(wide), w.astype(wide)
        bad = ~np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    count = int(np.count_nonzero(bad))
    if not count:
        return ""
    with np.errstate(invalid="ignore"):  # inf - inf where both are infinite: nan, not a diff
        diff = np.abs(g.astype(np.complex128) - w.astype(np.complex128))
    where = np.unravel_index(int(np.argmax(np.where(bad, np.nan_to_num(diff, nan=np.inf), -1))),
                             bad.shape) if bad.ndim else ()
    return (f"{count} of {bad.size} entries differ (rtol {rtol:g}, atol {atol:g}); the worst at "
            f"{list(map(int, where))}: {g[where]!r}, wanted {w[where]!r}")
