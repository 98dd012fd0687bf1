"""Sharded programs that cannot run say why: a split that does not divide its dimension (the
axis, the mesh and the user's line), a program needing more devices than JAX has (how many,
and the flag that gives host devices); and a higher-order primitive run as an opaque node
binds its sub-functions (no KeyError)."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import explorer as gx
from explorer.backends.registry import run_graph
from explorer.frontend.jaxpr import TraceError
from explorer.ir.opaque import JaxImpl, OpaqueImplError
from explorer.ir.ops.sharding import DeviceCountError
from explorer.ir.parser import parse
from tests.corpora.sharded import mesh


def test_a_constraint_that_does_not_divide_names_axis_mesh_and_line(devices: int) -> None:
    m = mesh((devices,), ("batch",))

    def f(x):
        return jax.lax.with_sharding_constraint(x * 2, NamedSharding(m, P("batch")))  # the line

    with pytest.raises(TraceError) as e:
        gx.explore(f, np.ones((devices + 2, 3), np.float32))
    text = str(e.value)
    assert f'mesh axes batch ({devices} parts) of mesh<"batch"={devices}>' in text
    assert f"does not divide {devices + 2}" in text
    assert "with_sharding_constraint(x * 2" in text and "test_bad_input.py" in text


def test_jits_in_shardings_that_do_not_divide_pass_jaxs_message_with_the_line(devices: int) -> None:
    m = mesh((devices,), ("batch",))
    f = jax.jit(lambda x: x + 1, in_shardings=NamedSharding(m, P("batch")))

    def user(x):
        return f(x)  # the user's call

    with pytest.raises(TraceError) as e:
        gx.explore(user, np.ones((devices + 1, 2), np.float32))
    text = str(e.value)
    assert "partitioned" in text and f"dimension size is {devices + 1}" in text  # JAX's words
    assert "test_bad_input.py" in text


def test_a_program_for_more_devices_says_how_many_and_the_flag(devices: int) -> None:
    more = 2 * devices
    g = parse(f"""graph @f {{
  %0 = f32[{more},2] parameter() {{index=0, name="a"}}
  %1 = f32[1,2] shard_map(%0) {{mesh=mesh<"x"={more}>, in_specs=(P("x"),), out_specs=(P(),),
      body=graph @body {{
    %0 = f32[1,2] parameter() {{index=0, name="arg0"}}
    %1 = f32[1,2] psum(%0) {{axes=("x",)}}
    return %1
  }}}}
  return %1
}}""")
    a = np.arange(2 * more, dtype=np.float32).reshape(more, 2)
    np.testing.assert_array_equal(run_graph(g, [a], "reference").outputs[0], a.sum(0, keepdims=True))
    with pytest.raises(DeviceCountError, match=rf"needs {more} devices, but JAX has {devices} .*"
                                               rf"--xla_force_host_platform_device_count={more}"):
        run_graph(g, [a], "jax")


def test_an_opaque_shard_map_binds_its_body(devices: int) -> None:
    m = mesh((devices,), ("x",))
    fn = jax.shard_map(lambda b: jax.lax.psum(b, "x"), mesh=m, in_specs=P("x"), out_specs=P())
    a = np.arange(4 * devices, dtype=np.float32).reshape(2 * devices, 2)
    eqn = jax.make_jaxpr(fn)(a).jaxpr.eqns[0]
    impl = JaxImpl(eqn.primitive, eqn.params, tuple(v.aval for v in eqn.invars),
                   tuple(v.aval for v in eqn.outvars))
    np.testing.assert_allclose(impl(a)[0], np.asarray(fn(a)))
    broken = JaxImpl(eqn.primitive, {}, impl.in_avals, impl.out_avals)
    with pytest.raises(OpaqueImplError, match="shard_map"):
        broken(a)


def test_a_shard_map_spec_that_does_not_divide_passes_jaxs_message_with_the_line(devices: int) -> None:
    m = mesh((devices,), ("x",))

    def f(a):
        return jax.shard_map(lambda b: b * 2, mesh=m, in_specs=P("x"), out_specs=P("x"))(a)  # line

    with pytest.raises(TraceError) as e:
        gx.explore(f, np.ones((devices + 2, 2), np.float32))
    text = str(e.value)
    assert f"{devices + 2}" in text and "test_bad_input.py" in text and "shard_map" in text
