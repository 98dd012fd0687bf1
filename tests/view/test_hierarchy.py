"""The view at model scale: groups from the user's own structure (scopes, functions, lines),
regions whose bodies open, opaque nodes marked, rewrites in bodies located (issues 13, 14)."""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.analysis.cost import node_bytes, node_flops
from explorer.view.collapse import BUDGET, Group, hierarchy, plan_layout, region_prefix
from explorer.view.payload import reveal_for, stage_view
from explorer.view.render import render
from explorer.view.widget import TraceWidget
from tests.corpora.zoo import zoo
from tests.view.test_render import classes, with_class


@pytest.fixture(scope="module")
def programs() -> dict:
    return zoo()


@pytest.fixture(scope="module")
def gpt(programs) -> gx.Trace:
    fn, args = programs["gpt_grad"]
    return gx.explore(fn, *args)


def boxes(svg: str) -> int:
    return len(re.findall(r'<g class="node ', svg))


def group(root: Group, last: str) -> Group:
    """The first group (depth first) whose path ends with `last`."""
    for c in root.children:
        if isinstance(c, Group):
            if c.path[-1] == last:
                return c
            try:
                return group(c, last)
            except LookupError:
                pass
    raise LookupError(last)


def test_opaque_nodes_are_marked_with_their_primitive():
    trace = gx.explore(lambda x: jax.lax.bessel_i1e(x) * 2.0, np.ones(4, np.float32), pipeline=[])
    g = trace.final.graph
    node = next(n for n in g.nodes if n.op == "opaque")
    svg = render(g).svg
    [cls] = [c for c in classes(svg) if f"gx_n{node.id}" in c]
    assert "gx_opaque" in cls
    assert "bessel_i1e (opaque)<" in svg and 'stroke-dasharray' in svg
    assert "JAX primitive bessel_i1e without a row" in svg  # the tooltip


def test_the_first_view_of_a_model_is_its_top_level_groups(gpt):
    g = gpt.stages[0].graph
    layout = plan_layout(g, BUDGET)
    assert layout.grouped and layout.boxes <= BUDGET
    svg = render(g).svg
    assert boxes(svg) == layout.boxes
    for scope in ("attention", "mlp", "attention (transpose)", "p"):
        assert f"▸ {scope} · " in svg, scope  # named scopes and the params dict are groups
    assert "▾ inputs" in svg and "▾ gpt_block" in svg  # calls are groups, opened first
    # a group's label sums its nodes' costs
    root = hierarchy(g)
    attention = group(root, "attention")
    nodes = attention.nodes()
    flops = sum(node_flops(g, n) for n in nodes)
    moved = sum(node_bytes(g, n) for n in nodes)
    assert flops > 0 and moved > 0
    assert f"▸ attention · {len(nodes)} ops" in svg


def test_a_group_opens_and_closes_by_key_and_keeps_its_key_across_stages(gpt):
    g = gpt.stages[0].graph
    first = render(g)
    key = group(hierarchy(g), "attention").key
    assert key in first.words
    opened = render(g, opened={key: True})
    assert [c for c in classes(opened.svg) if f"gx_{key}" in c and "cluster" in c]
    assert boxes(opened.svg) > boxes(first.svg)
    later = render(gpt.stages[1].graph)
    assert key in later.words  # the same scope, the same key, in the next stage


def test_a_change_inside_a_closed_group_flags_the_group(gpt):
    view = stage_view(gpt, len(gpt.stages) - 1)
    assert "changed inside" in view["after_svg"]
    assert [c for c in classes(view["after_svg"]) if "gx_group" in c and "gx_changed" in c]


def test_search_opens_the_groups_holding_its_hits(gpt):
    g = gpt.stages[0].graph
    gather = next(n for n in g.nodes if n.op == "gather")
    assert render(g).element_of[gather.id] != f"n{gather.id}"  # inside a closed group at first
    reveal = reveal_for(gpt, 0, "gather")
    assert gather.id in reveal[1]
    view = stage_view(gpt, 0, reveal=reveal)
    assert with_class(view["after_svg"], f"gx_n{gather.id}")


