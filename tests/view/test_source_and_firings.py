"""The source panel (the user's lines, linked both ways with the graphs' boxes) and stepping a
rule pass firing by firing in the widget (what tinygrad's VIZ does for its rewrites)."""

from __future__ import annotations

import inspect

import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.ir.parser import parse
from explorer.view.export import export_data
from explorer.view.payload import firings, stage_summaries, stage_view
from explorer.view.render import render
from explorer.view.schema import ExportData, StageView, problems
from explorer.view.source import source_listing

R = np.random.default_rng(0)


def program(x, y):
    a = x * 1.0 - 0.0
    b = jnp.exp(a) * 1.0

    # a stretch of lines no node comes from, long enough to be folded
    #
    #
    #
    #
    #
    #
    #
    #
    return (b @ y).sum() * 1.0


ARGS = (R.standard_normal((4, 3)).astype(np.float32), R.standard_normal((3, 2)).astype(np.float32))
LINES, FIRST = inspect.getsourcelines(program)


@pytest.fixture(scope="module")
def trace() -> gx.Trace:
    return gx.explore(program, *ARGS)


def _simplify(trace: gx.Trace) -> int:
    return next(k for k, s in enumerate(trace.stages) if s.name == "simplify")


def test_the_listing_shows_the_function_from_its_def_with_long_gaps_folded(trace):
    rows = source_listing(trace.stages[0].graph)
    assert rows[0] == {"kind": "file", "loc": "", "line": 0, "text": __file__, "used": True}
    lines = {r["line"]: r for r in rows if r["kind"] == "line"}
    assert lines[FIRST]["text"] == "def program(x, y):" and not lines[FIRST]["used"]
    body = {FIRST + k: text.rstrip("\n") for k, text in enumerate(LINES)}
    used = [k for k, text in body.items() if "=" in text or "return" in text]
    for k in used:  # each line a node comes from, with its own text and "file:line"
        assert lines[k]["used"] and lines[k]["text"] == body[k]
        assert lines[k]["loc"] == f"{__file__}:{k}"
    [fold] = [r for r in rows if r["kind"] == "fold"]
    gap = (used[-1] - 2) - (used[-2] + 2) - 1  # unused lines less 2 shown on each side
    assert gap > 4 and fold["text"] == f"… {gap} lines"
    assert [r["line"] for r in rows if r["kind"] == "line"] == sorted(lines)


def test_without_the_file_only_the_used_lines_show_with_the_nodes_text():
    g = parse('graph @f {\n  %0 = f32[3] parameter() {index=0, name="x"}\n'
              '  %1 = f32[3] exp(%0) loc("nowhere.py", 7, "f")\n'
              '  %2 = f32[3] log(%1) loc("nowhere.py", 30, "f")\n  return %2\n}')
    rows = source_listing(g)
    assert [r["kind"] for r in rows] == ["file", "line", "fold", "line"]
    assert [r["line"] for r in rows if r["kind"] == "line"] == [7, 30]
    assert rows[2]["text"] == "… 22 lines"


def test_each_box_names_the_lines_of_the_nodes_it_draws(trace):
    g = trace.stages[0].graph
    r = render(g)
    for node in g.nodes:
        key = r.element_of.get(node.id)
        if key is not None and node.source is not None and node.source.line > 0:
            assert str(node.source) in r.lines[key]
    grouped = render(g, max_nodes=4)  # a group's box names the lines of all it holds
    assert any(len(locs) > 1 for locs in grouped.lines.values())
    assert set().union(*grouped.lines.values()) == set().union(*r.lines.values())


@pytest.mark.parametrize("budget", range(1, 9))
def test_any_box_budget_draws(trace, budget):
    """A budget of 1 to 3 boxes once boxed a run of nodes into itself without end."""
    g = trace.stages[0].graph
    r = render(g, max_nodes=budget)
    assert "<svg" in r.svg and set(r.visible) >= {f"n{n.id}" for n in g.nodes}


def test_a_firing_view_shows_the_graphs_around_that_one_firing(trace):
    index = _simplify(trace)
    stage = trace.stages[index]
    n = firings(trace, index)
    assert n == len(stage.report.rewrites) >= 3
    assert stage_summaries(trace)[index]["steppable"]
    whole = stage_view(trace, index)
    assert whole["shown_firing"] == -1 and len(whole["rewrites"]) == n
    for k in (1, 2, n):
        view = stage_view(trace, index, firing=k)
        assert not problems(view, StageView)
        assert view["shown_firing"] == k
        [row] = view["rewrites"]
        assert row["rule"] == stage.report.rewrites[k - 1].rule
        assert row["after_keys"], "the firing's new nodes are lit in the after pane"
        assert sum(view["diff_counts"].values()) > 0
        assert view["cost"]["nodes"] == len(trace.after_firing(index, k))
    first, last = stage_view(trace, index, firing=1), stage_view(trace, index, firing=n)
    # firing 1 starts from the stage before, firing n ends at the stage
    assert first["before_lines"] == whole["before_lines"]
    assert last["after_lines"] == whole["after_lines"]
    assert first["after_lines"] != whole["after_lines"]


def test_passes_that_are_not_rule_driven_step_as_a_whole(trace):
    summaries = stage_summaries(trace)
    assert not summaries[0]["steppable"]
    for k, s in enumerate(trace.stages):
        if s.name in ("cse", "dce", "fuse"):
            assert not summaries[k]["steppable"] and firings(trace, k) == 0


def test_the_widget_steps_firings_and_a_new_stage_opens_on_its_whole_pass(trace):
    w = trace.widget(prefetch=False)
    assert w.show_source and w.source == source_listing(trace.stages[0].graph)
    index = _simplify(trace)
    w.firing = 1
    assert w.firing == -1, "stage 0 has no firings"
    w.index = index
    w.firing = 2
    rule = trace.stages[index].report.rewrites[1].rule
    assert (w.shown_firing, w.selected_rewrite, w.rewrites[0]["rule"]) == (2, 0, rule)
    w.firing = 10**6
    assert w.firing == -1 and w.shown_firing == -1
    w.firing = 1
    w.index = index + 1
    assert w.firing == -1 and w.shown_firing == -1
    assert {loc for locs in w.after_lines.values() for loc in locs} <= \
        {r["loc"] for r in w.source if r["used"]}


def test_an_exported_page_carries_the_source_and_each_boxs_lines(trace):
    data = export_data(trace)
    assert not problems(data, ExportData)
    assert data["state"]["source"] == source_listing(trace.stages[0].graph)
    assert data["state"]["firing"] == -1
    assert all(v["shown_firing"] == -1 and v["after_lines"] for v in data["views"])


def test_a_pass_that_cannot_replay_its_firings_shows_its_whole_pass(trace):
    import dataclasses

    index = _simplify(trace)
    broken = gx.Trace(trace.traced, list(trace.stages), trace.example_args)

    class Broken:
        name = "simplify"

        def after_firings(self, graph, k):
            raise RuntimeError("replay diverged")

    broken.stages[index] = dataclasses.replace(trace.stages[index], pass_=Broken())
    w = broken.widget(prefetch=False)
    w.index = index
    with pytest.warns(UserWarning, match="replay diverged"):
        w.firing = 1
    assert w.firing == -1 and w.shown_firing == -1 and w.stage == index
