"""trace.profile, trace.roofline, trace.memory_timeline and the machine peaks (issue 25)."""

from __future__ import annotations

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from matplotlib.figure import Figure

import explorer as gx
from explorer.backends import peaks as peaks_module
from explorer.backends import registry
from explorer.profile import kind_of

rng = np.random.default_rng(0)


def _mlp(x, w1, w2):
    h = jax.nn.relu(x @ w1)
    return jax.nn.softmax(h @ w2, axis=-1).sum()


def _mlp_args():
    return (rng.random((96, 64), np.float32), rng.random((64, 128), np.float32),
            rng.random((128, 32), np.float32))


def _scan(xs, w):
    def step(c, x):
        c = jnp.tanh(c @ w + x)
        return c, c.sum()

    return jax.lax.scan(step, jnp.zeros(w.shape[0], xs.dtype), xs)[1].sum()


@pytest.fixture
def small_peaks(monkeypatch, tmp_path):
    """Peaks measured small and cached in a temporary directory."""
    monkeypatch.setattr(peaks_module, "GEMM_N", {"cpu": 128, "gpu": 256})
    monkeypatch.setattr(peaks_module, "TRIAD_N", 1 << 16)
    monkeypatch.setattr(peaks_module, "REPEATS", 2)
    monkeypatch.setattr(peaks_module, "cache_path", lambda: tmp_path / "peaks.json")
    return tmp_path / "peaks.json"


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_profile_times_every_top_level_node(backend):
    t = gx.explore(_mlp, *_mlp_args())
    p = t.profile(backend=backend, repeats=3)
    assert t.last_profile is p
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
    t = gx.explore(_mlp, *_mlp_args())
    p = t.profile(backend="jax", repeats=2)
    assert p.rows == () and p.seconds == {}
    assert "one program" in p.notes[0]
    assert p.total > 0


def test_profile_bad_input():
    t = gx.explore(_mlp, *_mlp_args())
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
    t = gx.explore(_mlp, *_mlp_args())
    kinds = {n.op: kind_of(n) for n in t.stages[0].graph.nodes}
    assert kinds["dot_general"] == "dot" and kinds["max"] == "op"
    fused = [n for n in t.final.graph.nodes if n.op == "kernel"]
    assert {kind_of(n) for n in fused} <= {"kernel", "dot"}


def test_peaks_are_measured_once_and_cached(small_peaks, monkeypatch):
    first = peaks_module.peaks("cpu")
    assert first.flops > 0 and first.bandwidth > 0 and first.ridge > 0
    assert json.loads(small_peaks.read_text())
    calls = []
    monkeypatch.setattr(peaks_module, "_measure_cpu",
                        lambda: calls.append(1) or (1e9, 1e9, "counted"))
    assert peaks_module.peaks("cpu") == first and not calls  # from the cache
    again = peaks_module.peaks("cpu", remeasure=True)
    assert calls and again.how == "counted"
    small_peaks.write_text("{not json")  # a damaged cache is measured again, not an error
    assert peaks_module.peaks("cpu").how == "counted"


def test_roofline(small_peaks):
    t = gx.explore(_mlp, *_mlp_args())
    r = t.roofline(backend="cpu", repeats=2)
    assert t.last_roofline is r
    assert r.points and {p.kind for p in r.points} <= {"kernel", "dot", "loop"}
    assert r.xla is not None and r.xla.flops > 0 and r.xla.bytes > 0 and r.xla.seconds > 0
    for p in r.points:
        assert p.seconds >= 0
        if p.intensity is not None:
            assert p.bound(r.peaks) <= r.peaks.flops
    assert isinstance(r.plot(), Figure)
    data = r.to_data()
    assert data["peaks"]["flops"] == r.peaks.flops and data["xla"]["kind"] == "xla"
    assert "jax.jit" in str(r) and "<svg" in r._repr_html_()


def test_roofline_without_a_function(small_peaks):
    t = gx.explore(_mlp, *_mlp_args())
    del t.fn
    r = t.roofline(backend="reference", repeats=1)
    assert r.xla is None and any("no XLA point" in n for n in r.notes)


def _distances(x, y):
    d = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    return jnp.exp(-d).sum(1)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_memory_timeline_under_a_limit(backend):
    x, y = rng.random((400, 8), np.float32), rng.random((600, 8), np.float32)
    limit = 256 * 1024
    t = gx.explore(_distances, x, y, memory_limit=limit)
    m = t.memory_timeline(backend=backend)
    assert t.last_timeline is m
    g = t.final.graph
    assert [s.node for s in m.steps] == [n.id for n in g.nodes]
    assert m.memory_limit == limit
    assert m.planned_peak <= limit and m.measured_peak is not None and m.measured_peak <= limit
    measured = [s.measured_peak for s in m.steps if s.measured_peak is not None]
    assert measured and max(measured) == m.measured_peak
    assert m.steps[m.measured_peak_step].measured_peak == m.measured_peak
    for b in m.buffers:
        assert 0 <= b.start <= b.end < len(m.steps) and b.bytes > 0
    assert m.peak_step is not None
    assert sum(b.bytes for b in m.at_peak) <= m.steps[m.peak_step].planned
    assert isinstance(m.plot(), Figure) and "planned peak" in str(m)


def test_memory_timeline_follows_the_schedule():
    """Unsplit, the big temporaries are the (400, 600, 8) differences and their squares: each
    lives from the step that makes it to the step that reads it last, and the measured
    curve's peak is at the same step as the plan's."""
    x, y = rng.random((400, 8), np.float32), rng.random((600, 8), np.float32)
    t = gx.explore(_distances, x, y)
    m = t.memory_timeline(stage=0, backend="reference")
    big = 400 * 600 * 8 * 4
    cubes = [b for b in m.buffers if b.bytes == big]
    assert len(cubes) >= 2
    assert all(b.end > b.start for b in cubes)
    assert m.steps[m.measured_peak_step].node == m.steps[m.peak_step].node
    assert abs(m.measured_peak - m.planned_peak) < 0.05 * m.planned_peak
    data = m.to_data()
    assert len(data["steps"]) == len(m.steps) and data["planned_peak"] == m.planned_peak


def test_memory_timeline_of_a_backend_without_steps():
    t = gx.explore(_mlp, *_mlp_args())
    m = t.memory_timeline(backend="jax")
    assert m.measured_peak is None and "only the plan" in m.notes[0]
    assert all(s.measured_live is None for s in m.steps)
