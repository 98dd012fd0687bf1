"""Every sharded zoo program (tests/corpora/sharded.py) opens with its shardings in the IR and
matches jax.jit on the reference, cpu and jax backends, every stage of the default pipeline
too (the passes leave collectives, constraints and shard_map bodies alone)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.ir.parser import parse
from explorer.ir.sharding import Sharding
from explorer.ir.verify import verify
from tests.corpora.sharded import programs

NAMES = ["data_parallel_mlp", "tensor_parallel_mlp", "collectives", "sharded_attention"]
# What each must show of its shardings: (sharded parameters, constraints, shard_maps, collectives)
SHOWN = {"data_parallel_mlp": (5, 4, 0, 0), "tensor_parallel_mlp": (5, 6, 0, 0),
         "collectives": (0, 0, 1, 7), "sharded_attention": (5, 4, 0, 0)}


@pytest.fixture(scope="module")
def zoo(devices: int) -> dict[str, Any]:
    return programs(devices)


def _close(got: Any, want: Any, what: str) -> None:
    got, want = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got) == len(want), what
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-5, err_msg=what)


def _count(g: Any) -> tuple[int, int, int, int]:
    bodies = [n.attrs["body"] for n in g.nodes if n.op == "shard_map"]
    collectives = sum(1 for b in bodies for n in b.nodes if gx.ir.ops.OPS[n.op].kind == "collective")
    return (sum(isinstance(p.attrs.get("sharding"), Sharding) for p in g.param_nodes),
            g.ops().get("sharding_constraint", 0), len(bodies), collectives)


@pytest.mark.parametrize("name", NAMES)
def test_opens_with_its_shardings_and_matches_jit(zoo: dict[str, Any], name: str) -> None:
    fn, args = zoo[name]
    want = fn(*args)
    trace = gx.explore(fn, *args)
    g = trace.stages[0].graph
    assert _count(g) >= SHOWN[name], str(g)
    assert parse(str(g)) == g
    for k, stage in enumerate(trace.stages):
        verify(stage.graph)
        assert _count(stage.graph)[1:] == _count(g)[1:], f"{stage.name} moved a barrier"
        _close(trace.run(*args, backend="reference", stage=k).value, want, f"{name} {stage.name}")
    for backend in ("cpu", "jax"):
        for stage in (0, -1):
            _close(trace.run(*args, backend=backend, stage=stage).value, want,
                   f"{name} on {backend}, stage {stage}")


def test_the_jax_backend_runs_on_the_mesh(zoo: dict[str, Any], devices: int) -> None:
    """Its arguments go to the devices as the parameters' shardings say."""
    from explorer.backends.jax import JaxExecutable

    fn, args = zoo["data_parallel_mlp"]
    g = gx.explore(fn, *args, pipeline=[]).stages[0].graph
    flat = [np.asarray(x) for x in jax.tree.leaves(args)]
    placed = JaxExecutable(g).prepare(flat)
    batch = [p for p, n in zip(placed, g.param_nodes) if n.attrs["name"] == "x"][0]
    assert len(batch.sharding.device_set) == devices
    assert batch.addressable_shards[0].data.shape == (4, 8)
