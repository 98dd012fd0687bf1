"""trace.profile (explorer/measure/profile.py): where a stage's time goes, node by node."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import registry
from explorer.measure.latest import latest
from explorer.measure.profile import kind_of
from tests.measure.programs import mlp, mlp_args, rng


def _scan(xs, w):
    def step(c, x):
        c = jnp.tanh(c @ w + x)
        return c, c.sum()

    return jax.lax.scan(step, jnp.zeros(w.shape[0], xs.dtype), xs)[1].sum()


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_profile_times_every_top_level_node(backend):
    t = gx.explore(mlp, *mlp_args())
    p = t.profile(backend=backend, repeats=3)
    assert latest(t).profile is p
    computed = [n.id for n in t.final.graph.nodes if n.op != "parameter"]
    assert sorted(p.seconds) == sorted(computed)
    assert [r.node for r in p.rows] == computed
    assert all(v >= 0 for v in p.seconds.values())
    assert p.total > 0 and p.unprofiled > 0
    assert 0.5 < p.coverage <= 1.0 + 1e-9
    assert {r.kind for r in p.rows} >= {"dot", "kernel"}
    dot = next(r for r in p.rows if r.kind == "dot")
    assert dot.flops > 0 and dot.bytes > 0 and dot.gflops is not None
    assert "ms" in str(p) and "<table>" in p._repr_html_()
    assert p.to_data()["rows"][0]["node"] == computed[0]


def test_profile_finds_the_slow_node():
    """A 512^3 matrix product next to a handful of small adds: the product takes the time."""
    def f(a, b, c):
        return (a @ b).sum() + (c + 1.0).sum()

    a, b = rng.random((512, 512), np.float32), rng.random((512, 512), np.float32)
    t = gx.explore(f, a, b, rng.random(8, np.float32), pipeline=[])
    p = t.profile(backend="cpu", repeats=3)
    slow = p.top(1)[0]
    assert t.final.graph[slow.node].op == "dot_general"
    assert slow.seconds > 0.5 * sum(p.seconds.values())


def test_profile_loops_and_calls():
    xs, w = rng.random((6, 4), np.float32), rng.random((4, 4), np.float32)
    t = gx.explore(_scan, xs, w)
    p = t.profile(backend="cpu", repeats=2)
    loops = [r for r in p.rows if r.kind == "loop"]
    assert loops and loops[0].op == "scan"
    assert any("timed whole" in n for n in p.notes)


def test_profile_of_the_jax_backend_says_it_has_no_node_times():
    t = gx.explore(mlp, *mlp_args())
    p = t.profile(backend="jax", repeats=2)
    assert p.rows == () and p.seconds == {}
    assert "one program" in p.notes[0]
    assert p.total > 0


def test_profile_bad_input():
    t = gx.explore(mlp, *mlp_args())
    with pytest.raises(registry.BackendError, match="nope"):
        t.profile(backend="nope")
    reason = registry.unavailable_reason("gpu")
    if reason is not None:  # no GPU here: the registry's reason, word for word
        with pytest.raises(registry.BackendError, match=re.escape(reason)):
            t.profile(backend="gpu")
    with pytest.raises(ValueError, match="repeats"):
        t.profile(backend="cpu", repeats=0)
    with pytest.raises(IndexError, match="no stage 99"):
        t.profile(stage=99)


def test_kind_of():
    t = gx.explore(mlp, *mlp_args())
    kinds = {n.op: kind_of(n) for n in t.stages[0].graph.nodes}
    assert kinds["dot_general"] == "dot" and kinds["max"] == "op"
    fused = [n for n in t.final.graph.nodes if n.op == "kernel"]
    assert {kind_of(n) for n in fused} <= {"kernel", "dot"}
