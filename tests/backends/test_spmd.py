"""A shard_map run on one host (backends/spmd.py): each input split per its in_spec, the body
on every device, the collectives across them, the results put together per
the out_specs; checked here against NumPy written out by hand (against jax.jit on host
devices: tests/sharding)."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.backends.registry import run_graph
from explorer.backends.spmd import assemble, block
from explorer.ir.opaque import OpaqueImplError
from explorer.ir.ops.sharding import DeviceCountError, groups
from explorer.ir.parser import parse
from explorer.ir.sharding import MeshSpec, Sharding
from explorer.ir.verify import verify
from tests.ir.test_sharding import SHARD_MAP

MESH = MeshSpec((("x", 2), ("y", 4)))


def _graph(body: str, out_type: str, out_spec: str, in_type: str = "f32[8,16]",
           in_spec: str = 'P("x", "y")', block_type: str = "f32[4,4]") -> str:
    return f"""graph @f {{
  %0 = {in_type} parameter() {{index=0, name="a"}}
  %1 = {out_type} shard_map(%0) {{mesh=mesh<"x"=2, "y"=4>, in_specs=({in_spec},),
                                  out_specs=({out_spec},), body=graph @body {{
    %0 = {block_type} parameter() {{index=0, name="arg0"}}
{body}
  }}}}
  return %1
}}"""


A = np.arange(128, dtype=np.float32).reshape(8, 16)


def _blocks() -> list[np.ndarray]:
    s = Sharding(MESH, (("x",), ("y",)))
    return [block(A, s, d) for d in range(8)]


def test_blocks_and_assembly_are_inverse() -> None:
    for spec in [(("x",), ("y",)), (("y",), ("x",)), ((), ("x", "y")), (("x", "y"),)]:
        s = Sharding(MESH, spec)
        np.testing.assert_array_equal(assemble([block(A, s, d) for d in range(8)], s, A.shape), A)


def test_groups_are_the_devices_differing_on_the_axes() -> None:
    assert groups(MESH, ("y",)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert groups(MESH, ("x",)) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert groups(MESH, ("y", "x")) == [[0, 4, 1, 5, 2, 6, 3, 7]]


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_psum_then_all_gather(backend: str) -> None:
    s = A[:4] + A[4:]  # psum over x, then the y blocks gathered along columns
    out = run_graph(parse(SHARD_MAP), [A], backend).outputs[0]
    np.testing.assert_array_equal(out, np.vstack([s, s]))


def test_ppermute_psum_scatter_all_to_all_axis_index() -> None:
    blocks = _blocks()  # device d = (x, y) holds blocks[d]
    body = """    %1 = f32[4,4] ppermute(%0) {axes=("y",), perm=((0, 1), (1, 2), (2, 3))}
    %2 = i32[] axis_index() {axes=("y",)}
    %3 = f32[] convert_element_type(%2) {new_dtype="f32"}
    %4 = f32[4,4] broadcast_in_dim(%3) {shape=(4, 4), broadcast_dimensions=()}
    %5 = f32[4,4] add(%1, %4)
    %6 = f32[2,4] psum_scatter(%5) {axes=("x",), dimension=0, tiled=true, axis_size=2}
    %7 = f32[16,1] all_to_all(%0) {axes=("y",), split_axis=1, concat_axis=0, axis_size=4}
    return %6, %7"""
    g = parse(_graph(body, "(f32[4,16], f32[32,4])", 'P("x", "y"), P("x", "y")'))
    verify(g)
    got_scatter, got_a2a = run_graph(g, [A], "reference").outputs[0]
    for x in range(2):
        for y in range(4):
            # ppermute: y-1 sends to y (y=0 is no destination: zeros); plus axis_index y
            moved = [(blocks[4 * xx + y - 1] if y else np.zeros((4, 4), np.float32)) + y
                     for xx in range(2)]
            total = moved[0] + moved[1]
            np.testing.assert_array_equal(got_scatter[2 * x:2 * x + 2, 4 * y:4 * y + 4],
                                          total[2 * x:2 * x + 2])
            # all_to_all: column block y of each group member's value, stacked by member
            want = np.concatenate([blocks[4 * x + q][:, y:y + 1] for q in range(4)], axis=0)
            np.testing.assert_array_equal(got_a2a[16 * x:16 * x + 16, y:y + 1], want)


def test_too_few_devices_say_how_many_and_the_flag() -> None:
    with pytest.raises(DeviceCountError, match=r"needs 8 devices, but JAX has 1 .*"
                                               r"--xla_force_host_platform_device_count=8"):
        run_graph(parse(SHARD_MAP), [A], "jax")


def test_a_device_that_fails_stops_the_others_and_its_error_is_raised() -> None:
    """Devices y=0 fail in their branch, the others wait at the psum: they are released."""
    body = """    %1 = i32[] axis_index() {axes=("y",)}
    %2 = f32[4,4] conditional(%1, %0, %0) {branches=(graph @fails {
        %0 = f32[4,4] parameter() {index=0, name="b"}
        %1 = f32[4,4] opaque(%0) {opcode="boom", text="", type="f32[4,4]", impl=jax<"boom:unbound">}
        return %1
      }, graph @passes {
        %0 = f32[4,4] parameter() {index=0, name="b"}
        return %0
      })}
    %3 = f32[4,4] psum(%2) {axes=("y",)}
    return %3"""
    g = parse(_graph(body, "f32[8,16]", 'P("x", "y")'))
    verify(g)
    with pytest.raises(OpaqueImplError, match="boom"):
        run_graph(g, [A], "reference")
