"""explorer/measure/bodies.py: the times of nodes inside regions the interpreter core runs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.backends import registry
from explorer.measure.bodies import body_of, region_of, roots, timing_bodies, top_level
from tests.measure.programs import rng


def _scan_of_while(xs):
    def step(c, x):
        c = jax.lax.while_loop(lambda v: v.sum() < 10.0, lambda v: v * 2.0 + x, c + 1.0)
        return c, c.sum()

    return jax.lax.scan(step, jnp.zeros(xs.shape[1], xs.dtype), xs)[1].sum()


def test_places_name_bodies_down_from_the_stage():
    t = gx.explore(_scan_of_while, rng.random((3, 4), np.float32))
    g = t.final.graph
    scan = next(n for n in g.nodes if n.op == "scan")
    inner = next(n for n in scan.attrs["body"].nodes if n.op == "while")
    assert body_of(g, f"scan_{scan.id}/") is scan.attrs["body"]
    assert body_of(g, f"scan_{scan.id}/while_{inner.id}/cond/") is inner.attrs["cond"]
    assert body_of(g, f"scan_{scan.id}/while_{inner.id}/") is inner.attrs["body"]
    assert body_of(g, f"while_{scan.id}/") is None  # not that op
    assert body_of(g, "loop_99999/") is None and body_of(g, "nonsense") is None
    assert top_level(f"scan_{scan.id}/") and top_level("loop_3/tail/")
    assert not top_level(f"scan_{scan.id}/while_{inner.id}/")
    assert region_of(f"scan_{scan.id}/while_{inner.id}/cond/") == scan.id


def test_nested_bodies_are_timed_and_the_hooks_come_off():
    xs = rng.random((3, 4), np.float32)
    t = gx.explore(_scan_of_while, xs)
    g = t.final.graph
    exe = registry.executable(g, "reference", t.options)
    prepared = exe.prepare(t.flat_args((xs,)))
    exe.execute(prepared)  # makes the bodies' interpreters
    assert roots(exe) == [exe]
    into: dict = {}
    with timing_bodies(exe, g, lambda: None, into):
        hooked = [c for c in exe.children.values() if "evaluate" in vars(c)]
        assert hooked
        got = exe.execute(prepared)
    places = {place for place, _ in into}
    scan = next(n for n in g.nodes if n.op == "scan")
    assert f"scan_{scan.id}/" in places
    assert any(p.startswith(f"scan_{scan.id}/while_") and p.endswith("cond/") for p in places)
    assert all(v >= 0 for v in into.values())
    assert all("evaluate" not in vars(c) for c in exe.children.values())
    np.testing.assert_allclose(got[0], exe.execute(prepared)[0])  # the values are the same
