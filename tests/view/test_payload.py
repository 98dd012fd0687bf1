"""The payload's remarks (the why tab, the missed markers) and the nodes' errors (colouring by
error), as explorer/view/payload.py builds them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from explorer.measure.latest import latest
from explorer.view.payload import error_data, overlay_state, remarks_at, stage_view
from explorer.view.schema import ErrorsData, RemarkRow, problems
from tests.view.viewdata import SCALED_LINE


def test_the_stage_view_carries_its_passes_remarks(remark_trace):
    assert stage_view(remark_trace, 0)["remarks"] == []  # the traced stage: no pass ran
    rows = stage_view(remark_trace, 1)["remarks"]
    report = remark_trace.stages[1].report.remarks
    assert len(rows) == len(report) == 2 and problems(rows, list[RemarkRow]) == []
    for row, r in zip(rows, report):
        assert {k: row[k] for k in r.to_json()} == r.to_json()  # Remark.to_json(), as is
    top = next(r for r in rows if not r["region"])
    assert top["kind"] == "missed" and top["pass"] == "why-demo" and top["rule"] == "mul-by-one"
    assert top["source"].endswith(f":{SCALED_LINE}") and top["line_text"] == "y = x * 3.0"
    assert top["before_keys"] == top["after_keys"] == [f"n{top['nodes'][0]}"]


def test_a_remark_in_a_body_is_listed_under_its_regions_node(remark_trace):
    rows = stage_view(remark_trace, 1)["remarks"]
    inner = next(r for r in rows if r["region"])
    loop = int(inner["region"].split(".")[0][1:])  # "%4.body" -> 4
    assert remark_trace.stages[1].graph[loop].attrs.get("body") is not None
    assert f"n{loop}" in inner["after_keys"]  # the region's node
    assert "lambda i, c: c * 2.0" in inner["line_text"]
    # the region drawn closed: its box stands for the body's node too
    closed = stage_view(remark_trace, 1, opened={f"n{loop}": False})["remarks"]
    assert next(r for r in closed if r["region"])["after_keys"] == [f"n{loop}"]


def test_why_lists_a_boxes_remarks_or_all(remark_trace):
    rows = stage_view(remark_trace, 1)["remarks"]
    inner = next(r for r in rows if r["region"])
    loop = inner["after_keys"][0]
    assert remarks_at(rows, "") == rows
    assert remarks_at(rows, loop) == [inner]
    assert remarks_at(rows, "n0") == []  # the input: nothing to say


@dataclass
class NodeError:
    max_rel: float
    max_ulps: float = 0.0


@dataclass
class StageErrors:
    name: str
    nodes: dict[int, NodeError] = field(default_factory=dict)


@dataclass
class FakeNumerics:  # the shape of explorer/measure/numerics.py's Numerics, duck-typed
    stages: list[StageErrors]


@pytest.fixture
def with_numerics(remark_trace):
    names = [s.name for s in remark_trace.stages]
    fake = FakeNumerics([StageErrors(names[0], {2: NodeError(3e-8), 3: NodeError(math.inf)}),
                         StageErrors(names[1], {2: NodeError(1.5e-7)})])
    taken = latest(remark_trace)
    taken.numerics = fake  # type: ignore[attr-defined]
    yield fake
    del taken.numerics  # type: ignore[attr-defined]


def test_no_errors_before_numerics_were_taken(remark_trace):
    assert error_data(remark_trace) == []
    assert overlay_state(remark_trace) == {"heat_scale": "hottest", "colour_by": "time",
                                           "show_missed": True, "selected_node": "",
                                           "errors": []}


def test_errors_carry_each_nodes_max_rel_per_stage(remark_trace, with_numerics):
    errors = error_data(remark_trace)
    assert problems(errors, list[ErrorsData]) == []
    assert errors == [{"stage": 0, "stage_name": "traced", "nodes": {"2": 3e-8, "3": None}},
                      {"stage": 1, "stage_name": "why-demo", "nodes": {"2": 1.5e-7}}]
    with_numerics.stages[1].name = "another-pass"  # numerics of a pipeline since changed
    assert [e["stage"] for e in error_data(remark_trace)] == [0]
