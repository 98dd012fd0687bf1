"""Closeness of outputs (explorer/measure/closeness.py): errors relative to the wanted
value's magnitude, each element type its own tolerance, integers exact."""

from __future__ import annotations

import numpy as np

from explorer.measure.closeness import check_outputs, magnitude, mismatch, relative_error


def test_the_magnitude_is_the_largest_finite_value_at_least_one():
    assert magnitude(np.array([0.1, -0.5], np.float32)) == 1.0
    assert magnitude(np.array([3.0, -7.0, np.inf, np.nan])) == 7.0
    assert magnitude(np.array([-9, 2], np.int32)) == 9.0


def test_a_small_entry_beside_big_ones_is_held_to_the_big_ones_scale():
    want = np.array([1000.0, 1e-3], np.float32)
    got = np.array([1000.0, 2e-3], np.float32)
    assert relative_error([got], [want]) < 1e-5 and check_outputs([got], [want])[0]
    assert not mismatch(got, want, rtol=1e-5, atol=1e-5 * magnitude(want))
    assert mismatch(got, want, rtol=1e-5, atol=1e-5)  # an absolute tolerance catches it


def test_non_finite_values_must_stay_where_they_are():
    want = np.array([1.0, np.nan, np.inf])
    assert check_outputs([want.copy()], [want]) == (True, 0.0)
    assert not check_outputs([np.array([1.0, 2.0, np.inf])], [want])[0]
    assert not mismatch(want.copy(), want, rtol=0.0, atol=0.0)
    assert mismatch(np.array([1.0, 2.0, np.inf]), want, rtol=0.1, atol=0.1)


def test_integers_are_exact_and_shapes_must_agree():
    want = np.arange(4, dtype=np.int32)
    assert "1 of 4 entries differ" in mismatch(want + np.eye(4, dtype=np.int32)[0], want, 1.0, 1.0)
    assert "shape [3]" in mismatch(want[:3], want, 0.0, 0.0)
    assert check_outputs([want[:3]], [want]) == (False, float("inf"))


def test_float0_outputs_match_by_shape_and_type_alone():
    import jax

    zero = np.zeros((2, 3), jax.dtypes.float0)
    assert check_outputs([zero], [np.zeros((2, 3), jax.dtypes.float0)]) == (True, 0.0)
    assert check_outputs([np.zeros((3,), jax.dtypes.float0)], [zero])[0] is False
    assert mismatch(zero, zero, 1e-3, 0.0) == ""
    assert "type" in mismatch(np.zeros((2, 3), np.float32), zero, 1e-3, 0.0)
