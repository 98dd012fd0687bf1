"""The widget in marimo, in a real browser: `mo.ui.anywidget(trace.widget())` in
gambit_marimo.py, served by marimo's own server (conftest.py: `marimo edit`, `marimo run`).

marimo draws an anywidget in a shadow root (Playwright's locators see into it; the page's
document.querySelector does not). The stage a click or a key chooses goes to the widget in
Python, which answers with the stage's view (its traits), and marimo reruns the notebook's
cell that reads `widget.index`; the run button's custom message makes Python measure the
stage and send back its rows one by one. Screenshots: test-artifacts/browser/marimo-*.png.
"""

from __future__ import annotations

import ast

import pytest

import explorer as gx
from tests.browser.browserkit import HERE, shot
from tests.browser.test_notebook import check_stage

# with the Jupyter tests, on one xdist worker one after another (make test: --dist
# loadgroup): a server, its kernel and a browser at a time on 2 cores
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

NOTEBOOK = HERE / "gambit_marimo.py"


def expected_trace() -> gx.Trace:
    """The notebook's `trace`, made here: its imports, then the body of the cell that
    explores (not through marimo, which would set up a runtime in this process)."""
    cells = [f for f in ast.parse(NOTEBOOK.read_text()).body if isinstance(f, ast.FunctionDef)]
    explore = next(f for f in cells if "gx.explore" in ast.unparse(f))
    body = [s for s in explore.body if not isinstance(s, ast.Return)]
    ns: dict = {}
    exec("import jax.numpy as jnp\nimport numpy as np\nimport explorer as gx\n"
         + "\n".join(ast.unparse(s) for s in body), ns)
    return ns["trace"]


def wait_for_stage(root, k: int) -> None:  # type: ignore[no-untyped-def]
    root.locator(f'.gx-chip.gx-current[data-index="{k}"]').wait_for(timeout=20_000)
    root.page.wait_for_function(  # the stage's view has come from Python
        "() => !document.querySelector('.gx-root.gx-stale')", timeout=20_000)
    root.page.wait_for_timeout(150)  # the svg swap follows in the same frame; let it paint


def python_sees(page, trace: gx.Trace, k: int) -> None:  # type: ignore[no-untyped-def]
    """The notebook's last cell, rerun by marimo when the widget's state changed in Python."""
    text = f"Python sees stage {k}: {trace.stages[k].name}"
    page.get_by_text(text).wait_for(timeout=20_000)


def wait_for_widget(page, trace: gx.Trace):  # type: ignore[no-untyped-def]
    root = page.locator(".gx-root").first
    root.wait_for(timeout=90_000)
    root.locator(".gx-pane-after g.node").first.wait_for(timeout=30_000)
    assert root.locator(".gx-chip").count() == len(trace.stages)
    return root


def test_widget_steps_in_marimo_edit(page, marimo_edit) -> None:  # type: ignore[no-untyped-def]
    trace = expected_trace()
    n = len(trace.stages)
    page.goto(marimo_edit.page_url())
    # the notebook opens with its cells not yet run: "run all", once the kernel is connected
    run_all = "[data-testid=chrome-controls-bottom-right] [data-testid=run-button]"
    page.wait_for_function(
        f"() => {{ const b = document.querySelector('{run_all}');"
        " return b && !b.className.includes('inactive-button'); }", timeout=60_000)
    page.locator(run_all).click()
    root = wait_for_widget(page, trace)
    check_stage(page, root, trace, 0)
    python_sees(page, trace, 0)
    root.scroll_into_view_if_needed()
    shot(page, "marimo-01-edit-traced")

    root.locator(".gx-next").click()  # the button, then the keys
    wait_for_stage(root, 1)
    check_stage(page, root, trace, 1)
    python_sees(page, trace, 1)
    root.locator(".gx-heading").click()
    for k in range(2, n):
        page.keyboard.press("ArrowRight")
        wait_for_stage(root, k)
        check_stage(page, root, trace, k)
    python_sees(page, trace, n - 1)
    page.keyboard.press("ArrowLeft")
    wait_for_stage(root, n - 2)

    # a rewrite, clicked, lights its nodes
    fired = next(k for k, s in enumerate(trace.stages) if s.report.rewrites)
    root.locator(f'.gx-chip[data-index="{fired}"]').click()
    wait_for_stage(root, fired)
    python_sees(page, trace, fired)
    root.locator('[data-tab="rewrites"]').click()
    root.locator(".gx-rewrite").first.click()
    root.locator(".gx-canvas .gx-hl").first.wait_for(timeout=20_000)
    root.scroll_into_view_if_needed()
    shot(page, "marimo-02-edit-rewrite-lit")
    assert not [e for e in page.errors if "gx" in e or "gambit" in e], page.errors


def test_widget_runs_a_stage_in_marimo_run(page, marimo_run) -> None:  # type: ignore[no-untyped-def]
    trace = expected_trace()
    page.goto(marimo_run.page_url())  # an app runs its cells as it opens
    root = wait_for_widget(page, trace)
    root.locator(".gx-next").click()
    wait_for_stage(root, 1)
    check_stage(page, root, trace, 1)
    python_sees(page, trace, 1)

    # the run tab: a custom message to Python, rows and progress back as traits
    root.locator('[data-tab="run"]').click()
    for box in root.locator(".gx-backend input").all():
        if box.get_attribute("value") != "cpu":
            box.uncheck()
    root.evaluate("""root => {
        window.gxSawPending = false;
        new MutationObserver(() => {
            if (root.querySelector('.gx-run-pending')) window.gxSawPending = true;
        }).observe(root, {childList: true, subtree: true});
    }""")
    root.locator(".gx-run").click()
    rows = root.locator(".gx-runs tbody tr")
    rows.filter(has_text=f"{trace.stages[1].name} on cpu").filter(has_text="✓") \
        .wait_for(timeout=120_000)
    root.locator(".gx-progress:not(.gx-running)").wait_for(timeout=20_000)
    assert page.evaluate("() => window.gxSawPending"), "no progress was shown while running"
    labels = [rows.nth(k).locator("td").first.inner_text() for k in range(rows.count())]
    assert [t.split()[0] for t in labels[:3]] == ["NumPy", "JAX", "jax.jit"], labels
    for k in range(rows.count()):
        assert "✓" in rows.nth(k).inner_text(), rows.nth(k).inner_text()
    root.scroll_into_view_if_needed()
    shot(page, "marimo-03-run-measured")
    assert not [e for e in page.errors if "gx" in e or "gambit" in e], page.errors
