"""The seeds' examples as JAX functions, with example inputs: our tutorials, tests, benchmarks.

Each `make_*` returns (fn, args) with small default sizes; pass sizes for benchmarks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Example = tuple[Callable[..., Any], tuple[Any, ...]]


def _rand(rng: np.random.Generator, *shape: int, dtype: Any = np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


# ---- seed 000 (gambit): (A x B) x v, and the Euclidean distance


def matrix_chain(a: jax.Array, b: jax.Array, v: jax.Array) -> jax.Array:
    return (a @ b) @ v


def make_matrix_chain(n: int = 8, m: int = 6, d: int = 5, seed: int = 0) -> Example:
    rng = np.random.default_rng(seed)
    return matrix_chain, (_rand(rng, n, m), _rand(rng, m, d), _rand(rng, d))


def euclidean_naive(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1)


def euclidean_quadratic(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.sum(a**2, axis=-1)[:, None] + jnp.sum(b**2, axis=-1)[None, :] - 2 * a @ b.T


def make_euclidean(n: int = 6, m: int = 5, k: int = 3, seed: int = 0,
                   dtype: Any = np.float32) -> tuple[Any, ...]:
    rng = np.random.default_rng(seed)
    return _rand(rng, n, k, dtype=dtype), _rand(rng, m, k, dtype=dtype)


# ---- seed 004: reduce_sum(x + y*z); seed 001: mean(x**2*3 + y)


def sum_xyz(x: jax.Array, y: jax.Array, z: jax.Array) -> jax.Array:
    return jnp.sum(x + y * z)


def mean_square(x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean(x**2 * 3 + y)


def make_sum_xyz(n: int = 64, seed: int = 0) -> Example:
    rng = np.random.default_rng(seed)
    return sum_xyz, (_rand(rng, n), _rand(rng, n), _rand(rng, n))


def make_mean_square(n: int = 16, seed: int = 0) -> Example:
    rng = np.random.default_rng(seed)
    return mean_square, (_rand(rng, n, n), _rand(rng, n, n))


# ---- seed 002: three hand-built matmuls


def gemm1(a: jax.Array, b: jax.Array) -> jax.Array:
    """The API call."""
    return jnp.matmul(a, b)


def gemm2(a: jax.Array, b: jax.Array) -> jax.Array:
    """Broadcast, multiply, reduce: tf.tile(expand_dims(...)) in the seed."""
    return jnp.sum(jnp.tile(a[:, :, None], (1, 1, b.shape[1])) *
                   jnp.tile(b[None, :, :], (a.shape[0], 1, 1)), axis=1)


def gemm3(a: jax.Array, b: jax.Array) -> jax.Array:
    """Python loops over scalars: the graph grows with the matrix."""
    rows = []
    for i in range(a.shape[0]):
        row = []
        for j in range(b.shape[1]):
            acc = a[i, 0] * b[0, j]
            for k in range(1, a.shape[1]):
                acc = acc + a[i, k] * b[k, j]
            row.append(acc)
        rows.append(jnp.stack(row))
    return jnp.stack(rows)


def make_gemm(n: int = 4, seed: int = 0) -> tuple[Any, ...]:
    rng = np.random.default_rng(seed)
    return _rand(rng, n, n), _rand(rng, n, n)


# ---- a transformer-style stack: the scale benchmark for tracing and passes


def _layer(h: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    mu = jnp.mean(h, axis=-1, keepdims=True)
    var = jnp.mean((h - mu) ** 2, axis=-1, keepdims=True)
    x = (h - mu) * jax.lax.rsqrt(var + 1e-5) * p["scale"]
    q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
    att = jax.nn.softmax(q @ k.T / jnp.sqrt(q.shape[-1]), axis=-1)
    h = h + (att @ v) @ p["wo"]
    return h + jax.nn.relu(h @ p["w1"]) @ p["w2"]


def mlp_attention(layers: int = 12, seq: int = 16, width: int = 32, seed: int = 0) -> Example:
    """(fn, (params, x)): `layers` pre-norm attention + MLP blocks; 446 jaxpr ops at 12."""
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    params = [
        {"scale": np.float32(1.0), "wq": w(width, width), "wk": w(width, width),
         "wv": w(width, width), "wo": w(width, width), "w1": w(width, 2 * width),
         "w2": w(2 * width, width)}
        for _ in range(layers)
    ]
    x = rng.standard_normal((seq, width)).astype(np.float32)

    def model(params: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
        h = x
        for p in params:
            h = _layer(h, p)
        return jnp.sum(h**2)

    return model, (params, x)


def mlp_attention_grad(layers: int = 12) -> Example:
    """The gradient of `mlp_attention` with respect to its parameters (1,443 jaxpr ops)."""
    fn, args = mlp_attention(layers)
    return jax.grad(fn), args
