"""The widget where it is not the live widget in JupyterLab: Notebook 7 (the arrow keys step
stages, not cells), and a saved notebook opened without the kernel that made it (the
kernel-less copy shows the trace: the step-through view when trusted, else the summary)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tests.browser.browserkit import shot

# one xdist worker runs them one after another (make test: --dist loadgroup): two Jupyter
# servers, kernels and browsers at once on 2 cores starved the kernels past the timeouts
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]


def test_notebook7_steps_stages_with_the_keys(notebook7, page) -> None:  # type: ignore[no-untyped-def]
    page.goto(notebook7.notebook_url("gambit_demo.ipynb"))
    page.locator(".jp-CodeCell .cm-content").first.wait_for(timeout=60_000)
    notebook7.wait_for_kernel("gambit_demo.ipynb")  # started and idle, so the cells run
    page.wait_for_timeout(1500)  # and the page has connected to it
    page.locator(".jp-CodeCell .cm-content").first.click()
    for _ in range(2):  # setup, %%gambit
        page.keyboard.press("Shift+Enter")
    root = page.locator(".gx-root").first
    root.wait_for(timeout=180_000)
    root.scroll_into_view_if_needed()
    active = "() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')]" \
             ".findIndex(c => c.classList.contains('jp-mod-active'))"
    root.locator(".gx-heading").click()  # focus the widget (its cell becomes the active one)
    page.keyboard.press("Escape")  # command mode, where the arrows would move between cells
    root.locator(".gx-heading").click()
    cell = page.evaluate(active)
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "() => document.querySelector('.gx-root .gx-chip.gx-current')?.dataset.index === '1'",
        timeout=20_000)
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "() => document.querySelector('.gx-root .gx-chip.gx-current')?.dataset.index === '2'",
        timeout=20_000)
    assert page.evaluate(active) == cell  # the notebook's active cell did not move
    shot(page, "11-notebook7-stepped")


def _saved_notebook(path: Path) -> None:
    """A notebook as it is saved after running a widget cell: the live widget's output (its
    model gone with the kernel) and the kernel-less copy beside it."""
    import IPython.display

    from tests.view import viewdata

    shown: list = []
    real = IPython.display.display
    IPython.display.display = lambda obj, **kw: shown.append(obj)  # type: ignore[assignment]
    try:
        viewdata.toy_trace().widget()._ipython_display_()
    finally:
        IPython.display.display = real  # type: ignore[assignment]
    live, copy = shown
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    cell = nbformat.v4.new_code_cell("trace.widget()")
    cell.outputs = [nbformat.v4.new_output("display_data", data=live),
                    nbformat.v4.new_output("display_data", data={"text/html": copy.data})]
    nb.cells = [cell]
    nbformat.write(nb, path)


def test_a_saved_notebook_shows_the_trace_without_its_kernel(lab, page) -> None:  # type: ignore[no-untyped-def]
    untrusted = Path(lab.root) / "saved_untrusted.ipynb"
    _saved_notebook(untrusted)
    page.goto(lab.notebook_url(untrusted.name))
    page.locator(".jp-OutputArea-output").first.wait_for(timeout=60_000)
    summary = page.locator(".gx-summary img")
    summary.first.wait_for(timeout=20_000)  # the sanitizer kept the picture
    assert page.locator(".gx-root").count() == 0  # no scripts ran
    assert "digraph" not in page.locator(".jp-OutputArea").first.inner_text()
    shot(page, "12-saved-untrusted")

    trusted = Path(lab.root) / "saved_trusted.ipynb"
    _saved_notebook(trusted)
    lab.trust(trusted)
    page.goto(lab.notebook_url(trusted.name))
    root = page.locator(".gx-root")
    root.first.wait_for(timeout=60_000)  # the step-through view, no kernel behind it
    assert root.locator(".gx-chip").count() == 5
    root.first.locator(".gx-heading").click()
    page.keyboard.press("ArrowRight")
    page.wait_for_function(
        "() => document.querySelector('.gx-root .gx-chip.gx-current')?.dataset.index === '1'",
        timeout=20_000)
    page.wait_for_timeout(3000)  # the live widget's output gives up on its model after 2 s
    assert not page.locator(".jp-OutputArea-child:visible", has_text="model not found").count()
    shot(page, "13-saved-trusted-no-kernel")


def test_a_model_opens_group_by_group_in_jupyterlab(lab, page) -> None:  # type: ignore[no-untyped-def]
    """The zoo's GPT-block gradient: the first view is its top-level groups; a click opens
    one (the kernel redraws), a click on its frame closes it; the loading state clears."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    nb.cells = [nbformat.v4.new_code_cell(
        "from tests.corpora.zoo import zoo\n"  # the lab runs with the repository on PYTHONPATH
        "import explorer as gx\nfn, args = zoo()['gpt_grad']\ngx.explore(fn, *args).widget()")]
    nbformat.write(nb, Path(lab.root) / "gpt.ipynb")
    page.goto(lab.notebook_url("gpt.ipynb"))
    page.locator(".jp-CodeCell .cm-content").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1500)
    page.locator(".jp-CodeCell .cm-content").first.click()
    page.keyboard.press("Shift+Enter")
    root = page.locator(".gx-root").first
    root.wait_for(timeout=180_000)
    root.scroll_into_view_if_needed()
    after = root.locator(".gx-pane-after .gx-canvas > svg")
    groups = after.locator("g.gx_group")
    assert 3 <= after.locator("g.node").count() <= 60 and groups.count() >= 3
    shot(page, "14-gpt-first-view")
    closed = after.locator("g.node").count()
    mlp = after.locator("g.gx_group", has_text="mlp ·").first
    key = next(c for c in (mlp.get_attribute("class") or "").split() if c.startswith("gx_g"))
    mlp.click()
    opened = f".gx-pane-after .gx-canvas > svg g.cluster.gx_open.{key}"
    page.wait_for_function(f"() => document.querySelector('{opened}')", timeout=30_000)
    assert after.locator("g.node").count() > closed
    assert "gx-busy" not in (root.locator(".gx-board").get_attribute("class") or "")
    shot(page, "15-gpt-group-opened")
    after.locator(f"g.cluster.gx_open.{key} text").first.click()  # its frame's label closes it
    page.wait_for_function(f"() => !document.querySelector('{opened}')", timeout=30_000)
    assert after.locator("g.node").count() == closed
    root.locator(".gx-chip").last.click()  # the last stage, fused: kernels have their colour
    page.wait_for_function(
        "() => !document.querySelector('.gx-root.gx-stale')"
        " && document.querySelector('.gx-root .gx-chip.gx-current')?.dataset.index === '8'",
        timeout=30_000)
    shot(page, "16-gpt-fused")
    assert not [e for e in page.errors if "gx" in e or "gambit" in e], page.errors


