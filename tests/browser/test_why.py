"""A saved page (trace.to_html) says why: the why tab lists a selected node's remarks, the
nodes with a missed remark carry a marker, a remark's line picks it in the source panel; the
heat overlay is graded to the hottest box with the slowest nodes outlined, and the boxes can
be coloured by error. No kernel behind it: the page says the live controls need one."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.measure.latest import latest
from tests.browser.browserkit import shot
from tests.view.viewdata import WHY_PASS

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]


def mlp(x, w1, w2):
    h = jnp.tanh(x @ w1) * 0.5
    h = jax.lax.fori_loop(0, 3, lambda i, c: c * 0.9 + jnp.sin(c), h)
    out = jnp.exp(h @ w2) * 2.0
    return jnp.sum(out * out, axis=1)


def saved_page(tmp_path) -> tuple[gx.Trace, str]:  # type: ignore[no-untyped-def]
    """The page of a trace whose user pass missed three multiplications (one in the loop's
    body), profiled on the reference interpreter, with (fake) numerics to colour by."""
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((64, 128), (128, 256), (256, 32))]
    trace = gx.explore(mlp, *args, pipeline=[WHY_PASS])
    w = trace.widget(prefetch=False)
    assert w.profile("reference", stage=1) is not None, w.profile_state
    taken = latest(trace)
    taken.numerics = SimpleNamespace(stages=[  # type: ignore[attr-defined]
        SimpleNamespace(name=s.name, nodes={n.id: SimpleNamespace(max_rel=10.0 ** -(2 + k % 7))
                                            for k, n in enumerate(s.graph.nodes)})
        for s in trace.stages])
    path = tmp_path / "why.html"
    w.to_html(path)
    return trace, path.as_uri()


def fills(page) -> list[str]:  # type: ignore[no-untyped-def]
    return page.evaluate("""() => [...document.querySelectorAll('.gx-root g.node.gx-heat')]
        .map(g => getComputedStyle([...g.querySelectorAll('path, polygon, ellipse')]
        .find(s => s.getAttribute('fill') !== 'none')).fill)""")


def test_a_saved_page_says_why(page, tmp_path) -> None:  # type: ignore[no-untyped-def]
    trace, url = saved_page(tmp_path)
    remarks = trace.stages[1].report.remarks
    top = next(r for r in remarks if not r.region)
    page.goto(url)
    root = page.locator(".gx-root")
    root.wait_for(timeout=10_000)
    assert "need a Jupyter kernel" in root.locator(".gx-live-only").inner_text()
    root.locator('.gx-chip[data-index="1"]').click()
    page.wait_for_function(
        "() => document.querySelectorAll('.gx-root .gx-pane-after .gx-missed-badge').length >= 3",
        timeout=10_000)
    # heat: graded to the hottest box, both panes, the slowest nodes ranked
    graded = fills(page)
    assert len(set(graded)) >= 4, graded
    assert root.locator(".gx-pane-after .gx-topnode").count() >= 3
    assert root.locator(".gx-pane-before .gx-topnode").count() >= 3
    assert "hottest box" in root.locator(".gx-overlay-scale").inner_text()
    shot(page, "41-saved-heat-graded-top-outlined-missed-marked")

    # select the node of the top-level remark: the why tab gives its reason
    root.locator(f".gx-pane-after g.gx_n{top.nodes[0]} text").first.click()
    root.locator('[data-tab="why"]').click()
    why = root.locator(".gx-tabbody .gx-why")
    why.wait_for(timeout=5_000)
    assert top.reason in why.inner_text() and "why:" in why.inner_text()
    assert why.locator("tr.gx-remark").count() == 1
    root.locator(".gx-tabbody").scroll_into_view_if_needed()
    shot(page, "42-saved-why-selected-node")
    why.locator(".gx-remark-line").click()  # the line, in the source panel
    page.wait_for_function("loc => document.querySelector('.gx-root .gx-src-selected')?.dataset.loc === loc",
                           arg=top.source, timeout=5_000)
    why.locator(".gx-why-all").click()  # every remark of the stage, the loop body's included
    page.wait_for_function("n => document.querySelectorAll('.gx-root .gx-tabbody tr.gx-remark').length === n",
                           arg=len(remarks), timeout=5_000)
    assert any(r.region in why.inner_text() for r in remarks if r.region)

    # the markers can go; the log scale and colouring by error redraw the boxes
    root.locator(".gx-missed-toggle input").uncheck()
    page.wait_for_function("() => !document.querySelector('.gx-root .gx-missed-badge')", timeout=5_000)
    root.locator(".gx-missed-toggle input").check()
    root.locator(".gx-heat-scale").select_option("log")
    page.wait_for_function(
        "() => document.querySelector('.gx-root .gx-overlay-scale')?.textContent.startsWith('log')",
        timeout=5_000)
    assert fills(page) != graded
    page.evaluate("() => window.scrollTo(0, 0)")
    shot(page, "43-saved-heat-log")
    root.locator(".gx-colour-by").select_option("error")
    page.wait_for_function(
        "() => document.querySelector('.gx-root .gx-overlay-scale')?.textContent.includes('largest')",
        timeout=5_000)
    assert root.locator(".gx-topnode").count() == 0 and len(set(fills(page))) >= 3
    shot(page, "44-saved-coloured-by-error")
    assert not page.errors, page.errors
