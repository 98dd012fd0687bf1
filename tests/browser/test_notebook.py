"""JupyterLab in a real browser: run a %%gambit cell, step through the passes with the arrow
keys, and check that the graphs and the highlighted changes follow the stage.

The expected stages come from tracing the notebook's own cell in this process, so the test
follows the pipeline as passes are added. Screenshots: test-artifacts/browser/.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import explorer as gx
from explorer.view.payload import stage_summaries, stage_view
from tests.browser.browserkit import HERE, shot

# one xdist worker runs them one after another (make test: --dist loadgroup): two Jupyter
# servers, kernels and browsers at once on 2 cores starved the kernels past the timeouts
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

NOTEBOOK = "gambit_demo.ipynb"


def expected_trace() -> gx.Trace:
    """Run the demo notebook's cells here: the setup, then gx.explore on the magic's call."""
    cells = [c for c in json.loads((HERE / NOTEBOOK).read_text())["cells"]
             if c["cell_type"] == "code"]
    setup = "".join(cells[0]["source"]).replace("%load_ext explorer", "")
    magic, *body, call = "".join(cells[1]["source"]).splitlines()
    assert magic.startswith("%%gambit")
    ns: dict = {}
    exec(setup + "\n" + "\n".join(body), ns)
    fn_name, args = re.fullmatch(r"(\w+)\((.*)\)", call.strip()).groups()
    return gx.explore(ns[fn_name], *[ns[a.strip()] for a in args.split(",")])


def svg_nodes(svg: str) -> int:
    return len(re.findall(r'<g class="node ', svg))


def current(root) -> int:  # type: ignore[no-untyped-def]
    return int(root.locator(".gx-chip.gx-current").get_attribute("data-index"))


def wait_for_stage(page, k: int) -> None:  # type: ignore[no-untyped-def]
    page.wait_for_function(
        "k => document.querySelector('.gx-root .gx-chip.gx-current')?.dataset.index == String(k)"
        # and the stage's view has come from the kernel (until then the counts read "…")
        " && !document.querySelector('.gx-root.gx-stale')",
        arg=k, timeout=20_000)
    page.wait_for_timeout(150)  # the svg swap follows in the same frame; let it paint


def check_stage(page, root, trace: gx.Trace, k: int) -> None:  # type: ignore[no-untyped-def]
    view = stage_view(trace, k)
    counts = view["diff_counts"]
    legend = root.locator(".gx-legend").inner_text()
    for status in ("added", "removed", "changed"):
        assert f"{status} {counts[status]}" in legend, (k, legend)
    after = root.locator(".gx-pane-after g.node")
    assert after.count() == svg_nodes(view["after_svg"]), k
    marked_after = root.locator(".gx-pane-after g.gx_added, .gx-pane-after g.gx_changed").count()
    marked_before = root.locator(".gx-pane-before g.gx_removed, .gx-pane-before g.gx_changed")
    assert (marked_after > 0) == (counts["added"] + counts["changed"] > 0), k
    assert (marked_before.count() > 0) == (counts["removed"] + counts["changed"] > 0), k
    if k == 0:
        assert root.locator(".gx-pane-before svg").count() == 0
    else:
        assert root.locator(".gx-pane-before g.node").count() == svg_nodes(view["before_svg"])
    assert f"stage {k}/" in root.locator(".gx-heading").inner_text()


def test_gambit_cell_steps_with_the_keys(lab, page) -> None:  # type: ignore[no-untyped-def]
    trace = expected_trace()
    n = len(trace.stages)
    assert n >= 3, "the demo needs a pipeline with stages to step through"
    page.goto(lab.notebook_url(NOTEBOOK))
    page.locator(".jp-CodeCell .cm-content").first.wait_for(timeout=60_000)
    lab.wait_for_kernel("gambit_demo.ipynb")  # started and idle, so the cells run
    page.wait_for_timeout(1500)  # and the page has connected to it  # let the kernel session attach
    page.locator(".jp-CodeCell .cm-content").first.click()
    for _ in range(3):  # setup, %%gambit, export
        page.keyboard.press("Shift+Enter")
    root = page.locator(".gx-root").first
    root.wait_for(timeout=180_000)
    page.locator(".jp-OutputArea-output", has_text="dtype=float32").first.wait_for(timeout=60_000)
    root.scroll_into_view_if_needed()
    assert root.locator(".gx-chip").count() == n
    check_stage(page, root, trace, 0)
    shot(page, "01-traced")

    root.locator(".gx-heading").click()  # focus the widget, not a cell
    for k in range(1, n):
        page.keyboard.press("ArrowRight")
        wait_for_stage(page, k)
        check_stage(page, root, trace, k)
        if k in (1, n - 1) or sum(stage_view(trace, k)["diff_counts"].values()) > 2:
            shot(page, f"02-step-{k:02d}-{trace.stages[k].name}")
    page.keyboard.press("ArrowRight")  # at the end: stays
    page.wait_for_timeout(300)
    assert current(root) == n - 1
    for k in range(n - 2, -1, -1):
        page.keyboard.press("ArrowLeft")
        wait_for_stage(page, k)
        check_stage(page, root, trace, k)
    shot(page, "03-back-to-traced")

    # hide the stages that changed nothing: the keys skip them
    changed = [k for k, s in enumerate(trace.stages) if k == 0 or s.report.changed]
    root.locator(".gx-hide input").check()
    root.locator(".gx-heading").click()
    page.keyboard.press("ArrowRight")
    wait_for_stage(page, changed[1])
    assert root.locator(".gx-chip.gx-hidden").count() == n - len(changed)
    shot(page, "04-unchanged-hidden")

    # a rewrite, clicked, highlights its nodes
    root.locator('[data-tab="rewrites"]').click()
    root.locator(".gx-rewrite").first.click()
    page.wait_for_timeout(200)
    assert root.locator(".gx-canvas .gx-hl").count() > 0
    shot(page, "05-rewrite-highlighted")

    # search by op
    root.locator(".gx-search").fill("dot_general")
    page.wait_for_timeout(200)
    assert "after" in root.locator(".gx-hits").inner_text()
    root.locator(".gx-search").fill("")

    # the source beside the graphs: a line lights its nodes, a node picks its line
    src = root.locator(".gx-src")
    assert src.is_visible() and src.locator(".gx-src-used").count() >= 3
    line = src.locator(".gx-src-used", has_text="jnp.sum(x[:, None, :]")
    line.click()
    page.wait_for_timeout(200)
    assert root.locator(".gx-canvas .gx-hl").count() > 0
    assert "gx-src-selected" in (line.get_attribute("class") or "")
    assert "window.pwned" in src.inner_text()  # the hostile comment, as text
    shot(page, "05b-source-line-lit")
    root.locator(".gx-pane-after g.node", has_text="reduce_sum").locator("text").first.click()
    page.wait_for_timeout(200)
    picked = src.locator(".gx-src-selected")
    assert picked.count() == 1 and picked.get_attribute("data-loc"), "a node picks its line"

    # a rule pass, stepped firing by firing with shift+arrows
    steppable = [s["index"] for s in stage_summaries(trace) if s["steppable"]]
    assert steppable, "the demo must have a rule pass that fires"
    k = steppable[0]
    root.locator(f'.gx-chip[data-index="{k}"]').click()
    wait_for_stage(page, k)
    root.locator(".gx-heading").click()
    page.keyboard.press("Shift+ArrowRight")
    page.wait_for_function(
        "() => /firing 1\\//.test(document.querySelector('.gx-root .gx-firing-label')"
        "?.textContent ?? '') && !document.querySelector('.gx-root.gx-stale')"
        " && document.querySelector('.gx-root .gx-firing-rule')", timeout=20_000)
    rule = trace.stages[k].report.rewrites[0].rule
    assert rule in root.locator(".gx-firing-rule").inner_text()
    assert current(root) == k, "shift+arrow steps inside the stage"
    assert root.locator(".gx-canvas .gx-hl").count() > 0, "the firing's nodes are lit"
    shot(page, "05c-firing-1")
    page.keyboard.press("Escape")
    page.wait_for_function("() => !document.querySelector('.gx-root .gx-firing-rule')"
                           " && !document.querySelector('.gx-root.gx-stale')", timeout=20_000)
    root.locator(f'.gx-chip[data-index="{changed[1]}"]').click()
    wait_for_stage(page, changed[1])

    # the two graphs pan and zoom together (on by default)
    views = "() => [...document.querySelectorAll('.gx-root .gx-canvas > svg')]" \
            ".map(s => s.getAttribute('viewBox'))"
    first = page.evaluate(views)
    root.locator(".gx-pane-before .gx-canvas").hover()
    page.mouse.wheel(0, -300)
    page.wait_for_timeout(200)
    moved = page.evaluate(views)
    assert moved[0] != first[0] and moved[1] != first[1], (first, moved)

    # the run tab: the stage on cpu against NumPy, JAX eager and jax.jit, row by row
    root.locator('[data-tab="run"]').click()
    # the magic ran the final stage, beside jax.jit (so its "vs jax.jit" column is filled)
    opened = [t.inner_text() for t in root.locator(".gx-runs tbody tr td:first-child").all()]
    assert len(opened) == 2 and opened[0].startswith("jax.jit"), opened
    page.evaluate("""() => {
        window.gxSawPending = false;
        new MutationObserver(() => {
            if (document.querySelector('.gx-root .gx-run-pending')) window.gxSawPending = true;
        }).observe(document.querySelector('.gx-root .gx-tabbody'), {childList: true, subtree: true});
    }""")
    for box in root.locator(".gx-backend input").all():
        if box.get_attribute("value") != "cpu":
            box.uncheck()
    root.locator(".gx-run").click()
    page.wait_for_function(
        "() => document.querySelectorAll('.gx-root .gx-run-baseline').length === 3"
        " && !document.querySelector('.gx-root .gx-run-pending')"
        " && !document.querySelector('.gx-root .gx-progress.gx-running')", timeout=180_000)
    assert page.evaluate("() => window.gxSawPending"), "no progress was shown while running"
    rows = root.locator(".gx-runs tbody tr")
    labels = [rows.nth(k).locator("td").first.inner_text() for k in range(rows.count())]
    stage_name = trace.stages[changed[1]].name
    assert [t.split()[0] for t in labels[:3]] == ["NumPy", "JAX", "jax.jit"], labels
    assert f"{stage_name} on cpu" in labels, labels
    for k in range(rows.count()):
        assert "✓" in rows.nth(k).inner_text(), rows.nth(k).inner_text()
    assert root.locator(".gx-runs .gx-bar-time").count() == rows.count()
    shot(page, "06-run")

    where_the_time_goes(page, root, trace)

    assert page.evaluate("() => window.pwned") is None  # the hostile comment stayed text
    assert not [e for e in page.errors if "gx" in e or "gambit" in e], page.errors

    exported = Path(lab.root) / "exported.html"
    assert exported.exists(), "the notebook's export cell did not write its page"


def heat_fill(page, pane: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The fills of a pane's boxes coloured by the heat overlay, as the browser draws them."""
    return page.evaluate("""pane => [...document.querySelectorAll(
        `.gx-root .gx-pane-${pane} g.node.gx-heat`)].map(g => getComputedStyle(
        [...g.querySelectorAll('path, polygon, ellipse')].find(s => s.getAttribute('fill') !== 'none')
    ).fill)""", pane)


