"""The widget through its traits: what Python sends for each stage, and the choices it takes."""

from types import SimpleNamespace
from typing import get_args

import pytest

from explorer.measure.latest import latest
from explorer.view.schema import Choice, KernelRow, problems
from explorer.view.widget import TraceWidget
from tests.view.viewdata import PROGRAM_LINE


def test_starts_on_the_traced_program(toy_trace):
    w = toy_trace.widget()
    assert isinstance(w, TraceWidget)
    assert w.title == "prog<&>" and w.index == 0
    assert [s["name"] for s in w.stages] == ["traced", "mul-two-to-add", "nothing",
                                             "fuse-elementwise", "drop-unused"]
    assert [s["changed"] for s in w.stages] == [True, True, False, True, True]
    assert w.before_svg == "" and "<svg" in w.after_svg
    assert w.rewrites == [] and w.cost["prev"] is None
    assert w.diff_counts == {"added": 0, "removed": 0, "changed": 0}
    assert all(r[0] == "equal" for r in w.ir_diff)  # the whole IR, nothing folded


def test_stepping_updates_graphs_diff_rewrites_and_cost(toy_trace):
    w = toy_trace.widget()
    w.index = 1
    assert "<svg" in w.before_svg and "gx_changed" in w.after_svg
    assert w.diff_counts == {"added": 0, "removed": 0, "changed": 1}
    [rw] = w.rewrites
    assert rw["rule"] == "mul-by-two" and rw["before_keys"] == rw["after_keys"] == ["n3"]
    assert "a = x * 2.0" in rw["line_text"] and rw["source"].endswith(f":{PROGRAM_LINE}")
    assert any(r[0] == "replace" for r in w.ir_diff)
    assert w.cost["prev"]["flops"] == toy_trace.stages[0].cost.flops
    assert w.cost["timeline"] == list(toy_trace.stages[1].memory.steps)
    w.index = 3
    assert w.diff_counts["added"] == 1 and "cluster" in w.after_svg
    [fuse] = w.rewrites
    assert fuse["after_keys"] == [f"n{fuse['after'][0]}"]
    w.index = 4
    assert w.diff_counts["removed"] == 1 and "gx_removed" in w.before_svg
    w.index = 0
    assert w.before_svg == ""


def test_index_is_clamped(toy_trace):
    w = toy_trace.widget()
    w.index = 99
    assert w.index == 4
    w.index = -3
    assert w.index == 0


def test_step_skips_hidden_unchanged_stages(toy_trace):
    w = toy_trace.widget()
    assert [w.step(1) for _ in range(5)] == [1, 2, 3, 4, 4]
    w.hide_unchanged = True
    assert [w.step(-1) for _ in range(4)] == [3, 1, 0, 0]
    assert w.step(2) == 3


def test_views_are_cached(toy_trace):
    w = toy_trace.widget()
    w.index = 2
    first = w.view(2)
    w.index = 0
    w.index = 2
    assert w.view(2) is first


def test_selection_is_reset_on_step(toy_trace):
    w = toy_trace.widget()
    w.index = 1
    w.selected_rewrite = 0
    w.index = 2
    assert w.selected_rewrite == -1


def test_run_measures_against_the_baselines_with_progress_per_row(toy_trace):
    w = toy_trace.widget(repeats=2)
    states = []
    w.observe(lambda ch: states.append(dict(ch["new"])), names="run_state")
    counts = []
    w.observe(lambda ch: counts.append(len(ch["new"])), names="run_rows")
    w.index = 4
    rows = w.run(["reference"])
    assert [r["label"] for r in rows] == ["NumPy", "JAX eager", "jax.jit", "drop-unused on reference"]
    assert [r["kind"] for r in rows] == ["baseline"] * 3 + ["stage"]
    assert all(r["ok"] is True and r["error"] == "" and r["seconds"] > 0 for r in rows), rows
    assert all(r["min_seconds"] <= r["seconds"] and r["repeats"] == 2 for r in rows)
    assert rows[-1]["check"].startswith("matches (rel. error") and rows[-1]["stage"] == 4
    assert rows[0]["peak_bytes"] >= 0 and rows[0]["peak_how"] == "tracemalloc"
    jit = rows[2]
    assert jit["peak_how"] in ("XLA memory_analysis", "device peak")
    # progress: one state per row, each naming the rows still to come, then a final one
    assert [s["done"] for s in states] == [0, 1, 2, 3, 4] and counts == [1, 2, 3, 4]
    assert states[0]["pending"][0] == "baseline numpy" and "(1/4)" in states[0]["message"]
    assert states[3]["pending"] == ["drop-unused on reference"] and states[3]["running"]
    assert not states[-1]["running"] and states[-1]["pending"] == []
    assert w.run_rows == rows
    assert w.kernels == []  # the reference interpreter generates none


