"""Pooling and the max-pooling gradients as generated CUDA (backends/gpu/window.py) on the
host, against the reference: the rows' samples (padding, base and window dilation), NaN and
ties (the first extremum is selected, as XLA:CPU does), -inf against padding, integer sums,
ranks 1 and 3, empty results, and the gradients JAX emits for max and average pooling."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from explorer.ir.ops import OPS
from explorer.ir.ops.windows import window_out_shape
from tests.backends.cuda_host import host_compiler
from tests.backends.gpu.test_routines import check_op, routine_of, run_against_reference

pytestmark = pytest.mark.skipif(host_compiler() is None, reason="no g++ to build the host kernels")

POOLS = ("reduce_window_sum", "reduce_window_max", "reduce_window_min")
GRADS = ("select_and_scatter_add", "select_and_gather_add")


@pytest.mark.parametrize("op", POOLS + GRADS)
@pytest.mark.parametrize("seed", range(6))
def test_the_rows_samples(op: str, seed: int) -> None:
    ins, attrs = OPS[op].sample(np.random.default_rng(seed))
    check_op(op, ins, attrs, "generated CUDA")


def _window(rank: int, w: tuple, s: tuple, pad: tuple | None = None, **more: object) -> dict:
    return {"window_dimensions": w, "window_strides": s,
            "padding": pad or ((0, 0),) * rank, **more}


@pytest.mark.parametrize("op", POOLS)
def test_nan_infinities_integers_and_other_ranks(op: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    x[0, 1, 1, 0], x[1, 2, 3, 1], x[0, 4, 4, 2] = np.nan, np.inf, -np.inf
    check_op(op, [x], _window(4, (1, 3, 2, 1), (1, 2, 1, 1), ((0, 0), (1, 2), (0, 1), (0, 0)),
                              base_dilation=(1, 1, 2, 1), window_dilation=(1, 2, 1, 1)))
    ints = rng.integers(-50, 50, (4, 9)).astype(np.int32)
    check_op(op, [ints], _window(2, (2, 3), (2, 1), ((1, 0), (0, 2))))
    check_op(op, [rng.standard_normal(11)], _window(1, (4,), (3,), ((2, 2),)))  # f64, rank 1
    empty = check_op(op, [x], _window(4, (1, 9, 9, 1), (1, 1, 1, 1)))  # fits nowhere
    assert empty.size == 0


@pytest.mark.parametrize("op", GRADS)
@pytest.mark.parametrize("prim", ["ge", "le"])
def test_ties_nan_and_padding_select_the_first(op: str, prim: str) -> None:
    x = np.zeros((1, 6, 6, 2), np.float32)  # all ties: the first offset of each window
    x[0, 1, 1, 0] = np.nan  # NaN wins over numbers, the first NaN over a later one
    x[0, 1, 2, 0] = np.nan
    x[0, 4, 4, 1] = -np.inf if prim == "ge" else np.inf  # against the padding's fill
    attrs = {"select_prim": prim, **_window(4, (1, 3, 3, 1), (1, 2, 2, 1),
                                            ((0, 0), (1, 1), (1, 1), (0, 0)))}
    positions = window_out_shape(op, x.shape, attrs["window_dimensions"],
                                 attrs["window_strides"], attrs["padding"], None, None)
    rng = np.random.default_rng(4)
    if op == "select_and_scatter_add":
        check_op(op, [rng.standard_normal(positions).astype(np.float32), x], attrs)
    else:
        check_op(op, [rng.standard_normal(x.shape).astype(np.float32), x], attrs)


def test_max_and_average_pooling_gradients_run_as_generated_cuda() -> None:
    x = np.random.default_rng(5).standard_normal((2, 8, 8, 3)).astype(np.float32)

    def loss(x):
        m = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        a = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9
        return jnp.sum(m ** 2) + jnp.sum(jnp.tanh(a))

    src = run_against_reference(jax.grad(loss), x)
    assert "select_and_scatter_add_" in src and "ops.select_and_scatter_add(" not in src
    assert "ops.reduce_window" not in src


def test_bools_keep_the_reference() -> None:
    assert "bools" in routine_of("reduce_window_max", [np.ones((4, 4), bool)],
                                 _window(2, (2, 2), (2, 2)))
