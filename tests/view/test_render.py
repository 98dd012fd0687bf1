import xml.etree.ElementTree as ET

import numpy as np

from explorer.ir.builder import GraphBuilder
from explorer.ir.graph import Source, TensorType
from explorer.view.collapse import count_nodes, hierarchy, plan_layout
from explorer.view.render import node_label, render, render_diff
from explorer.view.search import match_nodes, matches, node_words
from tests.view.viewdata import HOSTILE

SVG = "{http://www.w3.org/2000/svg}"


def classes(svg: str) -> list[set[str]]:
    root = ET.fromstring(svg)
    return [set(g.get("class", "").split()) for g in root.iter(f"{SVG}g")]


def with_class(svg: str, cls: str) -> list[set[str]]:
    return [c for c in classes(svg) if cls in c]


def test_nodes_show_op_shape_dtype_and_size(toy_trace):
    g = toy_trace.stages[0].graph
    mul = next(n for n in g.nodes if n.op == "mul")
    assert node_label(mul) == "mul\nf32[3,4]\n48 B"
    svg = render(g).svg
    assert ">mul<" in svg and ">f32[3,4]<" in svg and ">48 B<" in svg
    assert ">dot_general<" in svg and ">f32[3,5]<" in svg
    x = g.param_nodes[0]
    assert node_label(x).startswith("x\nf32[3,4]")


def test_every_node_has_an_element_key(toy_trace):
    g = toy_trace.stages[0].graph
    r = render(g)
    assert set(r.element_of) == {n.id for n in g.nodes}
    for n in g.nodes:
        assert with_class(r.svg, f"gx_n{n.id}"), n


def test_tooltips_carry_the_source_line(toy_trace):
    g = toy_trace.stages[0].graph
    mul = next(n for n in g.nodes if n.op == "mul")
    svg = render(g).svg
    root = ET.fromstring(svg)
    titles = [a.get("{http://www.w3.org/1999/xlink}title") for a in root.iter(f"{SVG}a")]
    tip = next(t for t in titles if t and t.startswith(f"%{mul.id} = mul"))
    assert f"{mul.source.file}:{mul.source.line} in program" in tip
    # the hostile comment is in the line text, and arrives as text, escaped
    assert "a = x * 2.0" in tip and HOSTILE in tip
    assert "<script>" not in svg and "&lt;script&gt;" in svg


def test_regions_render_as_clusters(toy_trace):
    fused = toy_trace.stage("fuse-elementwise").graph
    kernel = next(n for n in fused.nodes if n.op == "kernel")
    svg = render(fused).svg
    cluster = [c for c in classes(svg) if "cluster" in c]
    assert cluster and f"gx_n{kernel.id}" in cluster[0]
    body = kernel.attrs["body"]
    for m in body.nodes:  # body nodes are drawn inside, keyed under the kernel
        assert with_class(svg, f"gx_n{kernel.id}_n{m.id}")
    assert f"%{kernel.id} kernel (loop)<" in svg
    assert "#e0f2f1" in svg and "#ffe0b2" not in svg  # kernels have their own colour


def test_diff_colours_added_removed_changed(toy_trace):
    before, after = toy_trace.stages[0].graph, toy_trace.stages[1].graph
    changed = next(n.id for n in after.nodes if n.op == "add" and n.inputs[0] == n.inputs[1])
    ra = render(after, other=before, side="after")
    rb = render(before, other=after, side="before")
    assert with_class(ra.svg, "gx_changed") == [c for c in classes(ra.svg) if f"gx_n{changed}" in c]
    assert with_class(rb.svg, "gx_changed")
    dv = render_diff(toy_trace.stages[3].graph, toy_trace.stages[4].graph)
    assert dv.diff.removed and with_class(dv.before.svg, "gx_removed")
    assert not with_class(dv.after.svg, "gx_removed")
    fuse = render_diff(toy_trace.stages[2].graph, toy_trace.stages[3].graph)
    assert with_class(fuse.after.svg, "gx_added")  # the new kernel and its body
    html = fuse._repr_html_()
    for word in ("added", "removed", "changed"):
        assert word in html  # the legend