def test_every_body_of_a_control_flow_region_opens(programs):
    fn, args = programs["while_halving"]
    g = gx.explore(fn, *args, pipeline=[]).final.graph
    w = next(n for n in g.nodes if n.op == "while")
    svg = render(g, opened={f"n{w.id}": True}).svg
    cond, body = w.attrs["cond"], w.attrs["body"]
    assert with_class(svg, f"gx_n{w.id}_cond_n{cond.nodes[-1].id}")
    assert with_class(svg, f"gx_n{w.id}_n{body.nodes[-1].id}")
    closed = render(g, opened={f"n{w.id}": False}).svg
    assert not with_class(closed, f"gx_n{w.id}_n{body.nodes[-1].id}") and " ops inside<" in closed

    fn, args = programs["cond_switch"]
    g = gx.explore(fn, *args, pipeline=[]).final.graph
    c = next(n for n in g.nodes if n.op == "conditional" and len(n.attrs["branches"]) == 3)
    svg = render(g, opened={f"n{c.id}": True}).svg
    for k, branch in enumerate(c.attrs["branches"]):
        assert with_class(svg, f"gx_n{c.id}_branches{k}_n{branch.nodes[-1].id}")
        assert f">branches[{k}]<" in svg


def test_rewrites_inside_a_body_name_their_region_and_light_its_nodes(programs):
    fn, args = programs["newton_fori"]  # the fused update inside the loop body
    trace = gx.explore(fn, *args)
    k, rw = next((k, rw) for k, s in enumerate(trace.stages) for rw in s.report.rewrites
                 if rw.region)
    assert region_prefix(rw.region).startswith(f"n{rw.region[1:].split('.')[0]}_")
    row = next(r for r in stage_view(trace, k)["rewrites"] if r["region"] == rw.region)
    assert row["after_keys"], row  # the body's nodes, or the closed region that holds them
    opened = {f"n{rw.region[1:].split('.')[0]}": True}
    view = stage_view(trace, k, opened=opened)
    row = next(r for r in view["rewrites"] if r["region"] == rw.region)
    assert all(key.startswith(region_prefix(rw.region)) for key in row["after_keys"]), row


def test_region_prefixes():
    assert region_prefix("%7.body") == "n7_"
    assert region_prefix("%7.branches[1]") == "n7_branches1_"
    assert region_prefix("%7.body/%3.cond") == "n7_n3_cond_"


def test_the_widget_reopens_what_the_user_clicked_and_what_search_finds(gpt):
    w = TraceWidget(gpt)
    first = w.after_svg
    key = group(hierarchy(gpt.stages[0].graph), "mlp").key
    assert key in w.after_words
    w.opened = {key: True}
    assert w.after_svg != first and f"gx_{key}" in w.after_svg
    w.opened = {}
    assert w.after_svg == first  # cached
    w.search = "gather"
    assert w.after_svg != first
    w.index = 1
    assert w.stage == 1


def test_the_widget_builds_the_next_stages_view_off_the_main_path(gpt):
    from explorer.view import widget as widget_module

    w = TraceWidget(gpt)
    widget_module._PREFETCH.submit(lambda: None).result()  # the queue has drained
    assert (1, -1, frozenset(), reveal_for(gpt, 1, "")) in w._views
    before = len(w._views)
    w.index = 1  # found ready
    assert len(w._views) >= before and w.stage == 1
    assert not TraceWidget(gpt, prefetch=False)._prefetch(0)


def test_opening_a_group_shows_its_children_closed_and_moves_nothing_else(gpt):
    g = gpt.stages[0].graph
    first = render(g)
    mlp = group(hierarchy(g), "mlp")
    key = mlp.key
    opened = render(g, opened={key: True})
    # the other boxes are as they were; mlp's children are each one box
    assert boxes(opened.svg) == boxes(first.svg) - 1 + len(mlp.children)

    def clusters(svg: str) -> set[frozenset[str]]:
        return {frozenset(c) for c in classes(svg) if "cluster" in c}

    assert clusters(opened.svg) - clusters(first.svg) == {
        c for c in clusters(opened.svg) if f"gx_{key}" in c}
