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
