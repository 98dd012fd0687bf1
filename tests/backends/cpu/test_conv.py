"""The CPU's convolutions (backends/cpu/conv.py, conv_kernels.py) against the op row's
reference: every method on every layout, stride, padding (SAME, VALID, explicit, asymmetric,
negative), kernel and input dilation, odd sizes, channels 1..128, float32 and float64; the
gradients' convolutions (input and kernel gradients, strided and transposed) as JAX emits
them; grouped ones fall back to the reference with a note in the listing."""

from __future__ import annotations

import itertools
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends.cpu import conv
from explorer.ir.graph import Attrs, TensorType
from explorer.ir.ops import OPS

NAME = "conv_general_dilated"
NHWC = ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
NCHW = ((0, 1, 2, 3), (0, 1, 2, 3), (0, 1, 2, 3))
KERNEL_GRAD = ((3, 0, 1, 2), (3, 0, 1, 2), (2, 3, 0, 1))  # JAX's, for an NHWC forward
INPUT_GRAD = ((0, 3, 1, 2), (2, 3, 0, 1), (0, 3, 1, 2))


def _arr(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def _check(x: np.ndarray, w: np.ndarray, method: str | None = None, **a: object) -> str:
    """conv's result for these inputs against the reference; its method."""
    t = [TensorType(v.shape, "f32" if v.dtype == np.float32 else "f64") for v in (x, w)]
    fn = conv.prepare(t, Attrs(a))
    assert fn is not None
    if method is not None:
        assert fn.method == method, (fn.method, x.shape, w.shape, a)
    got, want = fn(x, w), OPS[NAME].ref(x, w, **a)
    tol = 1e-4 if x.dtype == np.float32 else 1e-10
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)))
    return fn.method


def _lhs_shape(dn: tuple, n: int, c: int, h: int, w: int) -> tuple[int, ...]:
    shape = [0] * 4
    for d, size in zip(dn[0], (n, c, h, w)):
        shape[d] = size
    return tuple(shape)


def _rhs_shape(dn: tuple, o: int, i: int, kh: int, kw: int) -> tuple[int, ...]:
    shape = [0] * 4
    for d, size in zip(dn[1], (o, i, kh, kw)):
        shape[d] = size
    return tuple(shape)


def test_every_method_matches_the_reference_on_every_layout_and_window() -> None:
    """Strides, paddings (asymmetric and negative), kernel and input dilation, on NHWC and
    NCHW, float32 and float64: every method is taken somewhere and each agrees."""
    rng = np.random.default_rng(0)
    seen: set[str] = set()
    windows = [((1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1)),  # SAME
               ((1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)),  # VALID
               ((2, 2), ((0, 1), (0, 1)), (1, 1), (1, 1)),  # SAME, stride 2
               ((2, 1), ((2, 0), (1, 2)), (1, 2), (1, 1)),  # asymmetric, kernel dilation
               ((1, 1), ((2, 1), (2, 1)), (1, 1), (2, 2)),  # a strided conv's input gradient
               ((1, 2), ((-1, 2), (0, -1)), (2, 1), (3, 1)),  # negative padding, both dilations
               ((1, 1), ((1, 1), (1, 1)), (1, 1), (2, 2))]  # a transposed conv
    shapes = [(2, 3, 9, 40, 5, 3, 3), (2, 16, 7, 6, 24, 3, 3), (1, 1, 5, 5, 1, 2, 3),
              (3, 8, 11, 9, 4, 1, 1), (2, 4, 6, 7, 3, 5, 6)]
    for (dn, dtype), (n, c, h, w, o, kh, kw), (s, p, d, base) in itertools.product(
            ((NHWC, np.float32), (NCHW, np.float64)), shapes, windows):
        x = _arr(rng, _lhs_shape(dn, n, c, h, w), dtype)
        k = _arr(rng, _rhs_shape(dn, o, c, kh, kw), dtype)
        seen.add(_check(x, k, window_strides=s, padding=p, dimension_numbers=dn,
                        rhs_dilation=d, lhs_dilation=base))
    assert {"im2col", "gemm", "direct", "col2im", "im2col, transposed product",
            "shifted gemm"} <= seen, seen


@pytest.mark.parametrize("channels", [(1, 1), (3, 16), (16, 32), (32, 64), (128, 128)])
def test_channels_one_to_128(channels: tuple[int, int]) -> None:
    """A forward SAME 3x3 convolution, its kernel gradient and its input gradient (as JAX
    writes them) at each channel count, on odd image sizes."""
    c, o = channels
    rng = np.random.default_rng(c)
    x, w = _arr(rng, (2, 7, 9, c), np.float32), _arr(rng, (3, 3, c, o), np.float32)
    dy = _arr(rng, (2, 7, 9, o), np.float32)
    same = dict(window_strides=(1, 1), padding=((1, 1), (1, 1)))
    _check(x, w, dimension_numbers=NHWC, **same)
    _check(x, dy, "im2col, transposed product", dimension_numbers=KERNEL_GRAD, **same)
    _check(dy, w, dimension_numbers=INPUT_GRAD, **same)


