"""Shardings as IR values (ir/sharding.py): their text, what they say per device, and the
sharded rows' text round trip; no devices needed."""

from __future__ import annotations

import pytest

from explorer.ir.graph import TensorType, device_shapes
from explorer.ir.parser import ParseError, parse
from explorer.ir.sharding import MeshSpec, Sharding, ShardingError, Spec
from explorer.ir.verify import verify

MESH = MeshSpec((("x", 2), ("y", 4)))

SHARD_MAP = """graph @f {
  %0 = f32[8,16] parameter() {index=0, name="a", sharding=sharding<mesh<"x"=2, "y"=4>, P("x", "y")>}
  %1 = f32[8,16] shard_map(%0) {mesh=mesh<"x"=2, "y"=4>, in_specs=(P("x", "y"),),
                                out_specs=(P("x"),), body=graph @body {
    %0 = f32[4,4] parameter() {index=0, name="arg0"}
    %1 = f32[4,4] psum(%0) {axes=("x",)}
    %2 = f32[4,16] all_gather(%1) {axes=("y",), dimension=1, tiled=true, axis_size=4}
    return %2
  }}
  %2 = f32[8,16] sharding_constraint(%1) {sharding=sharding<mesh<"x"=2, "y"=4>, P(none, ("x", "y"))>,
                                          origin="out_shardings"}
  return %2
}"""


@pytest.mark.parametrize("value", [
    MESH, Sharding(MESH, (("x",), (), ("x", "y"))), Sharding(MESH, ()), Spec(()), Spec((("y",),)),
    Spec(((), ("x", "y"))),
])
def test_values_print_and_parse_back(value: object) -> None:
    g = parse(f'graph @g {{\n  %0 = f32[8,8,8] parameter() {{index=0, v={value}}}\n  return %0\n}}')
    assert g[0].attrs["v"] == value
    assert str(value) in str(g)


def test_blocks_per_device() -> None:
    s = Sharding(MESH, (("y",), ("x",)))
    assert s.block_shape((8, 6)) == (2, 3)
    # devices row-major over (x, y): device 5 is x=1, y=1
    assert MESH.coords(5) == {"x": 1, "y": 1}
    assert s.block_index(5, 2) == (1, 1)
    assert Sharding(MESH, ((("x", "y")),)).block_index(5, 1) == (5,)


def test_a_split_that_does_not_divide_names_the_dimension_axes_and_mesh() -> None:
    with pytest.raises(ShardingError, match=r"dimension 0 of size 6 .* mesh axes y .* "
                                            r'mesh<"x"=2, "y"=4>.* 4 does not divide 6'):
        Sharding(MESH, (("y",),)).check((6, 4))
    with pytest.raises(ShardingError, match="no axis 'z'"):
        Sharding(MESH, (("z",),)).check((8,))
    with pytest.raises(ShardingError, match="twice"):
        Sharding(MESH, (("x",), ("x",))).check((8, 8))


def test_the_shard_map_text_round_trips_and_shows_per_device_shapes() -> None:
    g = parse(SHARD_MAP)
    verify(g)
    assert parse(str(g)) == g
    assert g[1].type == TensorType((8, 16), "f32")
    assert device_shapes(g[0]) == "f32[4,4]"
    assert device_shapes(g[1]) == "f32[4,16]"
    assert device_shapes(g[2]) == "f32[8,2]"
    assert "// per device: f32[4,16]" in str(g)


def test_a_shard_map_whose_body_does_not_fit_its_specs_is_refused() -> None:
    bad = SHARD_MAP.replace('in_specs=(P("x", "y"),)', 'in_specs=(P("x"),)')
    with pytest.raises(Exception, match=r"f32\[4,16\] per device, but the body's parameter is f32\[4,4\]"):
        verify(parse(bad))


def test_bad_sharding_text_says_where() -> None:
    with pytest.raises(ParseError, match="mesh axis size"):
        parse('graph @g {\n  %0 = f32[8] parameter() {index=0, m=mesh<"x"=-2>}\n  return %0\n}')
    with pytest.raises(ParseError, match="partition entry"):
        parse('graph @g {\n  %0 = f32[8] parameter() {index=0, m=P(3)}\n  return %0\n}')


def test_a_collective_over_an_axis_the_mesh_lacks_is_refused() -> None:
    bad = SHARD_MAP.replace('psum(%0) {axes=("x",)}', 'psum(%0) {axes=("z",)}')
    with pytest.raises(Exception, match=r'combines over axis z, which mesh<"x"=2, "y"=4> lacks'):
        verify(parse(bad))
