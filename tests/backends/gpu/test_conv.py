"""Convolutions as generated CUDA (backends/gpu/conv.py) on the host, by both methods, against
the reference: the op row's samples (NHWC with kernel dilation, NCHW with feature groups and
lhs dilation, 1-D with batch groups), what JAX's gradients emit (transposed convolutions, the
kernel's gradient), 3-D, negative padding, a window wider than the input, and the choice of
method by shape."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from explorer.backends.gpu import conv
from explorer.ir.ops import OPS
from tests.backends.cuda_host import host_compiler
from tests.backends.gpu.test_routines import check_op, routine_of, run_against_reference

pytestmark = pytest.mark.skipif(host_compiler() is None, reason="no g++ to build the host kernels")

METHODS = ("direct", "im2col + cuBLAS")


@pytest.fixture(params=METHODS)
def forced(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(conv, "method", lambda *a: request.param)
    return request.param


@pytest.mark.parametrize("seed", range(8))
def test_the_rows_samples_by_both_methods(forced: str, seed: int) -> None:
    ins, attrs = OPS["conv_general_dilated"].sample(np.random.default_rng(seed))
    check_op("conv_general_dilated", ins, attrs, forced.split(" ")[0])


def _attrs(spec: tuple, k: int, **more: object) -> dict:
    return {"dimension_numbers": spec, "window_strides": (1,) * k, "padding": ((0, 0),) * k,
            "lhs_dilation": (1,) * k, "rhs_dilation": (1,) * k, "feature_group_count": 1,
            "batch_group_count": 1, **more}


NHWC = ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
NCDHW = ((0, 1, 2, 3, 4), (0, 1, 2, 3, 4), (0, 1, 2, 3, 4))


@pytest.mark.parametrize("case", ["3-d", "negative padding", "strided transposed", "f64",
                                  "window wider than the input", "one channel"])
def test_edge_shapes(forced: str, case: str) -> None:
    rng = np.random.default_rng(1)

    def f(*shape: int, dtype: type = np.float32) -> np.ndarray:
        return rng.standard_normal(shape).astype(dtype)

    if case == "3-d":
        ins, attrs = [f(2, 3, 4, 5, 6), f(4, 3, 2, 2, 3)], _attrs(
            NCDHW, 3, window_strides=(1, 2, 1), padding=((1, 0), (0, 1), (1, 1)))
    elif case == "negative padding":
        ins, attrs = [f(1, 7, 6, 2), f(3, 3, 2, 2)], _attrs(NHWC, 2, padding=((-1, 2), (1, -2)))
    elif case == "strided transposed":
        ins, attrs = [f(2, 4, 4, 3), f(3, 3, 3, 5)], _attrs(
            NHWC, 2, padding=((2, 3), (2, 3)), lhs_dilation=(2, 2), rhs_dilation=(1, 2))
    elif case == "f64":
        ins, attrs = [f(2, 5, 5, 3, dtype=np.float64), f(2, 2, 3, 4, dtype=np.float64)], _attrs(NHWC, 2)
    elif case == "window wider than the input":
        ins, attrs = [f(2, 3, 3, 2), f(5, 5, 2, 4)], _attrs(NHWC, 2, padding=((1, 1), (1, 1)))
    else:
        ins, attrs = [f(3, 8, 8, 1), f(3, 3, 1, 1)], _attrs(NHWC, 2)
    check_op("conv_general_dilated", ins, attrs, forced.split(" ")[0])


def test_an_empty_result_launches_nothing(forced: str) -> None:
    ins = [np.ones((0, 5, 5, 2), np.float32), np.ones((3, 3, 2, 4), np.float32)]
    got = check_op("conv_general_dilated", ins, _attrs(NHWC, 2))
    assert got.shape == (0, 3, 3, 4)


def test_a_cnns_gradient_runs_its_convolutions_as_generated_cuda() -> None:
    """Forward, input gradient (lhs dilation, transposed), kernel gradient, grouped."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 9, 9, 4)).astype(np.float32)
    w = rng.standard_normal((3, 3, 2, 6)).astype(np.float32)

    def loss(x, w):
        y = jax.lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                         feature_group_count=2)
        return jnp.sum(jnp.tanh(y) ** 2)

    src = run_against_reference(jax.grad(loss, argnums=(0, 1)), x, w)
    assert src.count("conv_general_dilated_") >= 3 and "ops.conv_general_dilated(" not in src


def test_the_method_follows_the_shape() -> None:
    first = routine_of("conv_general_dilated", [np.ones((8, 32, 32, 3), np.float32),
                                                np.ones((3, 3, 3, 16), np.float32)], _attrs(NHWC, 2))
    wide = routine_of("conv_general_dilated", [np.ones((8, 16, 16, 64), np.float32),
                                               np.ones((3, 3, 64, 128), np.float32)], _attrs(NHWC, 2))
    assert first.how.startswith("direct") and wide.how.startswith("im2col + cuBLAS")
    assert conv.method(576, 128, 2 << 30) == "direct"  # a window matrix too large to hold


def test_other_types_keep_the_reference() -> None:
    ins = [np.ones((1, 4, 4, 2), np.int32), np.ones((2, 2, 2, 3), np.int32)]
    assert "keeps the reference" in routine_of("conv_general_dilated", ins, _attrs(NHWC, 2))
