"""Sharded zoo programs, as users write them for several devices: a data-parallel and a
tensor-parallel MLP training step (jit with in/out shardings, with_sharding_constraint), a
shard_map with psum, all_gather, ppermute and all_to_all, and a sharded attention block.

They need the devices their meshes name, so each is made for a device count:
`programs(n)` (n even, at least 4) gives {name: (fn, args)}; the tests run them in a process
started with `XLA_FLAGS=--xla_force_host_platform_device_count=n` (tests/sharding/).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

Program = tuple[Callable[..., Any], tuple[Any, ...]]


def mesh(shape: tuple[int, ...], names: tuple[str, ...]) -> Mesh:
    """A mesh of the first devices (axes of JAX's default, Auto, type)."""
    size = int(np.prod(shape))
    return Mesh(np.array(jax.devices()[:size]).reshape(shape), names)


def _normal(rng: np.random.Generator, *shape: int, scale: float = 0.3) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _mlp_loss(p: dict[str, Any], x: Any, y: Any, hidden: Callable[[Any], Any] = lambda h: h) -> Any:
    h = hidden(jnp.tanh(x @ p["w1"] + p["b1"]))
    return jnp.mean((h @ p["w2"] - y) ** 2)


def data_parallel_mlp(n: int) -> Program:
    """One SGD step of a 2-layer MLP, the batch split over all devices, parameters replicated."""
    rng = np.random.default_rng(1)
    m = mesh((n,), ("data",))
    rep, batch = NamedSharding(m, P()), NamedSharding(m, P("data"))
    params = {"w1": _normal(rng, 8, 16), "b1": _normal(rng, 16), "w2": _normal(rng, 16, 4)}
    x, y = _normal(rng, 4 * n, 8), _normal(rng, 4 * n, 4)

    def step(p: dict[str, Any], x: Any, y: Any) -> Any:
        loss, g = jax.value_and_grad(_mlp_loss)(p, x, y)
        return loss, jax.tree.map(lambda a, b: a - 0.1 * b, p, g)

    fn = jax.jit(step, in_shardings=({k: rep for k in params}, batch, batch),
                 out_shardings=(rep, {k: rep for k in params}))
    return fn, (params, x, y)


def tensor_parallel_mlp(n: int) -> Program:
    """One SGD step of a 2-layer MLP, its hidden layer split over the devices: w1 by columns,
    w2 by rows, the hidden activations constrained to the same split."""
    rng = np.random.default_rng(2)
    m = mesh((n,), ("model",))
    cols, rows, rep = NamedSharding(m, P(None, "model")), NamedSharding(m, P("model")), NamedSharding(m, P())
    params = {"w1": _normal(rng, 8, 4 * n), "b1": _normal(rng, 4 * n), "w2": _normal(rng, 4 * n, 4)}
    x, y = _normal(rng, 6, 8), _normal(rng, 6, 4)
    shardings = {"w1": cols, "b1": rows, "w2": rows}

    def step(p: dict[str, Any], x: Any, y: Any) -> Any:
        hidden = lambda h: jax.lax.with_sharding_constraint(h, cols)  # noqa: E731
        loss, g = jax.value_and_grad(_mlp_loss)(p, x, y, hidden)
        return loss, jax.tree.map(lambda a, b: a - 0.1 * b, p, g)

    fn = jax.jit(step, in_shardings=(shardings, rep, rep), out_shardings=(rep, shardings))
    return fn, (params, x, y)


def collectives(n: int) -> Program:
    """A shard_map over a (2, n/2) mesh whose body sums, gathers, rotates and transposes its
    blocks: psum, all_gather, ppermute, all_to_all, psum_scatter and axis_index."""
    rng = np.random.default_rng(3)
    k = n // 2
    m = mesh((2, k), ("x", "y"))
    ring = [(i, (i + 1) % k) for i in range(k)]

    def body(a: Any, b: Any) -> Any:
        total = jax.lax.psum(a, "y")  # [2, 4]
        biggest = jax.lax.pmax(a, ("x", "y"))
        gathered = jax.lax.all_gather(a, "y", axis=0, tiled=True)  # [2k, 4]
        rotated = jax.lax.ppermute(a, "y", perm=ring)
        swapped = jax.lax.all_to_all(gathered, "y", 0, 1, tiled=True)  # [2, 4k]
        scattered = jax.lax.psum_scatter(gathered, "y", scatter_dimension=0, tiled=True)  # [2, 4]
        where = jax.lax.axis_index("y").astype(jnp.float32)
        return total + biggest + rotated * where + scattered, swapped @ b

    fn = jax.shard_map(body, mesh=m, in_specs=(P("x", "y"), P()),
                       out_specs=(P("x", "y"), P("x", "y")))
    a, b = _normal(rng, 4, 4 * k), _normal(rng, 4 * k, 2 * k)
    return jax.jit(fn), (a, b)


def sharded_attention(n: int) -> Program:
    """A multi-head self-attention block on a (2, n/2) mesh: the batch over "data", the heads
    over "model" (q/k/v projections by columns, the output projection by rows)."""
    rng = np.random.default_rng(4)
    k = n // 2
    m = mesh((2, k), ("data", "model"))
    heads, dim, seq, batch = 2 * k, 4 * k, 4, 4
    x = _normal(rng, batch, seq, dim)
    p = {"wq": _normal(rng, dim, dim), "wk": _normal(rng, dim, dim), "wv": _normal(rng, dim, dim),
         "wo": _normal(rng, dim, dim)}
    cols, rows = NamedSharding(m, P(None, "model")), NamedSharding(m, P("model", None))
    head_split = NamedSharding(m, P("data", "model"))

    def attention(p: dict[str, Any], x: Any) -> Any:
        b, t, d = x.shape

        def split(w: Any) -> Any:
            h = (x @ w).reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)
            return jax.lax.with_sharding_constraint(h, head_split)

        q, kk, v = split(p["wq"]), split(p["wk"]), split(p["wv"])
        scores = q @ kk.transpose(0, 1, 3, 2) / np.sqrt(d // heads)
        out = jax.nn.softmax(scores, -1) @ v
        return x + out.transpose(0, 2, 1, 3).reshape(b, t, d) @ p["wo"]

    fn = jax.jit(attention, in_shardings=({"wq": cols, "wk": cols, "wv": cols, "wo": rows},
                                          NamedSharding(m, P("data"))),
                 out_shardings=NamedSharding(m, P("data")))
    return fn, (p, x)


def programs(n: int) -> dict[str, Program]:
    """Every sharded zoo program, made for `n` devices."""
    return {"data_parallel_mlp": data_parallel_mlp(n), "tensor_parallel_mlp": tensor_parallel_mlp(n),
            "collectives": collectives(n), "sharded_attention": sharded_attention(n)}