def test_highlight_by_op_name_or_ids(toy_trace):
    g = toy_trace.stages[0].graph
    r = render(g, highlight="mul")
    hits = with_class(r.svg, "gx_hit")
    assert len(hits) == sum(n.op == "mul" for n in g.nodes) == 2
    r = render(g, highlight="x")  # parameter name
    assert len(with_class(r.svg, "gx_hit")) >= 1
    r = render(g, highlight=[g.outputs[0]])
    assert with_class(r.svg, "gx_hit") == with_class(r.svg, f"gx_n{g.outputs[0]}")
    fused = toy_trace.stage("fuse-elementwise").graph
    inside = render(fused, highlight="mul")  # search reaches into region bodies
    assert any(any("_n" in c for c in cl) for cl in with_class(inside.svg, "gx_hit"))


def test_search_rule():
    assert matches("%5 mul x in[3]:4 f", "mul")
    assert matches("%5 mul x in[3]:4 f", "MUL %5")
    assert not matches("%50 mul", "%5")
    assert matches("%50 mul", "%50")
    assert not matches("%5 mul", "add")
    assert not matches("%5 mul", "   ")
    assert matches("%5 reduce_sum", "sum")


def test_search_words_and_match_nodes(toy_trace):
    g = toy_trace.stages[0].graph
    x = g.param_nodes[0]
    assert node_words(x).split()[:3] == [f"%{x.id}", "parameter", "x"]
    assert match_nodes(g, "dot") == {n.id for n in g.nodes if n.op == "dot_general"}
    assert match_nodes(g, None) == set()
    assert match_nodes(g, [1, 2]) == {1, 2}


def chain_graph(n: int, lines: int | None = None):
    """A DAG of n elementwise ops; with `lines`, traced from that many source lines."""
    b = GraphBuilder("big")
    t = TensorType((8,), "f32")
    vals = [b.param(t, "x"), b.param(t, "y")]
    rng = np.random.default_rng(1)
    for k in range(n):
        i, j = rng.integers(max(0, len(vals) - 6), len(vals), size=2)
        src = Source("In[7]", 10 + k % lines, "loop", "acc = acc * w + b") if lines else None
        vals.append(b.add("add" if k % 2 else "mul", [vals[i], vals[j]], source=src))
    return b.build([vals[-1]])


def test_a_thousand_ungrouped_nodes_draw_every_box_when_asked():
    g = chain_graph(1000)
    r = render(g, max_nodes=2000)  # bench/widget_scale.py times this
    assert r.note == "" and len(r.element_of) == 1002
    assert len(with_class(r.svg, "node")) == 1002


def test_big_graphs_group_by_source_line_within_a_screenful():
    g = chain_graph(3000, lines=5)
    layout = plan_layout(g, 60)
    assert layout.grouped and layout.boxes <= 60
    r = render(g)
    assert "3002 ops in" in r.note
    assert len(with_class(r.svg, "node")) <= 60
    assert "▸ In[7]:14 · 600 ops" in r.svg and "gx_toggle" in r.svg  # a closed group: line 14
    # every node is drawn by some box, and the boxes' search words cover all nodes
    assert set(r.element_of) == {n.id for n in g.nodes}


def test_big_graphs_without_sources_are_split_into_runs():
    g = chain_graph(3000)
    layout = plan_layout(g, 60)
    assert layout.boxes <= 60
    root = hierarchy(g, 60)
    assert len(root.children) <= 60 and len(root.nodes()) == len(g)


def test_small_graphs_draw_every_node_and_open_small_regions(toy_trace):
    fused = toy_trace.stage("fuse-elementwise").graph
    layout = plan_layout(fused, 60)
    assert not layout.grouped and layout.boxes == count_nodes(fused) and layout.note == ""


