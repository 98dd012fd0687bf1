"""trace.memory_timeline (explorer/measure/timeline.py): planned and measured live bytes
along a stage's schedule."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from matplotlib.figure import Figure

import explorer as gx
from explorer.measure.latest import latest
from tests.measure.programs import mlp, mlp_args, rng


def _distances(x, y):
    d = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    return jnp.exp(-d).sum(1)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_memory_timeline_under_a_limit(backend):
    x, y = rng.random((400, 8), np.float32), rng.random((600, 8), np.float32)
    limit = 256 * 1024
    t = gx.explore(_distances, x, y, memory_limit=limit)
    m = t.memory_timeline(backend=backend)
    assert latest(t).timeline is m
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
    # the chart's axes: bytes in the project's units, and whole steps
    live = m.plot().axes[0]
    labels = [live.yaxis.get_major_formatter()(v, k) for k, v in enumerate(live.get_yticks())]
    assert labels[0] == "0 B" and all(x.endswith(("B", "KiB", "MiB", "GiB")) for x in labels)
    assert any(x.endswith("KiB") for x in labels) and len(labels) >= 3
    assert all(float(v).is_integer() for v in m.plot().axes[1].get_xticks())


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
    t = gx.explore(mlp, *mlp_args())
    m = t.memory_timeline(backend="jax")
    assert m.measured_peak is None and "only the plan" in m.notes[0]
    assert all(s.measured_live is None for s in m.steps)
