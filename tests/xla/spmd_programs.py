"""Sharded programs for the SPMD tests of xla_pipeline (tests/xla/test_spmd.py). Importing this
module needs the host devices set before JAX starts: the tests run it in a subprocess with
XLA_FLAGS=--xla_force_host_platform_device_count=N."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def mesh(*axes: tuple[str, int]) -> Mesh:
    sizes = tuple(n for _, n in axes)
    return Mesh(np.array(jax.devices()[: int(np.prod(sizes))]).reshape(sizes),
                tuple(a for a, _ in axes))


def _mlp_args(batch: int = 64, d: int = 32, h: int = 64) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal(s).astype(np.float32) * 0.1
                 for s in ((batch, d), (d, h), (h, d), (batch, d)))


def _loss(x: Any, w1: Any, w2: Any, y: Any) -> Any:
    return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)


def _sgd(x: Any, w1: Any, w2: Any, y: Any) -> Any:
    g1, g2 = jax.grad(_loss, argnums=(1, 2))(x, w1, w2, y)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


def dp_mlp(n: int = 4) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A data-parallel training step: the batch split over `n` devices, weights replicated."""
    m = mesh(("data", n))
    batch, rep = NamedSharding(m, P("data", None)), NamedSharding(m, P())
    step = jax.jit(_sgd, in_shardings=(batch, rep, rep, batch), out_shardings=(rep, rep))
    return step, _mlp_args()


def tp_mlp(n: int = 4) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A tensor-parallel MLP: w1 split by columns, w2 by rows, the hidden activation
    constrained to be split by its features (with_sharding_constraint). Not jitted: the
    arguments' own shardings (device_put) say how it is split."""
    m = mesh(("model", n))

    def f(x: Any, w1: Any, w2: Any) -> Any:
        h = jnp.tanh(x @ w1)
        h = jax.lax.with_sharding_constraint(h, NamedSharding(m, P(None, "model")))
        return h @ w2

    x, w1, w2, _ = _mlp_args()
    args = (jax.device_put(x, NamedSharding(m, P())),
            jax.device_put(w1, NamedSharding(m, P(None, "model"))),
            jax.device_put(w2, NamedSharding(m, P("model", None))))
    return f, args


def _tp_loss(m: Mesh, hidden: Any) -> Callable[..., Any]:
    def loss(x: Any, w1: Any, w2: Any, y: Any) -> Any:
        h = jax.lax.with_sharding_constraint(jnp.tanh(x @ w1), NamedSharding(m, hidden))
        return jnp.mean((h @ w2 - y) ** 2)

    return loss


def tp_mlp_step(n: int = 4) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A tensor-parallel training step: w1 by columns, w2 by rows, the hidden activation
    constrained to its feature split; the gradients keep the weights' shardings."""
    m = mesh(("model", n))
    loss = _tp_loss(m, P(None, "model"))

    def step(x: Any, w1: Any, w2: Any, y: Any) -> Any:
        g1, g2 = jax.grad(loss, argnums=(1, 2))(x, w1, w2, y)
        return w1 - 0.1 * g1, w2 - 0.1 * g2

    rep, cols, rows = (NamedSharding(m, P()), NamedSharding(m, P(None, "model")),
                       NamedSharding(m, P("model", None)))
    return jax.jit(step, in_shardings=(rep, cols, rows, rep), out_shardings=(cols, rows)), \
        _mlp_args()


def dp_tp_mlp_step(n: int = 4) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """Both at once on a 2-D mesh (data × model): the batch split over `data`, the weights
    over `model`."""
    m = mesh(("data", 2), ("model", n // 2))
    loss = _tp_loss(m, P("data", "model"))

    def step(x: Any, w1: Any, w2: Any, y: Any) -> Any:
        g1, g2 = jax.grad(loss, argnums=(1, 2))(x, w1, w2, y)
        return w1 - 0.1 * g1, w2 - 0.1 * g2

    batch, cols, rows = (NamedSharding(m, P("data", None)), NamedSharding(m, P(None, "model")),
                         NamedSharding(m, P("model", None)))
    return jax.jit(step, in_shardings=(batch, cols, rows, batch), out_shardings=(cols, rows)), \
        _mlp_args()


def shard_map_psum(n: int = 4) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """shard_map: each device multiplies its rows, then the partial products are summed."""
    m = mesh(("x", n))

    def body(a: Any, b: Any) -> Any:
        return jax.lax.psum(a @ b, "x")

    f = jax.jit(jax.shard_map(body, mesh=m, in_specs=(P(None, "x"), P("x", None)),
                              out_specs=P()))
    rng = np.random.default_rng(1)
    return f, (rng.standard_normal((16, 32)).astype(np.float32),
               rng.standard_normal((32, 8)).astype(np.float32))


def shard_map_collectives(n: int = 4) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """shard_map with all_gather, ppermute and all_to_all."""
    m = mesh(("x", n))

    def body(a: Any) -> Any:
        g = jax.lax.all_gather(a, "x", tiled=True)
        r = jax.lax.ppermute(a, "x", [(i, (i + 1) % n) for i in range(n)])
        t = jax.lax.all_to_all(a, "x", 1, 0, tiled=True)
        return g.sum() + r * 2.0 + t.sum()

    f = jax.jit(jax.shard_map(body, mesh=m, in_specs=P("x", None), out_specs=P("x", None)))
    return f, (np.arange(8 * n * n, dtype=np.float32).reshape(2 * n, 4 * n) / 10,)


def attention(n: int = 4) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A multi-head attention block sharded over its heads."""
    m = mesh(("heads", n))
    b, s, d, heads = 2, 16, 32, 4

    def f(x: Any, wq: Any, wk: Any, wv: Any, wo: Any) -> Any:
        def split(t: Any) -> Any:
            return t.reshape(b, s, heads, d // heads)

        q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // heads)
        out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v)
        return out.reshape(b, s, d) @ wo

    rep, cols, rows = (NamedSharding(m, P()), NamedSharding(m, P(None, "heads")),
                       NamedSharding(m, P("heads", None)))
    rng = np.random.default_rng(2)
    x = rng.standard_normal((b, s, d)).astype(np.float32)
    ws = [rng.standard_normal((d, d)).astype(np.float32) / np.sqrt(d) for _ in range(4)]
    jf = jax.jit(f, in_shardings=(rep, cols, cols, cols, rows), out_shardings=rep)
    return jf, (x, *ws)


PROGRAMS = {"dp_mlp": dp_mlp, "tp_mlp": tp_mlp, "tp_mlp_step": tp_mlp_step,
            "dp_tp_mlp_step": dp_tp_mlp_step, "shard_map_psum": shard_map_psum,
            "shard_map_collectives": shard_map_collectives, "attention": attention}