def hover_tip(page, root, locator) -> str:  # type: ignore[no-untyped-def]
    """Move the mouse onto an element's middle; the widget's hover text then."""
    locator.scroll_into_view_if_needed()
    box = locator.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    tip = root.locator(".gx-tip")
    tip.wait_for(state="visible", timeout=5_000)
    return tip.inner_text()


def where_the_time_goes(page, root, trace: gx.Trace) -> None:  # type: ignore[no-untyped-def]
    """Profile the fused stage from the run tab: the heat overlay in both panes, the roofline
    and memory tabs, a reproducer downloaded from the kernels tab; a backend that cannot run
    here says why."""
    from explorer.backends import registry

    last = len(trace.stages) - 1
    root.locator(f'.gx-chip[data-index="{last}"]').click()
    wait_for_stage(page, last)
    bar = root.locator(".gx-profilebar")
    if "gpu" not in registry.available():  # a backend that cannot run here: the registry's reason
        page.evaluate("""() => document.querySelector('.gx-root .gx-profile-backend')
            .add(new Option('gpu', 'gpu'))""")
        bar.locator("select").select_option("gpu")
        bar.locator(".gx-profile-run").click()
        error = bar.locator(".gx-profile-error")
        error.wait_for(timeout=60_000)
        assert "backend 'gpu' is not available here" in error.inner_text()
        shot(page, "21-profile-unavailable-backend")
    bar.locator("select").select_option("cpu")
    bar.locator(".gx-profile-run").click()
    page.wait_for_function(
        "() => document.querySelector('.gx-root .gx-pane-after g.gx-heat')"
        " && document.querySelector('.gx-root .gx-pane-before g.gx-heat')"
        " && !document.querySelector('.gx-root .gx-profilebar .gx-running')", timeout=240_000)
    assert not bar.locator(".gx-profile-error").count(), bar.inner_text()
    assert "profiled stage" in bar.inner_text()
    fills = heat_fill(page, "after") + heat_fill(page, "before")
    assert fills and all(f.startswith("rgb(") and f != "rgb(255, 255, 255)" for f in fills), fills
    legend = root.locator(".gx-heatlegend")
    assert "on cpu" in legend.inner_text()
    root.locator(".gx-pane-after .gx-canvas").scroll_into_view_if_needed()
    assert page.evaluate("""() => {  // a coloured box or frame's label on screen
        for (const canvas of document.querySelectorAll('.gx-root .gx-canvas')) {
            const c = canvas.getBoundingClientRect();
            for (const t of canvas.querySelectorAll('g.gx-heat text')) {
                const r = t.getBoundingClientRect();
                const x = r.x + r.width / 2, y = r.y + r.height / 2;
                if (x > c.left && x < c.right && y > c.top && y < c.bottom
                    && t.closest('g.gx-heat').contains(document.elementFromPoint(x, y))) {
                    t.setAttribute('data-test', 'hover-me');
                    return true;
                }
            }
        }
        return false;
    }""")
    text = hover_tip(page, root, root.locator('[data-test="hover-me"]'))
    assert "% of stage" in text and "on cpu" in text, text
    shot(page, "22-heat-overlay")
    legend.locator("input").uncheck()  # the overlay turns off, and on again
    page.wait_for_function("() => !document.querySelector('.gx-root g.gx-heat')", timeout=20_000)
    legend.locator("input").check()
    page.wait_for_function("() => document.querySelector('.gx-root g.gx-heat')", timeout=20_000)

    root.locator('[data-tab="roofline"]').click()
    plot = root.locator(".gx-tabbody svg.gx-roofline")
    plot.wait_for(timeout=20_000)
    assert plot.locator(".gx-roof-pt").count() >= 1 and plot.locator("path.gx-roof").count() == 1
    assert plot.locator("g.gx-roof-xla").count() == 1  # jax.jit's point
    plot.scroll_into_view_if_needed()
    text = hover_tip(page, root, plot.locator(".gx-roof-pt").first.locator(".gx-roof-mark"))
    assert "GFLOP/s" in text and "FLOPs/byte" in text, text
    shot(page, "23-roofline")

    root.locator('[data-tab="memory"]').click()
    memory = root.locator(".gx-tabbody .gx-memorypanel")
    memory.wait_for(timeout=20_000)
    assert memory.locator("svg.gx-timeline .gx-plot-area").count() == 1
    assert memory.locator("svg.gx-lifetimes .gx-life").count() >= 1
    assert memory.locator(".gx-plot-peak").count() >= 1
    memory.scroll_into_view_if_needed()
    text = hover_tip(page, root, memory.locator(".gx-life").first)
    assert "steps" in text, text
    shot(page, "24-memory-timeline")

    root.locator('[data-tab="kernels"]').click()
    root.locator(".gx-profile-table").wait_for(timeout=20_000)
    with page.expect_download(timeout=60_000) as download:
        root.locator(".gx-repro-stage").click()
    name = f"distances_stage{last}_{trace.stages[last].name}.py"
    assert download.value.suggested_filename == name
    script = Path(download.value.path()).read_text()
    compile(script, name, "exec")  # a Python script
    assert "gx.parse(IR)" in script and "reference" in script
    root.locator("a.gx-saved", has_text=name).wait_for(timeout=10_000)
    if root.locator(".gx-profile-table .gx-repro-kernel").count():
        with page.expect_download(timeout=60_000) as download:
            root.locator(".gx-profile-table .gx-repro-kernel").first.click()
        assert download.value.suggested_filename.startswith(f"distances_stage{last}_")
    shot(page, "25-kernels-by-time")


def test_exported_page_works_offline(page, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.view import viewdata  # the view tests' program: a hostile comment and function name

    trace = viewdata.toy_trace()
    path = tmp_path / "offline.html"
    trace.to_html(path)
    requests: list[str] = []
    page.route("**/*", lambda route: (requests.append(route.request.url),
                                      route.continue_() if route.request.url.startswith("file:")
                                      else route.abort()))
    page.goto(path.as_uri())
    root = page.locator(".gx-root")
    root.wait_for(timeout=10_000)
    assert root.locator(".gx-title").inner_text() == "gambit-explorer · prog<&>"
    root.locator(".gx-heading").click()
    for k in range(1, len(trace.stages)):
        page.keyboard.press("ArrowRight")
        wait_for_stage(page, k)
        check_stage(page, root, trace, k)
    root.locator('[data-tab="rewrites"]').click()
    assert "window.pwned" in root.locator(".gx-tabbody").inner_text()
    shot(page, "07-exported-offline")
    assert page.evaluate("() => window.pwned") is None
    assert all(u.startswith("file:") for u in requests), requests
    assert not page.errors, page.errors
