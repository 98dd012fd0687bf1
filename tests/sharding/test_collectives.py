"""Each collective row's reference over the mesh (its `spmd`, ir/ops/sharding.py) against JAX's:
a shard_map of the one collective on a (2, n/2) mesh, explored and run on the reference, cpu
and jax backends, against jax.jit of the same function; also inside a loop's body and a while's
condition within the shard_map."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import explorer as gx
from tests.corpora.sharded import mesh

Body = Callable[[Any, int], Any]  # (block, size of "y") -> result block

CASES: dict[str, tuple[Body, str]] = {  # body, and the collective it must become
    "psum": (lambda a, k: jax.lax.psum(a, "y"), "psum"),
    "psum-both": (lambda a, k: jax.lax.psum(a, ("x", "y")), "psum"),
    "pmax": (lambda a, k: jax.lax.pmax(a, "x"), "pmax"),
    "pmin": (lambda a, k: jax.lax.pmin(a, ("y", "x")), "pmin"),
    "all_gather": (lambda a, k: jax.lax.all_gather(a, "y", axis=1, tiled=True)[:, :4], "all_gather"),
    "all_gather-stacked": (lambda a, k: jax.lax.all_gather(a, "y").sum(0), "all_gather"),
    "psum_scatter": (lambda a, k: jnp.tile(jax.lax.psum_scatter(a, "y", scatter_dimension=1,
                                                                tiled=True), (1, k)), "psum_scatter"),
    "ppermute": (lambda a, k: jax.lax.ppermute(a, "y", [(i, (i + 1) % k) for i in range(k)]),
                 "ppermute"),
    "ppermute-partial": (lambda a, k: jax.lax.ppermute(a, "x", [(0, 1)]), "ppermute"),
    "all_to_all": (lambda a, k: jax.lax.all_to_all(a, "y", 1, 0, tiled=True).reshape(4, 4),
                   "all_to_all"),
    "axis_index": (lambda a, k: a * jax.lax.axis_index("y") + jax.lax.axis_index("x"), "axis_index"),
    "ring-in-a-loop": (lambda a, k: _ring(a, k), "scan"),
    "psum-in-a-while-condition": (lambda a, k: _grow(a), "while"),
}


def _ring(a: Any, k: int) -> Any:
    """Each device's block passed around the ring of "y" in a loop (a scan of ppermutes)."""
    def step(i: Any, carry: tuple[Any, Any]) -> tuple[Any, Any]:
        acc, x = carry
        x = jax.lax.ppermute(x, "y", [(j, (j + 1) % k) for j in range(k)])
        return acc + x * (i + 1), x

    return jax.lax.fori_loop(0, k, step, (a, a))[0]


def _grow(a: Any) -> Any:
    """Doubled until the sum over all devices passes a bound: a collective in the condition."""
    return jax.lax.while_loop(lambda x: jax.lax.psum(jnp.abs(x).sum(), ("x", "y")) < 1e4,
                              lambda x: x * 2 + 1, a)


@pytest.mark.parametrize("case", sorted(CASES))
def test_collective_matches_jax(case: str, devices: int) -> None:
    k = devices // 2
    body, op = CASES[case]
    m = mesh((2, k), ("x", "y"))
    fn = jax.jit(jax.shard_map(lambda a: body(a, k), mesh=m, in_specs=P("x", "y"),
                               out_specs=P("x", "y"), check_vma=False))
    a = np.random.default_rng(len(case)).standard_normal((8, 4 * k)).astype(np.float32)
    want = np.asarray(fn(a))
    trace = gx.explore(fn, a, pipeline=[])
    body_graph = next(n for n in trace.stages[0].graph.nodes if n.op == "shard_map").attrs["body"]
    assert op in body_graph.ops(), str(body_graph)
    for backend in ("reference", "cpu", "jax"):
        np.testing.assert_allclose(trace.run(a, backend=backend).value, want, rtol=1e-5, atol=1e-5,
                                   err_msg=f"{case} on {backend}")
