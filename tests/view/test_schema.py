"""The payload schema (explorer/view/schema.py): the front end's generated types are current,
and what Python builds for a real trace fits the declarations, key for key."""

from typing import get_args

import anywidget
import pytest

from explorer.view import schema, schema_typescript
from explorer.view.export import export_data
from explorer.view.schema import ExportData, RunMessage, RunRow, RunState, StageView, Traits, fields, problems


def test_the_committed_typescript_is_what_the_schema_generates():
    assert schema_typescript.TS_FILE.read_text(encoding="utf-8") == schema_typescript.typescript(), (
        "extension/src/schema.gen.ts is stale: run `python -m explorer.view.schema_typescript`, then "
        "`npm run build` in extension/, and commit both")


def synced(widget: anywidget.AnyWidget) -> dict:
    """The traits the widget sends, less anywidget's own (ipywidgets' and the private ones)."""
    own = set(anywidget.AnyWidget.class_trait_names(sync=True))
    return {k: getattr(widget, k) for k in widget.trait_names(sync=True)
            if k not in own and not k.startswith("_")}


def test_every_trait_of_every_stage_fits_the_schema(toy_trace):
    w = toy_trace.widget()
    assert set(synced(w)) == set(fields(Traits))
    for k in range(len(toy_trace.stages)):
        w.index = k
        assert problems(synced(w), Traits) == [], k


def test_runs_and_their_progress_fit_the_schema(toy_trace):
    w = toy_trace.widget(repeats=1)
    states = []
    w.observe(lambda ch: states.append(ch["new"]), names="run_state")
    rows = w.run(["reference", "no-such-backend"], stage=1)  # baselines, a run, a failed run
    assert {r["kind"] for r in rows} == {"baseline", "stage"} and rows[-1]["error"]
    assert problems(rows, list[RunRow]) == []
    assert problems(states, list[RunState]) == [] and len(states) == len(rows) + 1
    assert problems(synced(w), Traits) == []


def test_an_exported_page_fits_the_schema(toy_trace):
    w = toy_trace.widget(repeats=1)
    w.run(["reference"], stage=2, baselines=["numpy"])
    data = export_data(toy_trace, runs=w.runs, run_rows=list(w.run_rows))
    assert len(data["views"]) == len(toy_trace.stages) and data["state"]["run_rows"]
    assert problems(data, ExportData) == []


def test_the_run_message_the_front_end_sends():
    sent = {"type": "run", "backends": ["reference"], "baselines": True, "stage": 1}
    assert problems(sent, RunMessage) == []
    assert problems({"type": "run"}, RunMessage) == []  # the widget's choices fill in the rest
    assert problems({"type": "stop"}, RunMessage) == ["payload.type: 'stop' is not \"run\""]


def test_the_choices_the_front_end_writes_are_traits():
    assert set(get_args(schema.Choice)) < set(fields(Traits))
    assert set(schema.DEFAULTS) < set(fields(Traits))


@pytest.mark.parametrize("bad, says", [
    ({**{k: "" for k in fields(StageView)}, "extra": 1}, "payload: undeclared key 'extra'"),
    ({}, "payload: missing key 'before_svg'"),
    ({"before_words": {"n1": 3}}, "payload.before_words.n1: 3 is not string"),
    ({"ir_diff": [["equal", 1, "a", 1]]}, "payload.ir_diff[0]: ['equal', 1, 'a', 1] is not"),
    ({"ir_diff": [["same", 1, "a", 1, "a"]]}, "payload.ir_diff[0][0]: 'same' is not"),
    ({"cost": {"prev": None, "flops": True}}, "payload.cost.flops: True is not number"),
])
def test_problems_name_the_path_of_what_does_not_fit(bad, says):
    assert any(p.startswith(says) for p in problems(bad, StageView)), problems(bad, StageView)
