"""Shardings the frontend reads on several devices: an argument's own layout becomes its
parameter's sharding; the jax backend puts it back on the devices that way."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import explorer as gx
from explorer.ir.sharding import MeshSpec, Sharding
from tests.corpora.sharded import mesh


def test_an_arguments_layout_is_its_parameters_sharding(devices: int) -> None:
    m = mesh((2, devices // 2), ("a", "b"))
    x = jax.device_put(np.arange(8.0 * devices, dtype=np.float32).reshape(4, 2 * devices),
                       NamedSharding(m, P(None, ("a", "b"))))
    y = np.ones((4, 2 * devices), np.float32)  # a host array: no sharding
    trace = gx.explore(lambda x, y: x * 2 + y, x, y, pipeline=[])
    px, py = trace.stages[0].graph.param_nodes
    assert px.attrs["sharding"] == Sharding(MeshSpec((("a", 2), ("b", devices // 2))),
                                            ((), ("a", "b")))
    assert "sharding" not in py.attrs
    assert "// per device: f32[4,2]" in str(trace.stages[0].graph)
    for backend in ("reference", "cpu", "jax"):
        np.testing.assert_array_equal(trace.run(x, y, backend=backend).value, np.asarray(x) * 2 + y)


def test_a_shard_map_handed_to_explore_itself_has_its_body_s_line(devices: int) -> None:
    """No user frame calls it (the frontend does): its line is its body's first, never the
    frontend's own file."""
    def body(a):  # type: ignore[no-untyped-def]
        return jax.lax.psum(a * 2.0, "x")  # the body's line

    f = jax.jit(jax.shard_map(body, mesh=mesh((devices,), ("x",)), in_specs=P("x"),
                              out_specs=P()))
    x = np.ones((2 * devices, 3), np.float32)
    trace = gx.explore(f, x, pipeline=[])
    (region,) = [n for n in trace.stages[0].graph.nodes if n.op == "shard_map"]
    assert region.source is not None and "the body's line" in region.source.line_text
    assert "explorer/frontend" not in str(region.source)
    np.testing.assert_allclose(trace.run(backend="reference").value, np.asarray(f(x)))