def test_a_saved_page_shows_where_the_time_goes_without_a_kernel(page, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """trace.to_html keeps the last profile, roofline and memory timeline: the page draws the
    heat overlay, the roofline and the timeline with no kernel behind it."""
    import explorer as gx
    from explorer.examples import mlp_attention_grad

    fn, args = mlp_attention_grad(2)
    trace = gx.explore(fn, *args)
    last = len(trace.stages) - 1
    trace.roofline(stage=last, backend="cpu", repeats=2)
    trace.memory_timeline(stage=last, backend="cpu")
    trace.profile(stage=last, backend="cpu", repeats=2)
    path = tmp_path / "profiled.html"
    trace.to_html(path)
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
               else route.abort())
    page.goto(path.as_uri())
    root = page.locator(".gx-root")
    root.wait_for(timeout=10_000)
    root.locator(f'.gx-chip[data-index="{last}"]').click()
    page.wait_for_function("() => document.querySelector('.gx-pane-after g.gx-heat')",
                           timeout=10_000)
    assert root.locator(".gx-pane-before g.gx-heat").count() == 0  # only the last stage profiled
    assert "on cpu" in root.locator(".gx-heatlegend").inner_text()
    group = root.locator(".gx-pane-after g.node.gx-heat.gx_group").first
    box = group.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    tip = root.locator(".gx-tip")
    tip.wait_for(state="visible", timeout=5_000)
    assert "timed nodes" in tip.inner_text() and "% of stage" in tip.inner_text()
    shot(page, "26-saved-heat-overlay")
    root.locator('[data-tab="roofline"]').click()
    assert root.locator(".gx-tabbody svg.gx-roofline .gx-roof-pt").count() >= 2
    root.locator(".gx-tabbody").scroll_into_view_if_needed()
    shot(page, "27-saved-roofline")
    root.locator('[data-tab="memory"]').click()
    assert root.locator(".gx-tabbody svg.gx-lifetimes .gx-life").count() >= 1
    byte_ticks = root.locator(".gx-tabbody svg.gx-timeline .gx-axis-bytes text").all_text_contents()
    assert len(byte_ticks) >= 3 and byte_ticks[0] == "0 B"
    assert all(t.endswith(("B", "KiB", "MiB", "GiB")) for t in byte_ticks)
    steps = root.locator(".gx-tabbody svg.gx-timeline .gx-axis-steps text").all_text_contents()
    assert len(steps) >= 3 and steps[0] == "0"
    root.locator(".gx-tabbody").scroll_into_view_if_needed()
    shot(page, "28-saved-memory-timeline")
    root.locator('[data-tab="kernels"]').click()
    assert root.locator(".gx-profile-table tbody tr").count() >= 1
    assert root.locator(".gx-profile-table .gx-profile-outside").count() == 1  # shares add up
    root.locator(".gx-profile-table").scroll_into_view_if_needed()
    shot(page, "29-saved-profile-table")
    assert root.locator(".gx-repro-stage").count() == 0  # reproducers need a kernel
    root.locator('[data-tab="run"]').click()
    assert "profiling needs a Jupyter kernel" in root.locator(".gx-tabbody").inner_text()
    assert not page.errors, page.errors
