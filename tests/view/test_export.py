"""trace.to_html: one standalone page, with every user string escaped."""

import json
import pathlib
import re

from explorer.view.export import export_data, pack, page_data, share_svgs, unpack
from tests.view.viewdata import HOSTILE


def test_writes_one_standalone_page(toy_trace, tmp_path):
    path = tmp_path / "trace.html"
    assert toy_trace.to_html(path) == str(path)
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    # no network: nothing is loaded from anywhere, and the CSP forbids it
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "default-src 'none'" in page
    # the bundle and the data are inlined
    assert "mountPacked" in page and 'class="gx-data"' in page
    assert page.count("<script") == 2 and page.count("</script>") == 2


def test_hostile_user_strings_stay_inside_the_data(toy_trace, tmp_path):
    path = tmp_path / "trace.html"
    toy_trace.to_html(path)
    page = path.read_text(encoding="utf-8")
    assert HOSTILE not in page and "window.pwned" not in page  # only inside the packed data
    assert "<b>" not in page and "prog<&>" not in page
    assert "<title>gambit-explorer: prog&lt;&amp;&gt;</title>" in page
    blob = page.split('class="gx-data"')[1].split(">", 1)[1].split("</script>")[0]
    assert re.fullmatch(r"[A-Za-z0-9+/=]+", blob)  # base64: nothing that could end a script
    data = page_data(page)
    assert data["state"]["title"] == "prog<&>"
    lines = [rw["line_text"] for v in data["views"] for rw in v["rewrites"]]
    assert any(HOSTILE in t for t in lines)  # the exact text survives the round trip


def test_every_stage_is_inlined(toy_trace):
    data = export_data(toy_trace)
    assert len(data["views"]) == len(toy_trace.stages)
    assert data["views"][0]["before_svg"] == "" and all(
        "<svg" in v["after_svg"] for v in data["views"])
    assert [len(v["rewrites"]) for v in data["views"]] == [
        len(s.report.rewrites) for s in toy_trace.stages]
    assert all(v["kernels"] == [] for v in data["views"])


def test_the_page_is_packed_with_each_picture_once(toy_trace):
    data = export_data(toy_trace)
    shared = share_svgs(data)
    pictures = [v[k] for v in data["views"] for k in ("before_svg", "after_svg") if v[k]]
    assert len(shared["svgs"]) == len(set(pictures)) < len(pictures)
    assert unpack(pack(data)) == data
    assert len(pack(data)) < len(json.dumps(data)) / 4


def test_widget_export_includes_runs(toy_trace, tmp_path):
    w = toy_trace.widget(repeats=1)
    w.run(["reference"], stage=4)
    path = tmp_path / "w.html"
    w.to_html(path)
    rows = page_data(path.read_text())["state"]["run_rows"]
    assert [r["stage"] for r in rows] == [None, None, None, 4]
    assert [r["label"] for r in rows[:3]] == ["NumPy", "JAX eager", "jax.jit"]


def test_a_saved_page_keeps_the_remarks_and_the_overlays_state(remark_trace, tmp_path):
    path = tmp_path / "why.html"
    remark_trace.to_html(path)
    data = page_data(path.read_text(encoding="utf-8"))
    assert data["views"][0]["remarks"] == []
    saved = data["views"][1]["remarks"]
    assert [{k: r[k] for k in ("pass", "kind", "rule", "reason", "nodes", "source", "region")}
            for r in saved] == [m.to_json() for m in remark_trace.stages[1].report.remarks]
    assert all(r["after_keys"] for r in saved)  # the markers find their boxes
    state = data["state"]
    assert (state["show_missed"], state["heat_scale"], state["colour_by"]) == (True, "hottest", "time")
    assert state["errors"] == [] and state["selected_node"] == ""


def test_a_saved_page_keeps_every_profile_taken(toy_trace, tmp_path):
    """Two stages, and one stage on two backends: the page keeps all of them (issue 41: only
    one of the two panes' profiles survived), the latest of each stage first."""
    from explorer.measure.latest import latest

    taken = latest(toy_trace)
    taken.profile = taken.roofline = taken.timeline = None
    try:
        toy_trace.profile(stage=2, backend="reference", repeats=1)
        toy_trace.profile(stage=3, backend="reference", repeats=1)
        toy_trace.profile(stage=3, backend="cpu", repeats=1)
        toy_trace.profile(stage=2, backend="reference", repeats=1)  # replaces its own, only
        state = page_data(pathlib.Path(toy_trace.to_html(tmp_path / "p.html")).read_text())["state"]
        assert [(p["stage"], p["backend"]) for p in state["profiles"]] == [
            (2, "reference"), (3, "cpu"), (3, "reference")]
        # a widget's two panes, both kept in the trace's own page too
        taken.profile = None
        w = toy_trace.widget(repeats=1)
        w.index = 4
        assert w.profile("reference") is not None
        state = page_data(pathlib.Path(toy_trace.to_html(tmp_path / "q.html")).read_text())["state"]
        assert [p["stage"] for p in state["profiles"]] == [3, 4]
        assert latest(toy_trace).profile.stage_index == 4  # the stage shown is the latest
    finally:
        taken.profile = taken.roofline = taken.timeline = None
