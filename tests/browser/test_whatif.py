"""The what-if controls in JupyterLab, in a real browser: open the panel (the slider's range is
found), type a limit (the split re-plans and the stage chips follow), type an infeasible one
(refused with the smallest limit, the plan stays), and turn a pass off in the pipeline editor.
Screenshots: test-artifacts/browser/whatif-*.png.
"""

from __future__ import annotations

import nbformat
import pytest

from tests.browser.browserkit import shot

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

CELL = """\
import jax.numpy as jnp
import numpy as np
import explorer as gx

def kernel_sum(x, y, b):
    d = jnp.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
    return jnp.exp(-d) @ b

rng = np.random.default_rng(0)
x, y, b = (rng.standard_normal(s).astype(np.float32) for s in ((400, 3), (300, 3), (300, 2)))
w = gx.explore(kernel_sum, x, y, b).widget()
w
"""


def test_the_what_if_panel_replans(lab, page) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect  # the page fixture skips without Playwright

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)], metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}})
    nbformat.write(nb, lab.root / "whatif.ipynb")
    page.goto(lab.notebook_url("whatif.ipynb"))
    page.locator(".jp-CodeCell .cm-content").first.wait_for(timeout=60_000)
    lab.wait_for_kernel("whatif.ipynb")
    page.wait_for_timeout(1500)
    page.locator(".jp-CodeCell .cm-content").first.click()
    page.keyboard.press("Shift+Enter")
    root = page.locator(".gx-root").first
    root.wait_for(timeout=180_000)
    panel = root.locator(".gx-whatif")
    assert "planned peak 2.0 MiB" in panel.locator("summary").inner_text()
    chips = root.locator(".gx-chip").count()

    panel.locator("summary").click()  # open: Python finds the limits the slider spans
    panel.locator(".gx-whatif-slider").wait_for(timeout=120_000)
    assert "smallest feasible limit 26.8 KiB" in panel.inner_text()
    shot(page, "whatif-01-open")

    box = panel.locator(".gx-whatif-text")
    box.fill("64KiB")
    box.press("Enter")
    expect(root.locator(".gx-chip")).to_have_count(chips + 1, timeout=60_000)  # + split
    summary = panel.locator("summary")
    expect(summary).to_contain_text("split loops", timeout=60_000)
    assert "limit 64.0 KiB" in summary.inner_text()
    assert root.locator(".gx-chip", has_text="split").count() == 1
    shot(page, "whatif-02-64KiB")

    panel.locator(".gx-whatif-text").fill("4KiB")
    panel.locator(".gx-whatif-text").press("Enter")
    panel.locator(".gx-whatif-error").wait_for(timeout=60_000)
    assert "smallest feasible limit is 26.8 KiB" in panel.locator(".gx-whatif-error").inner_text()
    assert "limit 64.0 KiB" in summary.inner_text()  # the plan shown stays
    assert panel.locator(".gx-whatif-text").input_value() == "64KiB"
    shot(page, "whatif-03-refused")

    n = root.locator(".gx-chip").count()
    panel.locator('.gx-whatif-pass[data-pass="cse"] input').uncheck()
    expect(root.locator(".gx-chip")).to_have_count(n - 1, timeout=60_000)
    assert panel.locator('.gx-whatif-off[data-pass="cse"]').count() == 1
    shot(page, "whatif-04-without-cse")
    assert not page.errors  # type: ignore[attr-defined]