def test_large_ones_run_on_every_core() -> None:
    """Each method at a size that takes its parallel build."""
    rng = np.random.default_rng(1)
    x, w = _arr(rng, (4, 32, 32, 32), np.float32), _arr(rng, (3, 3, 32, 64), np.float32)
    same = dict(window_strides=(1, 1), padding=((1, 1), (1, 1)))
    _check(x, w, "shifted gemm", dimension_numbers=NHWC, **same)
    _check(x, w, "im2col", dimension_numbers=NHWC, window_strides=(2, 2),
           padding=((0, 1), (0, 1)))
    _check(x, _arr(rng, (4, 32, 32, 64), np.float32), "im2col, transposed product",
           dimension_numbers=KERNEL_GRAD, **same)
    _check(_arr(rng, (4, 16, 16, 64), np.float32), w, "col2im", dimension_numbers=INPUT_GRAD,
           window_strides=(1, 1), padding=((2, 1), (2, 1)), lhs_dilation=(2, 2))
    _check(_arr(rng, (8, 32, 32, 3), np.float32), _arr(rng, (3, 3, 3, 16), np.float32), "direct",
           dimension_numbers=NHWC, **same)
    _check(x, _arr(rng, (1, 1, 32, 16), np.float32), "gemm", dimension_numbers=NHWC,
           window_strides=(1, 1), padding=((0, 0), (0, 0)))


def test_the_direct_loop_spells_out_an_input_dilation() -> None:
    """The direct loop's planes take an input dilation too (`_method` sends those to
    col2im; forced here)."""
    rng = np.random.default_rng(2)
    x, w = _arr(rng, (2, 9, 40, 3), np.float32), _arr(rng, (3, 3, 3, 5), np.float32)
    with mock.patch.object(conv, "_method", return_value="direct"):
        _check(x, w, "direct", dimension_numbers=NHWC, window_strides=(2, 1),
               padding=((-1, 2), (0, -1)), rhs_dilation=(1, 2), lhs_dilation=(2, 3))


def test_grouped_and_other_convolutions_run_the_reference_with_a_reason() -> None:
    """Feature groups, batch groups and 1-D convolutions: the reference, the method saying
    why; the op row's own samples agree through conv's entry point."""
    rng = np.random.default_rng(3)
    x, w = _arr(rng, (2, 6, 6, 4), np.float32), _arr(rng, (3, 3, 2, 6), np.float32)
    m = _check(x, w, dimension_numbers=NHWC, window_strides=(1, 1),
               padding=((1, 1), (1, 1)), feature_group_count=2)
    assert "reference" in m and "feature groups" in m
    for seed in range(24):
        ins, attrs = OPS[NAME].sample(np.random.default_rng(seed))
        np.testing.assert_allclose(conv.REFERENCES[NAME](*ins, **attrs),
                                   OPS[NAME].ref(*ins, **attrs), rtol=1e-5, atol=1e-5)


def _unet_like(p: dict, x: jax.Array) -> jax.Array:
    dn = ("NHWC", "HWIO", "NHWC")
    y = jax.nn.relu(jax.lax.conv_general_dilated(x, p["a"], (2, 2), "SAME",
                                                 dimension_numbers=dn) + p["b"])
    z = jax.lax.conv_transpose(y, p["t"], (2, 2), "SAME", dimension_numbers=dn)
    z = jax.lax.conv_general_dilated(jnp.concatenate([z, x], -1), p["c"], (1, 1), "VALID",
                                     dimension_numbers=dn)
    return jnp.sum(z ** 2)


def test_a_programs_gradient_names_each_convolutions_method() -> None:
    """A strided and a transposed convolution's gradient on the CPU backend: every
    convolution line of the listing names its method, and the values match the reference."""
    rng = np.random.default_rng(4)
    p = {"a": _arr(rng, (3, 3, 3, 8), np.float32), "b": _arr(rng, (8,), np.float32),
         "t": _arr(rng, (2, 2, 8, 4), np.float32), "c": _arr(rng, (1, 1, 7, 5), np.float32)}
    x = _arr(rng, (2, 10, 10, 3), np.float32)
    t = gx.explore(jax.grad(_unet_like), p, x)
    r = t.run(backend="cpu")
    lines = [line for line in r.program.splitlines()
             if NAME in line and not line.lstrip().startswith("#")]
    assert lines and all("laid out ahead: " in line for line in lines), lines
    said = " ".join(lines)
    for method in ("col2im", "im2col, transposed product"):
        assert method in said, said
    for got, want in zip(jax.tree_util.tree_leaves(r.value),
                         jax.tree_util.tree_leaves(t.run(backend="reference").value)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
