"""What the widget has measured (explorer/view/measured.py): where a stage's time goes
(issue 25). A profile taken from the widget or in Python becomes the graphs' heat overlay
(per-box sums in the front end, over the views' `*_groups`), the roofline and memory tabs,
and survives into an exported page; reproducer scripts are sent to the front end to save."""

import pytest

import explorer as gx
from explorer.measure.latest import latest
from explorer.view.export import export_data, page_data
from explorer.view.measured import reproducer_filename
from explorer.view.payload import stage_view
from explorer.view.schema import (
    ExportData,
    ProfileData,
    ProfileMessage,
    ReproducerFile,
    ReproducerMessage,
    RooflineData,
    TimelineData,
    Traits,
    problems,
)
from explorer.view.widget import profile_default
from tests.view.test_schema import synced


@pytest.fixture(autouse=True)
def no_profiles_yet(toy_trace):
    """Each test starts from a trace with no profile taken (measure/latest.py keeps the
    latest per trace)."""
    taken = latest(toy_trace)
    taken.profile = taken.roofline = taken.timeline = None
    yield
    taken.profile = taken.roofline = taken.timeline = None


def test_a_profile_from_the_widget_covers_the_stage_and_the_one_before(toy_trace):
    w = toy_trace.widget(repeats=1)
    w.index = 3
    states = []
    w.observe(lambda ch: states.append(dict(ch["new"])), names="profile_state")
    prof = w.profile("reference")
    assert prof is not None and prof.stage_index == 3 and prof.backend == "reference"
    assert [p["stage"] for p in w.profiles] == [2, 3]
    assert [r["stage"] for r in w.rooflines] == [3] and [t["stage"] for t in w.timelines] == [3]
    assert latest(toy_trace).profile is prof  # the stage shown, not the one before it
    # progress, one state per measurement, then what was measured
    assert [s["running"] for s in states] == [True, True, True, False]
    assert "(1/3)" in states[0]["message"] and "stage 2 nothing" in states[0]["message"]
    assert states[-1]["error"] == "" and "profiled stage 3" in states[-1]["message"]
    assert problems(synced(w), Traits) == []
    # every timed node is a top-level node of its stage: the front end colours n<id>
    for p in w.profiles:
        graph = toy_trace.stages[p["stage"]].graph
        assert {r["node"] for r in p["rows"]} <= {n.id for n in graph.nodes}
    assert problems(w.profiles, list[ProfileData]) == []
    assert problems(w.rooflines, list[RooflineData]) == []
    assert problems(w.timelines, list[TimelineData]) == []
    # a profile of another stage adds to them; of the same stage, replaces it
    w.index = 4
    w.profile("reference")
    assert [p["stage"] for p in w.profiles] == [2, 3, 4]
    assert [r["stage"] for r in w.rooflines] == [3, 4]


def test_a_backend_that_cannot_run_here_says_why_in_the_widget(toy_trace):
    from explorer.backends import registry

    w = toy_trace.widget(repeats=1)
    missing = next((b for b in ("gpu", "dask", "cpu") if b not in registry.available()), None)
    for name in ("no-such-backend",) + ((missing,) if missing else ()):
        try:
            registry.get(name)
        except registry.BackendError as e:
            reason = str(e)
        assert w.profile(name) is None
        assert w.profile_state == {"running": False, "message": "", "error": reason}
        assert w.profiles == [] and w.rooflines == [] and w.timelines == []


def test_profile_and_reproducer_messages_from_the_front_end(toy_trace):
    w = toy_trace.widget(repeats=1)
    sent = []
    w.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    msg = {"type": "profile", "backend": "reference", "stage": 1}
    assert problems(msg, ProfileMessage) == []
    w._on_message(w, msg, [])
    assert [p["stage"] for p in w.profiles] == [0, 1] and w.profile_state["error"] == ""
    asked = {"type": "reproducer", "stage": 3, "kernel": "fused"}
    assert problems(asked, ReproducerMessage) == []
    w._on_message(w, asked, [])
    [reply] = sent
    assert problems(reply, ReproducerFile) == []
    assert reply["filename"] == "prog_stage3_fuse-elementwise_fused.py"
    assert reply["error"] == "" and "fused" in reply["text"]
    w._on_message(w, {"type": "reproducer", "stage": 3, "kernel": 999}, [])  # no such kernel
    assert sent[-1]["error"] and sent[-1]["text"] == ""


