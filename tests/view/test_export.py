"""trace.to_html: one standalone page, with every user string escaped."""

import json
import re

from viewdata import HOSTILE

from explorer.view.export import export_data, export_html, page_data


def test_writes_one_standalone_page(toy_trace, tmp_path):
    path = tmp_path / "trace.html"
    assert toy_trace.to_html(path) == str(path)
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    # no network: nothing is loaded from anywhere, and the CSP forbids it
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "default-src 'none'" in page
    # the bundle and the data are inlined
    assert "mountStatic" in page and 'id="gambit-data"' in page
    assert page.count("<script") == 3 and page.count("</script>") == 3


def test_hostile_user_strings_stay_inside_the_data(toy_trace, tmp_path):
    path = tmp_path / "trace.html"
    toy_trace.to_html(path)
    page = path.read_text(encoding="utf-8")
    assert HOSTILE not in page and "window.pwned" not in page  # only inside the base64 data
    assert "<b>" not in page and "prog<&>" not in page
    assert "<title>gambit-explorer: prog&lt;&amp;&gt;</title>" in page
    blob = page.split('data-encoding="gzip+base64">')[1].split("</script>")[0]
    assert set(blob) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
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


def test_the_data_is_compressed(toy_trace):
    page = export_html(toy_trace)
    raw = json.dumps(export_data(toy_trace), separators=(",", ":"))
    blob = page.split('data-encoding="gzip+base64">')[1].split("</script>")[0]
    assert len(blob) < len(raw) / 3 and page_data(page) == json.loads(raw)


def test_widget_export_includes_runs(toy_trace, tmp_path):
    w = toy_trace.widget(repeats=1)
    w.run(["reference"], stage=4)
    path = tmp_path / "w.html"
    w.to_html(path)
    rows = page_data(path.read_text())["state"]["run_rows"]
    assert [r["stage"] for r in rows] == [None, None, None, 4]
    assert [r["label"] for r in rows[:3]] == ["NumPy", "JAX eager", "jax.jit"]