def test_baselines_are_measured_once_and_rows_replaced(toy_trace):
    w = toy_trace.widget(repeats=1)
    w.run(["reference"], stage=1)
    w.run(["reference"], stage=2)
    again = w.run(["reference"], stage=1)
    assert [r["key"] for r in again] == ["1:reference"]  # the baselines were not measured again
    assert [r["key"] for r in w.run_rows] == ["baseline:numpy", "baseline:jax-eager",
                                              "baseline:jax-jit", "1:reference", "2:reference"]
    w.run(["reference"], stage=3, baselines=False)
    assert w.run_rows[-1]["key"] == "3:reference"


def test_comparison_is_compares_table_of_the_same_runs(toy_trace):
    w = toy_trace.widget(repeats=1)
    w.run(["reference", "no-such-backend"], stage=4)
    assert "no-such-backend" in w.run_rows[-1]["error"]
    table = w.comparison()  # runs that failed have no measurement to show
    assert [r.label for r in table.rows] == ["numpy", "jax-eager", "jax-jit",
                                             "drop-unused on reference"]
    assert table.figure is not None and "<svg" in table._repr_html_()


def test_run_message_from_the_front_end(toy_trace):
    w = toy_trace.widget(repeats=1)
    w._on_message(w, {"type": "run", "backends": ["reference", "nope"], "stage": 2,
                      "baselines": False}, [])
    assert [(r["stage"], r["backend"]) for r in w.run_rows] == [(2, "reference")]
    w._on_message(w, {"type": "something else"}, [])
    assert len(w.run_rows) == 1
    w._on_message(w, {"type": "run", "backends": [], "stage": 2}, [])
    assert [r["kind"] for r in w.run_rows] == ["baseline"] * 3 + ["stage"]


def test_a_run_message_uses_the_choices_the_front_end_wrote_back(toy_trace):
    w = toy_trace.widget(repeats=1, backends=["reference", "jax"])
    assert w.run_backends == ["reference", "jax"] and w.run_baselines
    w.run_backends, w.run_baselines = ["jax"], False
    w._on_message(w, {"type": "run", "stage": 1}, [])
    assert [r["key"] for r in w.run_rows] == ["1:jax"]


def test_a_failing_backend_is_a_row_not_a_crash(toy_trace, monkeypatch):
    from explorer.backends import registry

    if registry.unavailable_reason("gpu") is None:  # a GPU here: its compile fails on purpose

        def broken(*args, **kwargs):
            raise RuntimeError("gpu compile broken by the test")

        monkeypatch.setattr(type(registry.get("gpu")), "compile", broken)
    w = toy_trace.widget()
    [row] = w.run(["gpu"], baselines=False)
    assert row["ok"] is None and "gpu" in row["error"] and row["seconds"] is None


def test_a_trace_without_a_function_says_its_jax_baselines_cannot_run(toy_trace):
    from explorer.trace import Trace

    bare = Trace(toy_trace.traced, toy_trace.stages, toy_trace.example_args)  # as xla_pipeline's
    w = bare.widget(repeats=1)
    rows = w.run(["reference"], stage=1)
    by = {r["backend"]: r for r in rows}
    assert by["numpy"]["ok"] and by["reference"]["ok"]
    for name in ("jax-eager", "jax-jit"):
        assert by[name]["seconds"] is None and "no Python function" in by[name]["error"]
    assert [r.label for r in w.comparison(plot=False).rows] == ["numpy",
                                                                "mul-two-to-add on reference"]


def test_kernels_come_from_runs(toy_trace, monkeypatch):
    from dataclasses import replace

    from explorer.backends import registry
    from explorer.backends.result import Kernel

    w = toy_trace.widget(repeats=1)
    real = registry.run_graph

    def run_with_kernels(graph, args, name="reference", options=None):
        run = real(graph, args, "reference", options)
        return replace(run, kernels=(Kernel("fused_0", "void fused_0() {}", 1e-6),))

    monkeypatch.setattr(registry, "run_graph", run_with_kernels)
    w.index = 3
    w.run(["reference"], baselines=False)
    assert w.kernels == [{"backend": "reference", "name": "fused_0",
                          "source": "void fused_0() {}", "seconds": 1e-6}]
    assert problems(w.kernels, list[KernelRow]) == []
    w.index = 2
    assert w.kernels == []
    w.index = 3
    assert len(w.kernels) == 1