def test_reproducer_files_name_the_function_stage_and_kernel(toy_trace):
    assert reproducer_filename(toy_trace, 0) == "prog_stage0_traced.py"  # "prog<&>"
    assert reproducer_filename(toy_trace, 3, "fused") == "prog_stage3_fuse-elementwise_fused.py"
    assert reproducer_filename(toy_trace, 3, 9) == "prog_stage3_fuse-elementwise_fused.py"
    assert reproducer_filename(toy_trace, 3, 7) == "prog_stage3_fuse-elementwise_node7.py"


def test_the_stage_reproducer_runs_and_checks(toy_trace, tmp_path):
    import subprocess
    import sys

    w = toy_trace.widget()
    reply = w.reproducer(3, backend="reference")
    assert reply["error"] == "", reply["error"]
    path = tmp_path / reply["filename"]
    path.write_text(reply["text"])
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stdout + done.stderr


def test_a_widget_shows_the_profile_taken_in_python(toy_trace):
    trace = toy_trace
    trace.profile(stage=3, backend="reference", repeats=1)
    trace.memory_timeline(stage=3, backend="reference")
    w = trace.widget()
    assert [p["stage"] for p in w.profiles] == [3] and w.rooflines == []
    assert [t["stage"] for t in w.timelines] == [3]
    assert w.show_heat is True


def test_views_list_the_nodes_of_every_group_they_draw():
    from explorer.examples import mlp_attention_grad

    fn, args = mlp_attention_grad(2)
    trace = gx.explore(fn, *args, pipeline=[])
    view = stage_view(trace, 0, max_nodes=12)
    groups = view["after_groups"]
    assert groups and all(f"gx_{key} " in view["after_svg"] or f"gx_{key}\"" in view["after_svg"]
                          for key in groups)
    ids = {n.id for n in trace.stages[0].graph.nodes}
    assert all(set(members) <= ids for members in groups.values())
    # every node is drawn by exactly one box: its own, or a closed group's
    closed = [k for k in groups if f'class="node gx_{k} ' in view["after_svg"]]
    boxed = [i for k in closed for i in groups[k]]
    own = {int(k[1:]) for k in view["after_lines"] if k[1:].isdigit()}
    assert len(boxed) == len(set(boxed)) and not own & set(boxed)


def test_an_exported_page_keeps_the_last_profile_roofline_and_timeline(toy_trace, tmp_path):
    trace = toy_trace
    assert export_data(trace)["state"]["profiles"] == []
    trace.profile(stage=4, backend="reference", repeats=1)
    trace.roofline(stage=4, backend="reference", repeats=1)
    trace.memory_timeline(stage=4, backend="reference")
    path = tmp_path / "p.html"
    trace.to_html(path)
    state = page_data(path.read_text())["state"]
    assert [x["stage"] for x in state["profiles"]] == [4]
    assert [x["stage"] for x in state["rooflines"]] == [4]
    assert [x["stage"] for x in state["timelines"]] == [4]
    assert state["show_heat"] is True
    assert problems(page_data(path.read_text()), ExportData) == []
    # a widget's page keeps all of its profiles
    w = trace.widget(repeats=1)
    w.profile("reference", stage=2)
    w.to_html(path)
    state = page_data(path.read_text())["state"]
    assert [x["stage"] for x in state["profiles"]] == [1, 2, 4]
    assert [x["stage"] for x in state["rooflines"]] == [2, 4]


@pytest.mark.parametrize("chosen, backends, want", [
    ("reference", ["reference", "cpu", "jax"], "cpu"),
    ("jax", ["reference", "cpu", "jax"], "jax"),
    ("reference", ["reference"], "reference"),
    ("gpu", ["reference", "jax"], "reference"),
    ("cpu", [], "cpu"),
])
def test_the_first_profile_runs_on_generated_code(chosen, backends, want):
    assert profile_default(chosen, backends) == want
