"""top_k in CPU programs (backends/cpu/sorting.py): one pass per row keeping the best k, bit for
bit the op row's reference (a stable sort of lax.top_k's key), and what jax.jit gives."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends.cpu import sorting
from explorer.ir.ops import OPS

SPECIALS = (np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0)


def _sample(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        lo = 0 if np.dtype(dtype).kind == "u" else -3
        return rng.integers(lo, 4, shape).astype(dtype)  # many ties
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    pick = rng.random(flat.size) < 0.4
    flat[pick] = rng.choice(np.array(SPECIALS, dtype), int(pick.sum()))
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "int8"])
@pytest.mark.parametrize("shape,k,axis", [((6, 40), 5, -1), ((40, 6), 3, 0), ((3, 4, 9), 9, 2),
                                          ((2, 7, 5), 1, 1), ((300, 300), 8, 1)])
def test_top_k_matches_the_reference_bit_for_bit(dtype: str, shape: tuple[int, ...], k: int,
                                                 axis: int) -> None:
    rng = np.random.default_rng(sum(shape) + k)
    x = _sample(rng, shape, dtype)
    got, want = sorting.top_k(x, k, axis), OPS["top_k"].ref(x, k, axis)
    bits = lambda a: np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")  # noqa: E731
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(bits(g), bits(w))  # NaN signs and -0.0 too


def test_ties_keep_the_first_index_and_nan_orders_as_xla() -> None:
    x = np.array([[1.0, 3.0, 3.0, np.nan, -np.nan, np.inf, 3.0, -0.0, 0.0]], np.float32)
    vals, idx = sorting.top_k(x, 9)
    jv, ji = jax.lax.top_k(jnp.asarray(x), 9)
    np.testing.assert_array_equal(idx, np.asarray(ji))
    np.testing.assert_array_equal(np.signbit(vals), np.signbit(np.asarray(jv)))


def test_other_element_types_and_empty_forms_keep_the_reference() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4).astype(jnp.bfloat16)
    for got, want in zip(sorting.top_k(x, 2), OPS["top_k"].ref(x, 2), strict=True):
        np.testing.assert_array_equal(got, want)
    assert [a.shape for a in sorting.top_k(np.zeros((3, 4), np.float32), 0)] == [(3, 0)] * 2
    assert [a.shape for a in sorting.top_k(np.zeros((0, 4), np.float32), 2)] == [(0, 2)] * 2


def test_top_k_on_the_cpu_backend_equals_jax_jit() -> None:
    """A program's top_k runs as the numba loop in the CPU program: ties (many, in small
    integers) and NaN as jax.jit orders them."""
    def best(x, y):  # noqa: ANN001, ANN202
        v, i = jax.lax.top_k(x * 2.0 - y, 6)
        return v, i, jax.lax.top_k(x.T, 2)[1]

    rng = np.random.default_rng(0)
    x, y = (rng.integers(-4, 4, (60, 500)).astype(np.float32) for _ in range(2))
    x[3, 7], x[5, :4] = np.nan, np.inf
    run = gx.explore(best, x, y).run(backend="cpu")
    assert "ops.top_k(" in run.program
    for got, want in zip(run.value, jax.jit(best)(x, y), strict=True):
        np.testing.assert_array_equal(got, np.asarray(want))
