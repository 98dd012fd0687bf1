"""Element types and type-changing params against `jax.jit`: lax.reduce_precision (a real op,
bit for bit), mul's out_dtype, dot_general's preferred_element_type (mixed precision, int8
products), 0-d and width-changing bitcasts, and the 4-bit integers. Every stage of the
pipeline runs on the reference, cpu and jax backends and must give jax.jit's shape, dtype and
value."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import explorer as gx
from explorer.frontend.jaxpr import TraceError
from tests.ir.ops.conformance import check_every_stage as _check

RNG = np.random.default_rng(0)


# ---------------------------------------------------------------- reduce_precision


def _awkward(dtype, n: int = 64) -> np.ndarray:
    """Random bit patterns (NaN payloads, subnormals), a wide spread of magnitudes, and the
    edge cases: ±inf, ±0, the largest and smallest normals, ties of the rounding."""
    dt = np.dtype(dtype)
    info = ml_dtypes.finfo(dt)
    bits = RNG.integers(0, 2 ** (8 * dt.itemsize), size=n, dtype=np.uint64)
    patterns = bits.astype(f"u{dt.itemsize}").view(dt)
    with np.errstate(over="ignore"):
        spread = (RNG.standard_normal(n) * np.exp(RNG.uniform(-40, 40, n))).astype(dt)
        special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, float(info.max),
                            -float(info.max), float(info.tiny), -float(info.tiny) / 2,
                            float(info.smallest_subnormal), 65504, 65520, 1e5, 6.1e-5, 6e-8,
                            1.125, 1.375, 1.625, -1.875, 1.0625, 3.0, 2.5], np.float64).astype(dt)
    return np.concatenate([patterns, spread, special])


PRECISIONS = ((5, 10), (8, 7), (5, 2), (11, 52), (4, 3), (1, 0), (8, 23))


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64"])
def test_reduce_precision_matches_jax(dtype: str) -> None:
    x = _awkward({"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
                  "f64": np.float64}[dtype])

    def fn(x):
        return tuple(lax.reduce_precision(x, exponent_bits=e, mantissa_bits=m)
                     for e, m in PRECISIONS)

    _check(fn, x, ops=("reduce_precision",), x64=dtype == "f64", bitwise=True)


def test_reduce_precision_is_kept_in_a_program() -> None:
    """Between other ops (fused into a kernel on the cpu backend, which runs it on the
    reference interpreter) and under its gradient (the identity, as JAX's)."""
    x = _awkward(np.float32, 16)
    # (NumPy's sin and XLA's may differ in the last place: reduce_precision itself is bit
    # for bit, above)
    _check(lambda x: jnp.sin(lax.reduce_precision(x * 3.0, 5, 2)) + 1.0, x, rtol=1e-6,
           ops=("reduce_precision",))
    x = RNG.normal(size=(4, 5)).astype(np.float32)
    _check(jax.grad(lambda x: jnp.sum(lax.reduce_precision(x, 8, 7) ** 2)), x)


# ---------------------------------------------------------------- mul's out_dtype


def test_mul_out_dtype() -> None:
    a, b = np.arange(-3, 5, dtype=np.int32), np.arange(8, dtype=np.int32) * 7
    _check(lambda a, b: lax.mul(a, b, out_dtype=jnp.float32), a, b, ops=("convert_element_type",))
    big = np.array([100, -128, 127, 3], np.int8)  # the products overflow int8, not int32
    _check(lambda a, b: lax.mul(a, b, out_dtype=jnp.int32), big, big[::-1].copy())
    x, s = RNG.normal(size=(3, 4)).astype(np.float32), np.float32(0.3)
    _check(lambda x, s: lax.mul(x, s, out_dtype=jnp.bfloat16), x, s)
    # the gradient multiplies with out_dtype the operand's type (f32 cotangent, f16 operand)
    h, g = RNG.normal(size=(3, 4)).astype(np.float16), RNG.normal(size=(3, 4)).astype(np.float16)
    _check(jax.grad(lambda h, g: lax.mul(h, g, out_dtype=jnp.float32).sum()), h, g)


# ---------------------------------------------------------------- preferred_element_type


def _bf16_ints(*shape: int) -> np.ndarray:
    """Small integers in bfloat16: every product and sum exact in f32, so any summation
    order gives jax.jit's bits."""
    return RNG.integers(-8, 9, size=shape).astype(ml_dtypes.bfloat16)


def test_dot_preferred_element_type_bf16() -> None:
    a, b = _bf16_ints(3, 5), _bf16_ints(5, 4)
    dims = (((1,), (0,)), ((), ()))
    t = _check(lambda a, b: lax.dot_general(a, b, dims, preferred_element_type=jnp.float32), a, b)
    dot = next(n for n in t.stages[0].graph.nodes if n.op == "dot_general")
    assert dot.attrs["preferred_element_type"] == "f32" and dot.dtype == "f32"
    q, k = _bf16_ints(2, 3, 4), _bf16_ints(2, 6, 4)
    _check(lambda q, k: jnp.einsum("bqd,bkd->bqk", q, k, preferred_element_type=jnp.float32),
           q, k, ops=("dot_general",))
    # a chain and an epilogue, as the dot-order and fuse passes see them
    c = _bf16_ints(4, 2)
    _check(lambda a, b, c: jnp.tanh(jnp.dot(lax.dot_general(
        a, b, dims, preferred_element_type=jnp.float32).astype(jnp.bfloat16), c,
        preferred_element_type=jnp.float32) * 0.01 + 1.0), a, b, c, rtol=1e-6)


def test_dot_preferred_element_type_attention_and_gradient() -> None:
    """Mixed-precision attention: bf16 operands, f32 scores and softmax, bf16 probabilities,
    f32 output; and its gradient with respect to all three inputs."""
    q, k, v = (RNG.normal(size=(2, 4, 8)).astype(ml_dtypes.bfloat16) for _ in range(3))

    def attention(q, k, v):
        s = jnp.einsum("bqd,bkd->bqk", q, k, preferred_element_type=jnp.float32) / np.sqrt(8.0)
        p = jax.nn.softmax(s, axis=-1).astype(jnp.bfloat16)
        return jnp.einsum("bqk,bkd->bqd", p, v, preferred_element_type=jnp.float32)

    # bf16 roundings of values that differ in the last f32 bit may flip: one bf16 ulp
    _check(attention, q, k, v, rtol=1e-2, ops=("dot_general",))
    _check(jax.grad(lambda q, k, v: attention(q, k, v).sum(), argnums=(0, 1, 2)), q, k, v,
           rtol=3e-2)


def test_dot_preferred_element_type_int8() -> None:
    a = RNG.integers(-128, 128, size=(3, 16)).astype(np.int8)
    b = RNG.integers(-128, 128, size=(16, 2)).astype(np.int8)
    dims = (((1,), (0,)), ((), ()))
    for pet in (jnp.int32, jnp.int16, jnp.float32, jnp.uint8):
        _check(lambda a, b, pet=pet: lax.dot_general(a, b, dims, preferred_element_type=pet),
               a, b, ops=("dot_general",))
    _check(lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.int32) + 1, a, b)


