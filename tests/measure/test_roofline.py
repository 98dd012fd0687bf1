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