def test_panes_are_synchronised_by_default(toy_trace):
    assert toy_trace.widget().sync_panes is True
    assert toy_trace.widget(sync_panes=False).sync_panes is False


def test_static_fallback_for_saved_notebooks(toy_trace):
    w = toy_trace.widget()
    data, _meta = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    page = data["text/html"]
    assert "prog&lt;&amp;&gt;" in page and "<script" not in page
    # the picture is an image: an untrusted notebook's sanitizer keeps it, not its text
    assert page.count("<tr") == 1 + len(toy_trace.stages) and "<svg" not in page
    assert 'src="data:image/svg+xml;base64,' in page


def test_a_displayed_widget_leaves_a_kernel_less_copy_beside_it(toy_trace, monkeypatch):
    import IPython.display

    from explorer.view.export import page_data

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append(obj))
    w = toy_trace.widget()
    w._ipython_display_()
    live, copy = shown
    assert "application/vnd.jupyter.widget-view+json" in live and "text/html" not in live
    page = copy.data
    assert page.startswith('<div class="gx-static">') and "gx-summary" in page
    assert "mountPacked" in page
    data = page_data(page)
    assert len(data["views"]) == len(toy_trace.stages)
    assert data["views"][1]["after_svg"].startswith("<svg")


def test_static_fallback_collapses_a_large_graph():
    import jax.numpy as jnp
    import numpy as np

    import explorer as gx
    from explorer.view.summary import SUMMARY_MAX_NODES, summary_html

    def unrolled(x, w):
        for _ in range(40):
            h = jnp.tanh(x @ w)
            g = h * 0.5 + x
            x = g / (1.0 + jnp.sum(g * g))
        return x

    a = np.ones((4, 4), np.float32)
    trace = gx.explore(unrolled, a, a, pipeline=[])
    assert len(trace.final.graph) > SUMMARY_MAX_NODES
    page = summary_html(trace)
    assert "data:image/svg+xml" in page and "grouped by scope, function and line" in page
    import base64
    import re

    svg = base64.b64decode(re.search(r"base64,([^\"]+)", page).group(1)).decode()
    boxes, edges = svg.count('class="node'), svg.count('class="edge')
    assert boxes <= 60  # a screenful: the loop's lines are groups
    assert edges <= 3 * boxes  # one edge per pair of boxes, not one per pair of nodes


def test_the_why_tab_and_the_overlays_choices(remark_trace):
    """Remarks reach the widget with the stage; the selected box picks its own; the overlay's
    choices (scale, colouring, markers) are traits the front end writes back."""
    w = remark_trace.widget(prefetch=False)
    assert w.remarks == [] and w.why() == []  # the traced stage
    assert (w.heat_scale, w.colour_by, w.show_missed, w.selected_node) == ("hottest", "time", True, "")
    assert {"heat_scale", "colour_by", "show_missed", "selected_node"} <= set(get_args(Choice))
    w.index = 1
    assert len(w.remarks) == 2 and w.why() == w.remarks  # none selected: the stage's
    top = next(r for r in w.remarks if not r["region"])
    w.selected_node = top["after_keys"][0]
    assert w.why() == [top] and w.why(top["nodes"][0]) == [top]
    w.show_missed = False  # the markers go; the remarks stay
    w.heat_scale = "log"
    w.index = 0
    w.index = 1
    assert (w.show_missed, w.heat_scale, w.selected_node) == (False, "log", top["after_keys"][0])
    assert len(w.remarks) == 2


def test_colouring_by_error_reads_the_latest_numerics(remark_trace):
    w = remark_trace.widget(prefetch=False)
    assert w.errors == []
    taken = latest(remark_trace)
    taken.numerics = SimpleNamespace(stages=[  # type: ignore[attr-defined]
        SimpleNamespace(name=s.name, nodes={n.id: SimpleNamespace(max_rel=1e-7 * (k + 1))
                                            for n in s.graph.nodes})
        for k, s in enumerate(remark_trace.stages)])
    try:
        w.colour_by = "error"  # taken after the widget opened: choosing error reads it
        assert [e["stage"] for e in w.errors] == [0, 1]
        n = remark_trace.stages[1].graph.nodes[-1].id
        assert w.errors[1]["nodes"][str(n)] == pytest.approx(2e-7)
        assert remark_trace.widget(prefetch=False).errors == w.errors  # and a new widget starts with it
    finally:
        del taken.numerics  # type: ignore[attr-defined]
