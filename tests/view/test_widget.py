"""The widget through its traits: what Python sends for each stage, and the choices it takes."""

from viewdata import PROGRAM_LINE

from explorer.view.widget import TraceWidget


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
    assert w.cost["timeline"] == list(toy_trace.stages[1].memory.timeline)
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


def test_run_reports_progress_rows_and_check(toy_trace):
    w = toy_trace.widget()
    states = []
    w.observe(lambda ch: states.append(dict(ch["new"])), names="run_state")
    w.index = 4
    [row] = w.run(["reference"])
    assert row["ok"] is True and row["error"] == "" and row["seconds"] > 0
    assert row["peak_bytes"] >= 0 and row["label"] == "drop-unused · reference"
    assert states[0]["running"] and "1/1" in states[0]["message"]
    assert not states[-1]["running"] and states[-1]["done"] == 1
    assert w.run_rows == [row]
    assert w.kernels == []  # the reference interpreter generates none


def test_run_message_from_the_front_end(toy_trace):
    w = toy_trace.widget()
    w._on_message(w, {"type": "run", "backends": ["reference", "nope"], "stage": 2}, [])
    assert [(r["stage"], r["backend"]) for r in w.run_rows] == [(2, "reference")]
    w._on_message(w, {"type": "something else"}, [])
    assert len(w.run_rows) == 1


def test_a_failing_backend_is_a_row_not_a_crash(toy_trace):
    w = toy_trace.widget()
    [row] = w.run(["gpu"])
    assert row["ok"] is None and "gpu" in row["error"]


def test_kernels_come_from_runs(toy_trace, monkeypatch):
    from explorer.backends.result import Kernel, RunResult

    w = toy_trace.widget()
    real = toy_trace.run

    def run_with_kernels(*args, backend="reference", stage=-1):
        r = real(*args, backend="reference", stage=stage)
        return RunResult(r.value, r.seconds, r.peak_bytes, backend,
                         (Kernel("fused_0", "void fused_0() {}", 1e-6),))

    monkeypatch.setattr(toy_trace, "run", run_with_kernels)
    w.index = 3
    w.run(["reference"])
    assert w.kernels == [{"backend": "reference", "name": "fused_0",
                          "source": "void fused_0() {}", "seconds": 1e-6}]
    w.index = 2
    assert w.kernels == []
    w.index = 3
    assert len(w.kernels) == 1


def test_static_fallback_for_saved_notebooks(toy_trace):
    w = toy_trace.widget()
    data, _meta = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    page = data["text/html"]
    assert "prog&lt;&amp;&gt;" in page and "<script" not in page
    assert page.count("<tr") == 1 + len(toy_trace.stages) and "<svg" in page
