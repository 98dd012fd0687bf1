"""Partitioned HLO (explorer/frontend/hlo_spmd.py): shardings and the collectives XLA inserts
import with their attributes, the user's lines and a text that reads back. The stored modules
were dumped by xla_pipeline on 4 host devices (tests/xla/spmd_programs.py)."""

from __future__ import annotations

import pytest

import explorer as gx
from explorer.frontend.hlo import ParseError, parse_hlo
from explorer.frontend.hlo_spmd import COLLECTIVES, is_collective
from tests.frontend.hlo.helpers import DATA, all_nodes, check_imported


def _load(name: str) -> gx.ir.Graph:
    g = gx.from_hlo((DATA / name).read_text())
    check_imported(g)
    return g


def _collectives(g):
    return [n for n in all_nodes(g) if n.op == "opaque" and is_collective(n.attrs["opcode"])]


def test_mesh_replica_groups_parse() -> None:
    text = """HloModule m
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0), sharding={devices=[4]<=[4]}
  ROOT %r = f32[8]{0} all-reduce(%p), channel_id=3, replica_groups=mesh['x'=4,'y'=1] {'x'},
    use_global_device_ids=true, to_apply=%add
}
"""
    ins = parse_hlo(text).entry.root
    assert ins.attr("replica_groups") == "mesh['x'=4,'y'=1] {'x'}"
    assert ins.attr("use_global_device_ids") == "true"  # the attribute after it still parses
    g = gx.from_hlo(text)
    check_imported(g)
    (p,) = g.param_nodes
    assert p.attrs["hlo_sharding"] == "{devices=[4]<=[4]}"
    (r,) = _collectives(g)
    assert (r.attrs["opcode"], r.attrs["channel_id"], r.attrs["reduction"]) == ("all-reduce", 3, "add")
    assert r.attrs["replica_groups"] == "mesh['x'=4,'y'=1] {'x'}"


def test_a_brace_after_other_attributes_is_still_an_error() -> None:
    bad = "ENTRY %m (p: f32[2]) -> f32[2] {\n  ROOT %p = f32[2] parameter(0), sharding={replicated} {1}\n}\n"
    with pytest.raises(ParseError, match="line 2"):
        parse_hlo(bad)


def test_inserted_all_reduce_keeps_attributes_and_line() -> None:
    g = _load("spmd_dp_mlp_cpu_after.hlo")
    (r,) = [n for n in _collectives(g) if n.attrs["opcode"] == "all-reduce"]
    assert str(r.type) == "(f32[64,32], f32[32,64])"  # the combiner merged the two gradients
    assert r.attrs["replica_groups"] == "mesh['axis_0'=4,'axis_1'=1] {'axis_0'}"
    assert r.attrs["channel_id"] == 1 and r.attrs["reduction"] == "add"
    assert r.source is not None and r.source.file.endswith("tests/xla/spmd_programs.py")
    assert "all-reduce(" in r.attrs["text"]
    # the partitioned parameters: per-device shapes, XLA's sharding kept
    x = [p for p in g.param_nodes if p.attrs["hlo_sharding"] == "{devices=[4,1]<=[4]}"]
    assert [str(p.type) for p in x] == ["f32[16,32]", "f32[16,32]"]
    text = str(g)
    assert 'opaque(' in text and 'opcode="all-reduce"' in text and "hlo_sharding=" in text


def test_shard_map_collectives_import() -> None:
    g = _load("spmd_shard_map_collectives_partitioned.hlo")
    by_op = {n.attrs["opcode"]: n for n in _collectives(g)}
    assert set(by_op) == {"all-gather", "collective-permute", "all-to-all"}
    assert by_op["all-gather"].attrs["dimensions"] == (0,)
    assert str(by_op["all-gather"].type) == "f32[8,16]"
    assert by_op["all-to-all"].attrs["dimensions"] == (1,)
    assert by_op["collective-permute"].attrs["source_target_pairs"] == "{{0,1},{1,2},{2,3},{3,0}}"
    lines = {op: n.source.line for op, n in by_op.items()}
    assert lines["all-gather"] < lines["collective-permute"] < lines["all-to-all"]


def test_spmd_custom_calls_name_their_target() -> None:
    text = """ENTRY %main (p: f32[8,4]) -> f32[2,4] {
  %p = f32[8,4]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}
  ROOT %s = f32[2,4]{1,0} custom-call(%p), custom_call_target="SPMDFullToShardShape", sharding={manual}
}
"""
    g = gx.from_hlo(text)
    check_imported(g)
    (c,) = [n for n in g.nodes if n.op == "opaque"]
    assert c.attrs["custom_call_target"] == "SPMDFullToShardShape"
    assert c.attrs["hlo_sharding"] == "{manual}"


def test_propagated_shardings_on_parameters() -> None:
    g = _load("spmd_tp_mlp_propagated.hlo")
    assert [p.attrs["hlo_sharding"] for p in g.param_nodes] == [
        "{replicated}", "{devices=[1,4]<=[4]}", "{devices=[4,1]<=[4]}"]
    assert [str(p.type) for p in g.param_nodes] == ["f32[64,32]", "f32[32,64]", "f32[64,32]"]


def test_async_halves_are_collectives() -> None:
    assert {"all-reduce-start", "all-reduce-done", "all-gather-start",
            "collective-permute-done", "reduce-scatter"} <= COLLECTIVES
    assert not is_collective("add")


def test_async_collective_halves_import() -> None:
    """GPU pipelines split collectives into -start/-done pairs; both halves are named nodes."""
    text = """HloModule m
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (p: f32[8]) -> f32[32] {
  %p = f32[8]{0} parameter(0)
  %ars = f32[8]{0} all-reduce-start(%p), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=%add
  %ard = f32[8]{0} all-reduce-done(%ars)
  %ags = (f32[8]{0}, f32[32]{0}) all-gather-start(%ard), channel_id=2,
    replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT %agd = f32[32]{0} all-gather-done(%ags)
}
"""
    g = gx.from_hlo(text)
    check_imported(g)
    by_op = {n.attrs["opcode"]: n for n in _collectives(g)}
    assert list(by_op) == ["all-reduce-start", "all-reduce-done", "all-gather-start",
                           "all-gather-done"]
    assert by_op["all-reduce-start"].attrs["reduction"] == "add"
    assert by_op["all-gather-start"].attrs["dimensions"] == (0,)
    assert str(by_op["all-gather-start"].type) == "(f32[8], f32[32])"
    assert str(by_op["all-gather-done"].type) == "f32[32]"


def test_tuple_parameter_shardings_go_to_its_leaves() -> None:
    text = """ENTRY %main (p: (f32[8], f32[4,2])) -> f32[8] {
  %p = (f32[8]{0}, f32[4,2]{1,0}) parameter(0), sharding={{replicated}, {devices=[4,1]<=[4]}}
  ROOT %g = f32[8]{0} get-tuple-element(%p), index=0
}
"""
    g = gx.from_hlo(text)
    check_imported(g)
    assert [p.attrs.get("hlo_sharding") for p in g.param_nodes] == [
        "{replicated}", "{devices=[4,1]<=[4]}"]
