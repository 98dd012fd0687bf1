"""Gathers and scatters as generated CUDA (backends/gpu/indexing.py) on the host, against the
reference, with JAX's index modes exactly: indices below 0 and past the end in "clip",
"fill" and "promise_in_bounds"; duplicates (scatter-add accumulates by atomics, scatter keeps
the last update in index order, mul/min/max combine by compare-and-swap, NaN propagating);
unique indices; batching dims; integer types; empty updates; and embedding lookups,
take_along_axis and segment_sum as JAX traces them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from explorer.ir.ops import OPS
from tests.backends.cuda_host import host_compiler
from tests.backends.gpu.test_routines import check_op, routine_of, run_against_reference

pytestmark = pytest.mark.skipif(host_compiler() is None, reason="no g++ to build the host kernels")

SCATTERS = ("scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max")
MODES = ("clip", "fill", "promise_in_bounds")


@pytest.mark.parametrize("op", ("gather", *SCATTERS))
@pytest.mark.parametrize("seed", range(6))
def test_the_rows_samples(op: str, seed: int) -> None:
    ins, attrs = OPS[op].sample(np.random.default_rng(seed))
    check_op(op, ins, attrs, "generated CUDA")


ROWS = {"offset_dims": (1,), "collapsed_slice_dims": (0,), "start_index_map": (0,),
        "slice_sizes": (1, 5)}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
def test_a_gather_out_of_bounds_in_every_mode(mode: str, dtype: type) -> None:
    x = (np.arange(30).reshape(6, 5) * 1.5).astype(dtype)
    ids = np.array([[0], [5], [-1], [6], [100], [-7], [3]], np.int32)
    got = check_op("gather", [x, ids], {**ROWS, "mode": mode}, f"({mode} mode)")
    if mode == "fill":  # the default fill: NaN, or the type's extreme
        assert np.isnan(got[2]).all() if dtype == np.float32 else (got[3] == got[2]).all()


def test_a_gather_of_windows_with_a_fill_value_and_a_two_component_index() -> None:
    x = np.random.default_rng(0).standard_normal((7, 6, 3)).astype(np.float32)
    ids = np.array([[0, 0], [5, 4], [6, 1], [-1, 2], [2, 5]], np.int64)
    attrs = {"offset_dims": (1, 2), "collapsed_slice_dims": (2,), "start_index_map": (0, 1),
             "slice_sizes": (2, 2, 1), "mode": "fill", "fill_value": -3.0}
    check_op("gather", [x, ids], attrs)
    check_op("gather", [x, ids], {**attrs, "mode": "clip"})


def test_a_gather_with_batching_dims() -> None:
    x = np.random.default_rng(1).standard_normal((3, 8, 4)).astype(np.float32)
    ids = np.random.default_rng(2).integers(-2, 10, (3, 5, 1)).astype(np.int32)
    check_op("gather", [x, ids], {
        "offset_dims": (2,), "collapsed_slice_dims": (1,), "start_index_map": (1,),
        "operand_batching_dims": (0,), "start_indices_batching_dims": (0,),
        "slice_sizes": (1, 1, 4), "mode": "fill"})


UPDATE_ROWS = {"update_window_dims": (1,), "inserted_window_dims": (0,),
               "scatter_dims_to_operand_dims": (0,)}


@pytest.mark.parametrize("op", SCATTERS)
@pytest.mark.parametrize("mode", MODES)
def test_scatters_with_duplicates_and_indices_out_of_bounds(op: str, mode: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 1.5, (6, 33)).astype(np.float32)
    x[2, 4] = np.nan
    ids = np.array([[1], [4], [1], [-1], [6], [1], [5], [4], [9], [0]], np.int32)
    upd = rng.uniform(0.5, 1.5, (10, 33)).astype(np.float32)
    upd[7, 3] = np.nan
    check_op(op, [x, ids, upd], {**UPDATE_ROWS, "mode": mode})
    many = rng.integers(0, 6, (500, 1)).astype(np.int32)  # many threads meeting on 6 rows
    check_op(op, [x, many, rng.uniform(0.5, 1.5, (500, 33)).astype(np.float32)],
             {**UPDATE_ROWS, "mode": mode})


@pytest.mark.parametrize("op", SCATTERS)
def test_integer_scatters_and_unique_indices(op: str) -> None:
    rng = np.random.default_rng(4)
    for dtype in (np.int32, np.int64, np.uint32, np.float64):
        x = rng.integers(1, 9, (5, 4)).astype(dtype)
        ids = np.array([[3], [0], [3], [7]], np.int32)
        upd = rng.integers(1, 9, (4, 4)).astype(dtype)
        check_op(op, [x, ids, upd], {**UPDATE_ROWS, "mode": "fill"})
    unique = np.array([[3], [0], [4]], np.int32)
    r = check_op(op, [x, unique, upd[:3]], {**UPDATE_ROWS, "unique_indices": True},
                 "unique indices")
    assert r.dtype == np.float64


def test_a_scatter_of_nothing_and_windows_that_do_not_fit() -> None:
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    check_op("scatter-add", [x, np.zeros((0, 1), np.int32), np.ones((0, 3), np.float32)],
             UPDATE_ROWS)
    # windows of 2 rows: a start of 3 does not fit (dropped; clipped to 2 in "clip" mode)
    windows = {"update_window_dims": (1, 2), "inserted_window_dims": (),
               "scatter_dims_to_operand_dims": (0,)}
    ids, upd = np.array([[1], [3], [-1]], np.int32), np.full((3, 2, 3), 7, np.float32)
    for op in ("scatter", "scatter-add"):
        for mode in MODES:
            check_op(op, [x, ids, upd], {**windows, "mode": mode})


def test_types_without_a_cuda_form_keep_the_reference() -> None:
    x, ids = np.ones((5, 4), np.int8), np.zeros((3, 1), np.int32)
    assert "no atomic add of i8" in routine_of("scatter-add", [x, ids, np.ones((3, 4), np.int8)],
                                               UPDATE_ROWS)
    assert "bools" in routine_of("gather", [np.ones((5, 4), bool), ids], ROWS | {"slice_sizes": (1, 4)})
    twice = {"offset_dims": (), "collapsed_slice_dims": (0, 1), "start_index_map": (0, 0),
             "slice_sizes": (1, 1)}
    assert "twice" in routine_of("gather", [np.ones((5, 5), np.float32), np.zeros((3, 2), np.int32)],
                                 twice)


def test_embedding_take_along_axis_and_segment_sum_with_their_gradients() -> None:
    rng = np.random.default_rng(5)
    table = rng.standard_normal((11, 8)).astype(np.float32)
    tokens = rng.integers(0, 11, (3, 7)).astype(np.int32)
    scores = rng.standard_normal((3, 7, 5)).astype(np.float32)
    pick = rng.integers(0, 5, (3, 7, 1)).astype(np.int32)
    seg = rng.integers(0, 4, 21).astype(np.int32)

    def loss(table, scores):
        e = table[tokens]  # an embedding lookup
        t = jnp.take_along_axis(scores, pick, axis=-1)
        s = jax.ops.segment_sum(e.reshape(21, 8) * t.reshape(21, 1), seg, num_segments=4)
        return jnp.sum(jnp.tanh(s) ** 2)

    src = run_against_reference(jax.value_and_grad(loss, argnums=(0, 1)), table, scores)
    assert "ops.gather(" not in src and "ops.scatter_add(" not in src
    assert "generated CUDA gather" in src and "generated CUDA scatter-add" in src
