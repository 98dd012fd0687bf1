"""Graphs every structural test runs over: the seeds, the catalogue, the model, hand-built ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from explorer import examples as ex
from explorer.measure.closeness import magnitude, mismatch

rng = np.random.default_rng(0)
X = rng.standard_normal((4, 6)).astype(np.float32)
Y = rng.standard_normal((6, 5)).astype(np.float32)
V = rng.standard_normal((6,)).astype(np.float32)

# name -> (fn, args): everyday jax.numpy / jax.nn functions the tool must cover.
CATALOGUE: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "softmax": (jax.nn.softmax, (X,)),
    "log_softmax": (jax.nn.log_softmax, (X,)),
    "logsumexp": (jax.nn.logsumexp, (X,)),
    "gelu": (jax.nn.gelu, (X,)),
    "gelu_exact": (lambda x: jax.nn.gelu(x, approximate=False), (X,)),
    "relu": (jax.nn.relu, (X,)),
    "silu": (jax.nn.silu, (X,)),
    "sigmoid": (jax.nn.sigmoid, (X,)),
    "softplus": (jax.nn.softplus, (X,)),
    "elu": (jax.nn.elu, (X,)),
    "leaky_relu": (jax.nn.leaky_relu, (X,)),
    "one_hot": (lambda x: jax.nn.one_hot(jnp.argmax(x, -1), 6), (X,)),
    "standardize": (lambda x: jax.nn.standardize(x, axis=-1), (X,)),
    "norm": (jnp.linalg.norm, (X,)),
    "norm_axis": (lambda x: jnp.linalg.norm(x, axis=1), (X,)),
    "mean": (jnp.mean, (X,)),
    "var": (lambda x: jnp.var(x, axis=0), (X,)),
    "std": (jnp.std, (X,)),
    "einsum": (lambda x, y: jnp.einsum("ij,jk->ik", x, y), (X, Y)),
    "einsum_batched": (lambda x: jnp.einsum("bij,bkj->bik", x, x), (X.reshape(2, 2, 6),)),
    "matmul": (jnp.matmul, (X, Y)),
    "matvec": (lambda x, v: x @ v, (X, V)),
    "outer": (lambda v: jnp.outer(v, v), (V,)),
    "where": (lambda x: jnp.where(x > 0, x, -x), (X,)),
    "clip": (lambda x: jnp.clip(x, -0.5, 0.5), (X,)),
    "abs_sign": (lambda x: jnp.abs(x) * jnp.sign(x), (X,)),
    "max_min": (lambda x: jnp.max(x, 0) - jnp.min(x, 1).sum(), (X,)),
    "argmax_argmin": (lambda x: (jnp.argmax(x, 0), jnp.argmin(x, 1)), (X,)),
    "prod": (lambda x: jnp.prod(x, axis=1), (X,)),
    "cumsum": (lambda x: jnp.cumsum(x, axis=1), (X,)),
    "cumprod": (lambda x: jnp.cumprod(x, axis=0), (X,)),
    "sort": (lambda x: jnp.sort(x, axis=1), (X,)),
    "argsort": (lambda x: jnp.argsort(x, axis=0), (X,)),
    "top_k": (lambda x: jax.lax.top_k(x, 3), (X,)),
    "transpose": (lambda x: x.T, (X,)),
    "reshape": (lambda x: x.reshape(2, 12), (X,)),
    "squeeze_expand": (lambda x: jnp.squeeze(jnp.expand_dims(x, 0), 0), (X,)),
    "flip": (lambda x: jnp.flip(x, 1), (X,)),
    "slice_index": (lambda x: x[1:3, ::2] + x[0, 0], (X,)),
    "concatenate": (lambda x: jnp.concatenate([x, 2 * x], axis=1), (X,)),
    "stack": (lambda x: jnp.stack([x, x]), (X,)),
    "split": (lambda x: jnp.split(x, 2, axis=0), (X,)),
    "pad": (lambda x: jnp.pad(x, ((1, 0), (2, 1))), (X,)),
    "tile_repeat": (lambda x: jnp.tile(x, (2, 1)) + jnp.repeat(x, 2, axis=0), (X,)),
    "dynamic_slice": (lambda x: jax.lax.dynamic_slice(x, (1, 2), (2, 3)), (X,)),
    "exp_log": (lambda x: jnp.log1p(jnp.exp(x)) + jnp.expm1(x) + jnp.exp2(x), (X,)),
    "trig": (lambda x: jnp.sin(x) + jnp.cos(x) + jnp.tan(x * 0.3) + jnp.arctan2(x, 1.0), (X,)),
    "roots": (lambda x: jnp.sqrt(jnp.abs(x)) + jax.lax.rsqrt(jnp.abs(x) + 1) + jnp.cbrt(x), (X,)),
    "rounding": (lambda x: jnp.floor(x) + jnp.ceil(x) + jnp.round(x), (X,)),
    "power": (lambda x: x**3 + jnp.abs(x) ** 1.5 + jnp.square(x), (X,)),
    "erf": (lambda x: jax.scipy.special.erf(x), (X,)),
    "tanh": (jnp.tanh, (X,)),
    "logical": (lambda x: jnp.logical_and(x > 0, ~(x > 1)) | jnp.logical_xor(x < 0, x < -1), (X,)),
    "isfinite": (lambda x: jnp.isfinite(jnp.asarray(x) / (x - jnp.round(x))), (X,)),
    "astype": (lambda x: (x * 3).astype(jnp.int32) % 4, (X,)),
    "integer_div": (lambda x: (x * 10).astype(jnp.int32) // 3, (X,)),
    "iota": (lambda x: x + jnp.arange(6), (X,)),
    "eye": (lambda x: x[:4, :4] @ jnp.eye(4), (X,)),
    "tril": (lambda x: jnp.tril(x), (X,)),
    "linspace": (lambda x: x * jnp.linspace(0, 1, 6), (X,)),
    "any_all": (lambda x: (jnp.any(x > 1), jnp.all(x > -3)), (X,)),
    "stop_gradient": (lambda x: jax.lax.stop_gradient(x) * 2, (X,)),
}

SEEDS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "matrix_chain": ex.make_matrix_chain(),
    "euclidean_naive": (ex.euclidean_naive, ex.make_euclidean()),
    "euclidean_quadratic": (ex.euclidean_quadratic, ex.make_euclidean()),
    "sum_xyz": ex.make_sum_xyz(),
    "mean_square": ex.make_mean_square(),
    "gemm1": (ex.gemm1, ex.make_gemm()),
    "gemm2": (ex.gemm2, ex.make_gemm()),
    "gemm3": (ex.gemm3, ex.make_gemm(3)),
}

MODELS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "mlp_attention": ex.mlp_attention(),
    "mlp_attention_grad": ex.mlp_attention_grad(),
}

ALL = {**CATALOGUE, **SEEDS, **MODELS}


def assert_tree_close(ours: Any, theirs: Any, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """The same pytree, leaf by leaf the same shape and type; floats within `rtol` and `atol`
    relative to the leaf's magnitude (explorer/measure/closeness.py), others equal."""
    a_leaves, a_tree = jax.tree_util.tree_flatten(ours)
    b_leaves, b_tree = jax.tree_util.tree_flatten(theirs)
    assert a_tree == b_tree
    for a, b in zip(a_leaves, b_leaves):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
        floating = np.issubdtype(b.dtype, np.floating)
        tolerance = (rtol, atol * magnitude(b)) if floating else (0.0, 0.0)
        assert not (why := mismatch(a, b, *tolerance)), why