def test_dot_preferred_element_type_narrowing_runs_in_jax() -> None:
    """f32 operands and a bf16 or int32 result: XLA multiplies in f32 and converts the
    result, which the row does not claim; the node is opaque and JAX computes it."""
    a = RNG.normal(size=(3, 5)).astype(np.float32) * 4
    dims = (((1,), (0,)), ((), ()))
    for pet in (jnp.bfloat16, jnp.int32):
        t = _check(lambda a, pet=pet: lax.dot_general(a, a.T, dims, preferred_element_type=pet),
                   a)
        assert "opaque" in {n.op for n in t.stages[0].graph.nodes}


# ---------------------------------------------------------------- bitcasts


def test_bitcast_0d() -> None:
    _check(lambda x: lax.bitcast_convert_type(x, jnp.int32), np.float32(1.5),
           ops=("bitcast_convert_type",))
    _check(lambda x: lax.bitcast_convert_type(x, jnp.float32) + 1, np.uint32(0x3F800000))
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    _check(lambda x: lax.bitcast_convert_type(x, jnp.uint16), x)  # a trailing 2
    u = RNG.integers(0, 2**16, size=(2, 3, 2)).astype(np.uint16)
    _check(lambda u: lax.bitcast_convert_type(u, jnp.float32), u)  # and back
    _check(lambda x: lax.bitcast_convert_type(x, jnp.float32), np.float64(1.5), x64=True)


# ---------------------------------------------------------------- 4-bit integers


def test_int4_uint4() -> None:
    x = np.array([7.9, -9.5, 100, -100, np.nan, np.inf, -np.inf, -0.7, 3.5, 15.9, 16, -0.99],
                 np.float32)
    for t4 in (jnp.int4, jnp.uint4):  # floats saturate
        _check(lambda x, t4=t4: x.astype(t4), x, ops=("convert_element_type",))
    i = np.arange(-20, 20, dtype=np.int32)
    for t4 in (jnp.int4, jnp.uint4):  # integers wrap; and back to 32 bits
        _check(lambda i, t4=t4: (i.astype(t4), i.astype(t4).astype(jnp.float32) * 2), i)
    u = np.array([[0x12, 0xAB], [0xF0, 0x07]], np.uint8)
    _check(lambda u: lax.bitcast_convert_type(u, jnp.uint4), u)  # low nibble first
    _check(lambda u: lax.bitcast_convert_type(u, jnp.int4), u)
    n = np.arange(-8, 8).astype(ml_dtypes.int4)
    _check(lambda n: lax.bitcast_convert_type(n, jnp.uint4), n, ops=("bitcast_convert_type",))
    _check(lambda n: lax.bitcast_convert_type(n.reshape(8, 2), jnp.uint8), n)
    _check(lambda n: (n + n, n * 3, -n, jnp.maximum(n, 2), n // 3, n << 1), n)
    _check(lambda n: (n.astype(jnp.uint4) - jnp.uint4(3), n.astype(jnp.uint4).astype(jnp.int4)), n)
    m = n.reshape(4, 4)
    _check(lambda m: (jnp.sum(m, axis=1, dtype=jnp.int4), jnp.sort(m, axis=1)), m)


def test_int4_trace_error_names_dtype_and_line() -> None:
    """A type the IR lacks is refused where it enters, naming it and the user's line."""
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(TraceError, match=r"float8_e4m3fn.*test_conformance_dtypes\.py"):
        gx.explore(lambda x: x.astype(jnp.float8_e4m3fn), x)
