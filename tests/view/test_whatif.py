"""The widget's what-if controls through their traits: a memory limit re-plans the split, an
infeasible or unreadable one is refused with the smallest limit and the node that needs it and
leaves the plan shown, pipeline edits recompute the stages, an unknown pass is refused with
the registered names, a user's pass is offered, and a saved page says the controls need a
kernel."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.passes.base import PassReport, RewritePass
from explorer.passes.split import smallest_limit
from explorer.trace import Stage
from explorer.view.export import export_data
from explorer.view.schema import WhatIf, problems
from explorer.view.whatif import limit_text, parse_limit, read_limit

R = np.random.default_rng(0)


def kernel_sum(x, y, b):
    d = jnp.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)  # the line the split needs
    k = jnp.exp(-d)
    return k @ b


LINE = "d = jnp.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)"


@pytest.fixture(scope="module")
def trace() -> gx.Trace:
    x, y, b = R.standard_normal((400, 3)), R.standard_normal((300, 3)), R.standard_normal((300, 2))
    return gx.explore(kernel_sum, x, y, b)


def names(w) -> list[str]:  # type: ignore[no-untyped-def]
    return [s["name"] for s in w.stages]


def test_starts_with_the_plan_shown(trace: gx.Trace) -> None:
    w = trace.widget(prefetch=False)
    assert w.memory_limit == ""
    assert w.pipeline == ["simplify", "cse", "recognize-dot", "euclidean-distance",
                          "dot-order", "simplify", "dce", "fuse"]
    assert set(w.pass_names) == set(gx.passes.names()) and "split" in w.pass_names
    assert problems(w.whatif, WhatIf) == []
    assert w.whatif["limit"] is None and w.whatif["chunks"] == {}
    assert w.whatif["planned_peak"] == trace.final.cost.peak_bytes
    assert w.whatif["error"] == ""


def test_a_memory_limit_replans_the_split(trace: gx.Trace) -> None:
    w = trace.widget(prefetch=False)
    w.index = len(w.stages) - 1  # the final stage: stays shown by name
    w.memory_limit = "256KiB"
    assert "split" in names(w) and names(w)[w.index] == "fuse"
    assert w.trace is not trace and w.trace.memory_limit == 256 * 1024
    big = w.whatif
    assert big["error"] == "" and big["limit"] == 256 * 1024
    assert big["chunks"] and big["planned_peak"] <= 256 * 1024
    w.memory_limit = "48KiB"
    small = w.whatif
    assert small["error"] == "" and small["planned_peak"] <= 48 * 1024
    assert sum(small["chunks"].values()) > sum(big["chunks"].values())  # more, smaller chunks
    assert w.cost["memory_limit"] == 48 * 1024  # the stage's view was drawn again
    # the range the slider spans: the smallest feasible limit, and where nothing is split,
    # found when asked (the panel opens)
    assert small["smallest_limit"] is None
    small = w.find_limits()
    pre = w.trace.stages[names(w).index("split") - 1].graph
    limits = smallest_limit(pre)
    assert small["smallest_limit"] == limits.smallest < 48 * 1024
    assert small["unsplit_limit"] == limits.unsplit > trace.final.cost.peak_bytes // 2
    assert LINE in small["needed_by"]
    # the stages before the split are the traced program's own, not planned again
    assert w.trace.stages[:6] == trace.stages[:6]
    w.memory_limit = ""
    assert "split" not in names(w) and w.whatif["chunks"] == {} and w.whatif["limit"] is None


def test_a_limit_given_to_the_widget_is_planned(trace: gx.Trace) -> None:
    w = trace.widget(prefetch=False, memory_limit="64KiB")
    assert "split" in names(w) and w.whatif["limit"] == 65536 and w.memory_limit == "64KiB"
    assert trace.memory_limit is None  # the trace it was given is as it was


def test_an_infeasible_limit_is_refused_with_the_smallest_and_its_node(trace: gx.Trace) -> None:
    w = trace.widget(prefetch=False)
    w.memory_limit = "64KiB"
    shown, stages, view = w.trace, list(w.stages), w.after_svg
    w.memory_limit = "4KiB"
    status = w.whatif
    smallest = status["smallest_limit"]
    assert smallest is not None and smallest > 4096
    assert f"{smallest:,} bytes" in status["error"] and "4,096 bytes" in status["error"]
    assert LINE in status["needed_by"] and status["needed_by"].split(" ")[0] in status["error"]
    # nothing half-planned: the plan, its stages and view and the trait are the earlier ones
    assert w.trace is shown and w.stages == stages and w.after_svg == view
    assert w.memory_limit == "64KiB" and status["limit"] == 65536
    # the smallest limit itself is feasible
    w.memory_limit = str(smallest)
    assert w.whatif["error"] == "" and w.whatif["planned_peak"] <= smallest


@pytest.mark.parametrize("text", ["lots", "-5MiB", "1.5"])
def test_an_unreadable_limit_is_refused(trace: gx.Trace, text: str) -> None:
    w = trace.widget(prefetch=False)
    w.memory_limit = text
    assert w.whatif["error"].startswith("memory_limit:") and repr(text) in w.whatif["error"]
    assert w.memory_limit == "" and w.trace is trace


def test_pipeline_edits_recompute_the_stages(trace: gx.Trace) -> None:
    w = trace.widget(prefetch=False)
    w.pipeline = ["dce", "simplify", "fuse"]
    assert names(w) == ["traced", "dce", "simplify", "fuse"] and w.whatif["error"] == ""
    assert w.trace.final.graph is not trace.final.graph
    w.pipeline = ["fuse", "simplify"]  # reordered
    assert names(w) == ["traced", "fuse", "simplify"]
    assert sum(n.op == "kernel" for n in w.trace.final.graph.nodes) > 0
    w.pipeline = ["simplify", "split{memory-limit=64KiB}"]  # a spec with an option
    assert names(w) == ["traced", "simplify", "split"] and w.whatif["chunks"]
    w.pipeline = []
    assert names(w) == ["traced"] and w.index == 0


def test_an_unknown_pass_is_refused_with_the_registered_names(trace: gx.Trace) -> None:
    w = trace.widget(prefetch=False)
    before = list(w.pipeline)
    w.pipeline = ["simplify", "fusee"]
    error = w.whatif["error"]
    assert "no pass named 'fusee'" in error and "did you mean 'fuse'" in error
    assert all(name in error for name in gx.passes.names())
    assert w.pipeline == before and w.trace is trace


def test_a_user_pass_is_offered_and_runs(trace: gx.Trace) -> None:
    gx.passes.register(RewritePass("my-nothing", []))
    try:
        w = trace.widget(prefetch=False)
        assert "my-nothing" in w.pass_names
        w.pipeline = ["simplify", "my-nothing", "dce"]
        assert names(w) == ["traced", "simplify", "my-nothing", "dce"]
    finally:
        gx.passes._REGISTRY.pop("my-nothing", None)


def test_the_panel_asks_for_the_limits_and_a_run_shows_the_measured_peak(trace: gx.Trace) -> None:
    w = trace.widget(prefetch=False)
    w._on_message(w, {"type": "whatif"}, [])  # the front end's panel opened
    assert w.whatif["smallest_limit"] is not None and w.whatif["unsplit_limit"] is not None
    w.memory_limit = "64KiB"
    w.run(["reference"], stage=len(w.stages) - 1, baselines=False)
    status = w.whatif
    assert status["measured"] == "fuse on reference" and status["seconds"] > 0
    assert status["measured_peak"] is not None and status["measured_peak"] <= 65536
    w.memory_limit = "96KiB"  # a new plan: the old plan's runs go
    assert w.whatif["measured"] == "" and w.run_rows == []


def test_a_widget_of_unregistered_passes_replans(toy_trace: gx.Trace) -> None:
    w = toy_trace.widget(prefetch=False)
    assert w.pipeline == ["mul-two-to-add", "nothing", "fuse-elementwise", "drop-unused"]
    w.memory_limit = "1MiB"
    assert w.whatif["error"] == "" and names(w)[-1] == "split"
    assert w.trace.stages[:5] == toy_trace.stages


def test_a_trace_of_xla_passes_is_not_replanned(trace: gx.Trace) -> None:
    xla = gx.Trace(trace.traced, [trace.stages[0], Stage("algsimp", trace.final.graph,
                                                         PassReport(changed=True))], ())
    w = xla.widget(prefetch=False)
    assert w.pipeline == [] and w.memory_limit == ""
    w.memory_limit = "64KiB"
    assert "algsimp were not made by passes here" in w.whatif["error"]
    assert w.trace is xla and w.memory_limit == ""


def test_a_saved_page_shows_the_plan_and_needs_a_kernel(trace: gx.Trace) -> None:
    state = export_data(trace.replanned(memory_limit="64KiB"))["state"]
    assert state["memory_limit"] == "64KiB" and "split" not in state["pipeline"]
    assert state["whatif"]["limit"] == 65536 and state["whatif"]["chunks"]
    assert problems(state["whatif"], WhatIf) == []


def test_limit_text_round_trips() -> None:
    for n in (None, 1, 1000, 1024, 65536, 3 * 2**20, 2**30 + 1):
        assert parse_limit(limit_text(n)) == n
    assert parse_limit("none") is None and parse_limit(" 16 MiB ") == 16 * 2**20
    assert read_limit(limit_text(65536, per_device=True)) == (65536, True)
    assert read_limit("16MiB per device") == (16 * 2**20, True) and read_limit("") == (None, False)


def test_a_limit_per_device_is_planned_and_shown_as_such(trace: gx.Trace) -> None:
    """`16MiB/device` in the text box: the plan bounds one device's share (the whole program,
    here, which runs on one device), and the box keeps saying per device."""
    w = trace.widget(prefetch=False)
    w.memory_limit = "64KiB/device"
    assert w.whatif["error"] == "" and "split" in names(w)
    assert w.trace.options.per_device and w.trace.memory_limit == 65536
    assert w.memory_limit == "64KiB/device" and w.whatif["planned_peak"] <= 65536
    w.memory_limit = "64KiB"
    assert not w.trace.options.per_device and w.memory_limit == "64KiB"
