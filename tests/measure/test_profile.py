"""trace.profile (explorer/measure/profile.py): where a stage's time goes, node by node."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import registry
from explorer.measure import profile as profile_module
from explorer.measure.bodies import top_level
from explorer.measure.latest import latest
from explorer.measure.profile import kind_of, median_run
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
    # node times and total come from one run: they add up, the time outside said
    assert sum(p.seconds.values()) + p.outside == pytest.approx(p.total, rel=1e-9, abs=1e-12)
    assert p.coverage == pytest.approx(sum(p.seconds.values()) / p.total)
    assert p.total in p.totals and len(p.totals) == 3
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
    """A scan the CPU program generates is timed whole; on the interpreter core its body's
    nodes are timed apart, summed over the iterations, within the scan's own time."""
    xs, w = rng.random((6, 4), np.float32), rng.random((4, 4), np.float32)
    t = gx.explore(_scan, xs, w)
    p = t.profile(backend="cpu", repeats=2)
    loops = [r for r in p.rows if r.kind == "loop"]
    assert loops and loops[0].op == "scan" and loops[0].timed == "whole"
    assert any("1 timed whole" in n for n in p.notes) and p.inner == ()
    assert "whole" in str(p)
    q = t.profile(backend="reference", repeats=2)
    scan = next(r for r in q.rows if r.op == "scan")
    assert scan.timed == "apart" and any("1 timed apart" in n for n in q.notes)
    body = t.final.graph[scan.node].attrs["body"]
    direct = [r for r in q.inside(scan.node) if r.place == f"scan_{scan.node}/"]
    assert {r.node for r in direct} == {n.id for n in body.nodes if n.op != "parameter"}
    assert 0 < sum(r.seconds for r in direct) <= scan.seconds
    assert all(r.calls == 6 for r in direct)  # once per iteration, summed
    assert f"scan_{scan.node}/" in str(q)
    data = q.to_data()
    assert data["rows"][0]["timed"] in ("", "apart", "whole")
    assert {r["place"] for r in data["inner"]} >= {f"scan_{scan.node}/"}
    # the hooks are taken off after the profile: a bare run pays nothing
    exe = registry.executable(t.final.graph, "reference", t.options)
    assert all("evaluate" not in vars(c) for c in exe.children.values())


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_a_split_loop_run_by_the_interpreter_core_is_timed_apart(backend):
    """The CPU program hands a split loop whose body is no map-reduce to the interpreter
    core: its body's nodes are timed, summed over the chunks, within the loop's time."""
    def f(x, w):
        return jnp.sum(jnp.tanh(x @ w) @ w.T, axis=1)

    t = gx.explore(f, rng.random((512, 64), np.float32), rng.random((64, 64), np.float32),
                   memory_limit="64KiB")
    loop = next(n for n in t.final.graph.nodes if n.op == "loop")
    p = t.profile(backend=backend, repeats=2)
    assert p.row(loop.id).timed == "apart"
    inside = p.inside(loop.id)
    assert inside and all(r.place.startswith(f"loop_{loop.id}/") for r in inside)
    body = sum(r.seconds for r in inside if top_level(r.place))
    assert 0 < body <= p.row(loop.id).seconds
    assert {r.op for r in inside} >= {"dot_general"}


def _fake_runs(monkeypatch, totals, nodes):
    """Profiled runs that take `totals` seconds, node times given per run by `nodes(k)`."""
    runs = iter(range(10**6))

    def fake(exe, prepared):
        k = next(runs)
        total = totals[k % len(totals)]
        return total, nodes(k % len(totals), total)

    monkeypatch.setattr(profile_module, "stepped_times", fake)


def test_a_noisy_machine_is_said_with_the_spread(monkeypatch):
    t = gx.explore(mlp, *mlp_args())
    ids = [n.id for n in t.final.graph.nodes if n.op != "parameter"]
    # warm-up, then five runs of 1, 2, 1, 3, 1 ms: the median run is a 1 ms one
    totals = [1e-3, 1e-3, 2e-3, 1e-3, 3e-3, 1e-3]
    _fake_runs(monkeypatch, totals, lambda k, total: {i: total / (2 * len(ids)) for i in ids})
    monkeypatch.setattr(registry, "warm_up", lambda fn, n=1: fn())
    p = t.profile(backend="reference", repeats=5)
    assert p.total == 1e-3 and p.totals == (1e-3, 2e-3, 1e-3, 3e-3, 1e-3)
    assert p.spread == pytest.approx(2.0) and p.noisy
    assert sum(p.seconds.values()) == pytest.approx(0.5e-3) and p.outside == pytest.approx(0.5e-3)
    assert "NOISY" in str(p) and "NOISY" in p._repr_html_() and "(noisy)" in repr(p)
    assert p.to_data()["noisy"] is True and p.to_data()["spread"] == pytest.approx(2.0)
    # the printed shares add up to the run: the other nodes and the time outside them as rows
    cells = p._cells(3)
    assert [c[0] for c in cells[3:]] == [f"({len(ids) - 3} other nodes)", "(outside the nodes)"]
    assert sum(float(c[4].rstrip("%")) for c in cells) == pytest.approx(100, abs=0.3)
    assert "(outside the nodes)" in p.__str__(3)


def test_a_quiet_machine_is_not_noisy_but_an_unsteady_hot_node_is(monkeypatch):
    t = gx.explore(mlp, *mlp_args())
    ids = [n.id for n in t.final.graph.nodes if n.op != "parameter"]
    monkeypatch.setattr(registry, "warm_up", lambda fn, n=1: fn())
    _fake_runs(monkeypatch, [1e-3] * 4, lambda k, total: {i: total / len(ids) for i in ids})
    assert not t.profile(backend="reference", repeats=3).noisy
    # the same totals, but the hottest node takes 1, 5, 1 parts: a figure the runs cannot resolve
    def unsteady(k, total):
        times = {i: total / (4 * len(ids)) for i in ids}
        times[ids[0]] = total / 2 * (5 if k == 2 else 1) / 5
        return times

    _fake_runs(monkeypatch, [1e-3] * 4, unsteady)
    p = t.profile(backend="reference", repeats=3)
    assert p.noisy and p.spread == 0.0 and f"%{ids[0]}" in p.noise


def test_the_median_run_is_a_run_that_happened():
    assert median_run([3.0, 1.0, 2.0]) == 2
    assert median_run([4.0, 1.0, 2.0, 3.0]) == 2  # the lower middle: 2.0
    assert median_run([5.0]) == 0


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