def test_regions_stay_closed_when_their_bodies_do_not_fit(toy_trace):
    fused = toy_trace.stage("fuse-elementwise").graph
    assert count_nodes(fused) > len(fused)
    layout = plan_layout(fused, len(fused))
    assert "click a region" in layout.note
    svg = render(fused, max_nodes=len(fused)).svg
    assert "cluster" not in svg and " ops inside<" in svg
    kernel = next(n for n in fused.nodes if n.op == "kernel")
    opened = render(fused, max_nodes=len(fused), opened={f"n{kernel.id}": True}).svg
    assert with_class(opened, f"gx_n{kernel.id}_n{kernel.attrs['body'].nodes[-1].id}")


def test_an_opaque_node_s_tooltip_says_whether_it_runs_through_jax_or_is_hlo_shown_only():
    from explorer.ir.graph import Attrs, Node, TensorType
    from explorer.view.render import node_tooltip

    t = TensorType((4,), "f32")
    hlo = Node(3, "opaque", (), Attrs({"opcode": "all-reduce", "text": "all-reduce(p0)"}), t)
    jaxp = Node(4, "opaque", (), Attrs({"opcode": "pure_callback", "text": "", "impl": object()}), t)
    assert "HLO all-reduce without a row in the op table: shown, not run" in node_tooltip(hlo)
    assert "runs through JAX" in node_tooltip(jaxp) and "HLO" not in node_tooltip(jaxp)


SHARDED = """graph @mlp {
  %0 = f32[1024,512] parameter() {index=0, name="x", sharding=sharding<mesh<"data"=4>, P("data")>}
  %1 = f32[512,256] parameter() {index=1, name="w1", sharding=sharding<mesh<"data"=4>, P()>}
  %2 = f32[1024,256] dot_general(%0, %1) {dimension_numbers=(((1,), (0,)), ((), ()))}
  %3 = f32[1024,256] sharding_constraint(%2) {sharding=sharding<mesh<"data"=4>, P(none, "data")>,
                                              origin="out_shardings"}
  return %3
}"""


def test_a_sharded_node_shows_its_per_device_shape_beside_the_global_one_and_its_spec():
    from explorer.ir.parser import parse
    from explorer.view.render import node_tooltip

    g = parse(SHARDED)
    assert node_label(g[0]) == ('x\nf32[1024,512] · per device f32[256,512]\nP("data", None)\n'
                                "2.0 MiB · 512.0 KiB per device")
    # replicated: every device holds the whole value, so no second shape
    assert node_label(g[1]) == "w1\nf32[512,256]\nP() replicated\n512.0 KiB"
    assert node_label(g[2]) == "dot_general\nf32[1024,256]\n1.0 MiB"  # unsharded: as before
    assert node_label(g[3]).splitlines()[1:3] == ["f32[1024,256] · per device f32[1024,64]",
                                                   'P(None, "data")']
    tip = node_tooltip(g[3])
    assert "per device: f32[1024,64]" in tip
    assert 'sharding P(None, "data") over mesh data=4 (from out_shardings)' in tip
    svg = render(g).svg
    assert "f32[1024,512] · per device f32[256,512]<" in svg and "P(&quot;data&quot;, None)<" in svg


def test_a_shard_map_region_names_its_mesh_closed_and_open():
    from explorer.ir.parser import parse
    from explorer.view.render import node_tooltip
    from tests.ir.test_sharding import SHARD_MAP

    g = parse(SHARD_MAP)
    smap = g[1]
    assert node_label(smap).splitlines()[1:3] == ["f32[8,16] · per device f32[4,16]",
                                                 "mesh x=2 × y=4"]
    assert 'in_specs P("x", "y")' in node_tooltip(smap)
    assert node_label(g[2]).splitlines()[2] == 'P(None, ("x", "y"))'
    closed = render(g, opened={"n1": False}).svg
    assert "mesh x=2 × y=4<" in closed and " ops inside<" in closed
    opened = render(g, opened={"n1": True}).svg
    assert "▾ %1 shard_map (region) · mesh x=2 × y=4 · shapes inside per device<" in opened
    # the body's values are one device's: drawn with their own (per-device) types only
    assert with_class(opened, "gx_n1_n1") and ">f32[4,4]<" in opened
