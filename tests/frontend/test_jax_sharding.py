"""Sharded JAX programs in the IR (frontend/jax_sharding.py), on the suite's one device: a
jit's in/out shardings and with_sharding_constraint on a one-device mesh; and a handler that
misses a parameter names the primitive (tests/sharding has the many-device programs)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import explorer as gx
from explorer.frontend.converter import HANDLERS
from explorer.frontend.jaxpr import TraceError
from explorer.ir.parser import parse
from explorer.ir.sharding import MeshSpec, Sharding

MESH = Mesh(np.array(jax.devices()[:1]), ("d",))


def test_jit_shardings_become_attributes_and_constraints() -> None:
    rows, cols = NamedSharding(MESH, P("d")), NamedSharding(MESH, P(None, "d"))

    def f(x, y):
        return jax.lax.with_sharding_constraint(x * 2, cols) + y

    fn = jax.jit(f, in_shardings=(rows, None), out_shardings=cols)
    x = np.ones((4, 3), np.float32)
    g = gx.explore(fn, x, x, pipeline=[]).stages[0].graph
    one = MeshSpec((("d", 1),))
    x_param, y_param = g.param_nodes
    assert x_param.attrs["sharding"] == Sharding(one, (("d",),))
    assert "sharding" not in y_param.attrs
    constraints = [n for n in g.nodes if n.op == "sharding_constraint"]
    assert [(n.attrs["sharding"], n.attrs.get("origin")) for n in constraints] == [
        (Sharding(one, ((), ("d",))), None), (Sharding(one, ((), ("d",))), "out_shardings")]
    assert constraints[0].source is not None and constraints[0].source.line > 0
    assert parse(str(g)) == g
    for backend in ("reference", "jax"):
        trace = gx.explore(fn, x, x, pipeline=[])
        np.testing.assert_array_equal(trace.run(x, x, backend=backend).value, np.asarray(fn(x, x)))


def test_a_handler_missing_a_parameter_names_the_primitive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(HANDLERS, "sin", lambda cv, eqn, ins, source: [eqn.params["subfuns"]])
    with pytest.raises(TraceError, match=r"sin at .*lack 'subfuns'.*gambit-explorer does not know"):
        gx.explore(jnp.sin, np.ones(3, np.float32))


def test_a_nested_jits_in_shardings_on_an_intermediate_become_a_constraint() -> None:
    inner = jax.jit(lambda h: h + 1, in_shardings=NamedSharding(MESH, P("d")))

    def f(x):
        return inner(x * 2)

    x = np.ones((4, 3), np.float32)
    g = gx.explore(f, x, pipeline=[]).stages[0].graph
    (c,) = [n for n in g.nodes if n.op == "sharding_constraint"]
    assert c.attrs["origin"] == "in_shardings" and g[c.inputs[0]].op == "mul"
    assert "sharding" not in g.param_nodes[0].attrs
    np.testing.assert_array_equal(gx.explore(f, x, pipeline=[]).run(x).value, x * 2 + 1)
