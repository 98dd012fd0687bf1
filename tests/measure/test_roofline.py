"""trace.roofline (explorer/measure/roofline.py): kernels, dots and loops under the machine's
peaks, with jax.jit's point."""

from __future__ import annotations

from matplotlib.figure import Figure

import explorer as gx
from explorer.measure.latest import latest
from tests.measure.programs import mlp, mlp_args


def test_roofline(small_peaks):
    t = gx.explore(mlp, *mlp_args())
    r = t.roofline(backend="cpu", repeats=2)
    assert latest(t).roofline is r
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
    t = gx.explore(mlp, *mlp_args())
    del t.fn
    r = t.roofline(backend="reference", repeats=1)
    assert r.xla is None and any("no XLA point" in n for n in r.notes)


def _low_peaks(monkeypatch, after_remeasure):
    """Peaks far below any real run (as if measured on a loaded machine); measured again,
    `after_remeasure` (flops, bandwidth)."""
    from dataclasses import replace

    from explorer.measure import roofline as roofline_module
    from explorer.measure.peaks import Peaks

    low = Peaks("loaded box", "cpu", 1e3, 1e3, "fake", "2026-01-01 00:00")
    calls = []

    def fake(backend="cpu", remeasure=False, path=None, at_least=None):
        calls.append(remeasure)
        if not remeasure:
            return low
        flops, bandwidth = after_remeasure
        return replace(low, flops=flops, bandwidth=bandwidth, measured_at="2026-01-02 00:00")

    monkeypatch.setattr(roofline_module, "peaks", fake)
    return calls


def test_a_point_above_the_roof_remeasures_the_peaks_and_is_flagged(monkeypatch):
    calls = _low_peaks(monkeypatch, after_remeasure=(2e3, 2e3))  # still far too low
    t = gx.explore(mlp, *mlp_args())
    r = t.roofline(backend="cpu", repeats=1)
    assert calls == [False, True]  # measured again, once
    assert r.remeasured and r.peaks.measured_at == "2026-01-02 00:00"
    assert r.above and all(p.above(r.peaks) for p in r.above)
    assert "ABOVE THE ROOF" in str(r) and "even after measuring them again" in str(r)
    assert "ABOVE" in r._repr_html_() and "ABOVE THE ROOF" in r.plot().axes[0].get_title()
    assert any(row[-1].endswith("ABOVE") for row in r._cells())
    data = r.to_data()
    assert data["above_roof"] is True and data["remeasured"] is True
    assert any(p["above"] for p in data["points"])


def test_peaks_measured_again_that_hold_every_point_are_not_flagged(monkeypatch):
    calls = _low_peaks(monkeypatch, after_remeasure=(1e18, 1e18))
    t = gx.explore(mlp, *mlp_args())
    r = t.roofline(backend="cpu", repeats=1)
    assert calls == [False, True]
    assert r.remeasured and r.above == [] and "ABOVE" not in str(r)
    assert any("measured again" in n for n in r.notes)
    assert r.to_data()["above_roof"] is False


def test_peaks_that_hold_every_point_are_measured_once(monkeypatch):
    calls = _low_peaks(monkeypatch, after_remeasure=(0, 0))
    from explorer.measure import roofline as roofline_module
    from explorer.measure.peaks import Peaks

    high = Peaks("quiet box", "cpu", 1e18, 1e18, "fake", "2026-01-01 00:00")
    monkeypatch.setattr(roofline_module, "peaks",
                        lambda backend="cpu", remeasure=False, path=None, at_least=None:
                        calls.append(remeasure) or high)
    r = gx.explore(mlp, *mlp_args()).roofline(backend="cpu", repeats=1)
    assert calls == [False] and not r.remeasured and r.above == []
