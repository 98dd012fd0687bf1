"""Backend tests share the seed programs and a helper that fuses a traced function."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.ir import Graph
from explorer.trace import Trace
from tests.passes.semantic import assert_outputs_close

FUSED = list(gx.passes.DEFAULT_PIPELINE)

# name -> (function, argument shapes): the seeds' examples and a few more shapes of kernel.
PROGRAMS: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]]]] = {
    "seed001-reduce-sum": (lambda x, y, z: jnp.sum(x + y * z), [(64, 48)] * 3),
    "seed004-mean": (lambda x, y: jnp.mean(x ** 2 * 3 + y), [(64, 48)] * 2),
    "chain-matvec": (lambda a, b, v: (a @ b) @ v, [(40, 30), (30, 20), (20,)]),
    "euclidean": (lambda x, y: jnp.sum((x[:, None, :] - y[None, :, :]) ** 2, -1),
                  [(30, 8), (20, 8)]),
    "row-softmax": (lambda x: jnp.exp(x - x.max(1, keepdims=True))
                    / jnp.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True), [(16, 24)]),
    "column-max": (lambda x, b: jnp.max(jnp.tanh(x * 2.0) + b[None, :], axis=0), [(33, 17), (17,)]),
    "dot-then-kernel": (lambda a, b: jnp.tanh(a @ b + 1.0).sum(1), [(12, 9), (9, 7)]),
    "ints": (lambda x: (x * 3 - 7) // 2 % 5, [(9, 4)]),
}


def args_for(shapes: list[tuple[int, ...]], seed: int = 0, dtype: Any = np.float32) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return [rng.integers(-20, 20, size=s).astype(dtype) for s in shapes]
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def explore(name: str, pipeline: list[str] | None = None) -> tuple[Trace, list[np.ndarray]]:
    fn, shapes = PROGRAMS[name]
    args = args_for(shapes, dtype=np.int32 if name == "ints" else np.float32)
    return gx.explore(fn, *args, pipeline=FUSED if pipeline is None else pipeline), args


def kernels_of(g: Graph) -> list[Any]:
    return [n for n in g.nodes if n.op == "kernel"]


def run_matching_the_reference(name: str, backend: str) -> Any:
    """Program `name` fused and run on `backend`: its value must be the reference's on the
    traced program, and every kernel of the final stage must be listed (the RunResult)."""
    t, _ = explore(name)
    want = t.run(backend="reference", stage=0).value
    got = t.run(backend=backend)
    assert_outputs_close([want], [got.value], name)
    assert len(got.kernels) == len(kernels_of(t.final.graph))
    return got
