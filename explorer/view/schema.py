"""The widget's payload schema, declared once: every trait Python sends the front end, every
message the front end sends back, and the data an exported page inlines.

The front end's types are generated from these declarations:
`python -m explorer.view.schema_typescript` writes extension/src/schema.gen.ts (committed; a
test checks that it is what the declarations generate). `problems(value, tp)` lists what in a
payload does not fit its declaration.

The declarations use JSON's types: str, int, float, bool, None, Literal, unions, list[X],
tuple[...] (a fixed-length array), dict[str, X], TypedDicts (NotRequired for keys that may be
absent) and Partial[T] (any of a TypedDict's keys). Every public TypedDict and capitalised alias
in this module becomes a TypeScript declaration of the same name, in the same order, with the
class's docstring or the comment above the alias as its doc comment.
"""

import json
import reprlib
import sys
import types
from typing import Any, Generic, Literal, TypeVar, Union, get_args, get_origin

from typing_extensions import NotRequired, TypedDict, get_type_hints, is_typeddict

T = TypeVar("T")


class Partial(Generic[T]):
    """Any of a TypedDict's keys (TypeScript's Partial<T>): a state that may leave keys out."""


# ------------------------------------------------------------ one stage's view


class StageSummary(TypedDict):
    """One stage as the bar of stage chips shows it; `changed` is true for the traced stage.
    `steppable`: its pass is rule-driven and fired, so it can be stepped firing by firing."""

    index: int
    name: str
    changed: bool
    nodes: int
    rewrites: int
    steppable: bool
    flops: int
    bytes: int
    peak_bytes: int


# How a row of the IR diff differs between the two stages.
DiffTag = Literal["equal", "delete", "insert", "replace", "skip"]
# A row of the IR diff: tag, left line number, left text, right line number, right text.
# A "skip" row folds unchanged lines away; its left text says how many.
DiffRow = tuple[DiffTag, int | None, str, int | None, str]


class DiffCounts(TypedDict):
    """Nodes added, removed and changed by the stage."""

    added: int
    removed: int
    changed: int


class RewriteRow(TypedDict):
    """A rewrite the stage's pass made: node ids before and after, where in the user's source
    it comes from, the body it fired in (`region`: "" for the graph itself, else a path such
    as "%7.body"), and the graph elements (`*_keys`) to highlight when it is picked."""

    rule: str
    before: list[int]
    after: list[int]
    source: str
    line_text: str
    region: str
    before_keys: list[str]
    after_keys: list[str]


RemarkRow = TypedDict("RemarkRow", {  # "pass" is a keyword: the functional form
    "pass": str, "kind": Literal["missed", "analysis"], "rule": str, "reason": str,
    "nodes": list[int], "source": str | None, "region": str, "line_text": str,
    "before_keys": list[str], "after_keys": list[str]})
RemarkRow.__doc__ = """A remark of the stage's pass (Remark.to_json(), explorer/ir/remarks.py),
with its line's text and the boxes (`*_keys`) drawing its nodes; a remark in a body is listed
under its region's node too."""


class CostNumbers(TypedDict):
    """FLOPs, bytes moved and the planned peak of live temporaries."""

    flops: int
    bytes: int
    peak_bytes: int


class CostView(CostNumbers):
    """The cost tab: this stage's numbers, the previous stage's (null for the traced one), and
    the planned bytes at each step of the schedule (live buffers plus the step's workspace and
    loop or region body): its maximum is `peak_bytes`, the same computation. A sharded stage
    (null otherwise) runs on `devices` devices, one of which holds `device_peak_bytes` at its
    planned peak (MemoryPlan.per_device_peak); `per_device_limit`: the memory limit is one
    device's."""

    prev: CostNumbers | None
    timeline: list[int]
    peak_node: int | None
    memory_limit: int | None
    nodes: int
    devices: int | None
    device_peak_bytes: int | None
    per_device_limit: bool


class StageView(TypedDict):
    """Everything shown for one stage against the stage before it; `*_words` map a graph
    element's key to the words a search matches, `*_lines` to the source lines ("file:line")
    of the nodes it draws, `*_groups` a group's key (closed or open) to the ids of the graph's
    own nodes inside it (a box `n<id>` draws node %id; region bodies' nodes are not listed).
`remarks` are the stage's pass's (stage.report.remarks; none for the traced stage).
    `stage` is the index of the stage shown: while it differs from the chosen index the front
    end shows that it is loading. `shown_firing` is the firing shown (k >= 1: the graph before
    and after the pass's k-th firing; -1: the whole pass)."""

    stage: int
    shown_firing: int
    before_svg: str
    after_svg: str
    before_words: dict[str, str]
    after_words: dict[str, str]
    before_lines: dict[str, list[str]]
    after_lines: dict[str, list[str]]
    before_groups: dict[str, list[int]]
    after_groups: dict[str, list[int]]
    diff_counts: DiffCounts
    note: str
    ir_diff: list[DiffRow]
    rewrites: list[RewriteRow]
    remarks: list[RemarkRow]
    cost: CostView


class SourceLine(TypedDict):
    """A row of the source panel: a "file" heading (its name in `text`), a "line" (`loc` is
    "file:line", as nodes name it; `used` when nodes of the traced program come from it) or a
    "fold" of lines left out (how many, in `text`)."""

    kind: Literal["file", "line", "fold"]
    loc: str
    line: int
    text: str
    used: bool


# ------------------------------------------------------------ runs


class RunRow(TypedDict):
    """One measured run, a baseline or a stage on a backend. `seconds` is the median;
    `peak_bytes` is null where the runtime cannot tell; `ok` is null where there were no values
    to check; `error` says why the run could not happen, and is empty when it did."""

    key: str
    kind: Literal["baseline", "stage"]
    label: str
    stage: int | None
    backend: str
    seconds: float | None
    min_seconds: float | None
    repeats: int
    peak_bytes: int | None
    peak_how: str
    check: str
    ok: bool | None
    error: str
    workers: int  # a distributed run: how many workers ran its tasks (0 otherwise)
    dashboard: str  # a distributed run: its cluster's dashboard link ("" otherwise)
    devices: int | None  # a sharded run whose peak_bytes is one device's: over how many


class RunState(TypedDict):
    """Progress of the runs under way; `pending` are the labels of the runs still to come, the
    first one running now."""

    running: bool
    done: int
    total: int
    message: str
    pending: list[str]


class KernelRow(TypedDict):
    """A kernel a backend generated for the stage's latest run on it."""

    backend: str
    name: str
    source: str
    seconds: float


# ------------------------------------------------------------ profiles, rooflines, memory


class ProfileRowData(TypedDict):
    """One top-level node of a profiled stage (explorer/measure/profile.py): `seconds` in the
    profile's median run (its total's run: node times and total add up); `gflops` and `gbs` are
    null where it did no arithmetic, moved nothing or took no measurable time. A region is timed
    whole where its body is generated, its body's nodes apart where the interpreter core runs
    it (`timed`)."""

    node: int
    name: str
    kind: Literal["kernel", "dot", "loop", "op"]
    op: str
    source: str
    flops: int
    bytes: int
    seconds: float
    calls: int
    gflops: float | None
    gbs: float | None
    timed: NotRequired[str]  # a region: "apart" (its body's nodes timed) or "whole"; else ""
    place: NotRequired[str]  # a node inside a region's body: the body ("loop_12/"); else ""


class ProfileData(TypedDict):
    """trace.profile(): where one stage's time goes on one backend (Profile.to_data()). `total`
    is the median profiled run's seconds (the rows' seconds plus `outside`), `unprofiled` a bare
    run's."""

    stage: int
    stage_name: str
    backend: str
    total: float
    unprofiled: float
    repeats: int
    notes: list[str]
    rows: list[ProfileRowData]
    outside: NotRequired[float]  # seconds of the run outside every node (total = rows + this)
    totals: NotRequired[list[float]]  # every profiled run's seconds
    spread: NotRequired[float]  # (max - min) / median of `totals`
    noisy: NotRequired[bool]  # the repeats varied more than the figures can resolve
    inner: NotRequired[list[ProfileRowData]]  # nodes inside regions timed apart (with `place`)


class PeaksData(TypedDict):
    """This machine's measured peaks: FLOP/s of a BLAS matrix product, bytes/s of a triad."""

    machine: str
    flops: float
    bandwidth: float
    how: str
    measured_at: str


class RooflinePoint(TypedDict):
    """A kernel, dot or loop of the stage, or jax.jit's whole program ("xla"): `intensity` is
    FLOPs per byte, `rate` FLOP/s, `bandwidth` bytes/s, `bound` the roof above it (FLOP/s);
    null where it did no arithmetic or took no measurable time."""

    name: str
    kind: Literal["kernel", "dot", "loop", "xla"]
    node: int | None
    source: str
    flops: int
    bytes: int
    seconds: float
    intensity: float | None
    rate: float | None
    bandwidth: float | None
    bound: float | None
    above: NotRequired[bool]  # above the roof, even after measuring the peaks again


class RooflineData(TypedDict):
    """trace.roofline(): a stage's points under the machine's peaks (Roofline.to_data())."""

    stage: int
    stage_name: str
    backend: str
    peaks: PeaksData
    points: list[RooflinePoint]
    xla: RooflinePoint | None
    notes: list[str]
    above_roof: NotRequired[bool]  # some point is above the roof (see the points' `above`)
    remeasured: NotRequired[bool]  # the peaks were measured again for this roofline


# A step of a memory timeline: node, op, source line, planned live bytes after it, planned
# bytes at it (with its workspace), measured live bytes after it and measured peak while it ran
# (null where not measured).
TimelineStep = tuple[int, str, str, int, int, int | None, int | None]
# A temporary buffer: node, op, source line, bytes, first step, last step that reads it.
TimelineBuffer = tuple[int, str, str, int, int, int]


class TimelineData(TypedDict):
    """trace.memory_timeline(): planned and measured bytes along a stage's schedule and each
    temporary buffer's lifetime (MemoryTimeline.to_data()); `peak_step` is the planned peak's."""

    stage: int
    stage_name: str
    backend: str
    steps: list[TimelineStep]
    buffers: list[TimelineBuffer]
    planned_peak: int
    peak_step: int | None
    measured_peak: int | None
    measured_peak_step: int | None
    memory_limit: int | None
    peak_how: str
    notes: list[str]


class ErrorsData(TypedDict):
    """A stage's nodes' own error against float64 (trace.numerics(), explorer/measure/
    numerics.py): node id -> its largest relative error, null where it is not finite."""

    stage: int
    stage_name: str
    nodes: dict[str, float | None]


class ProfileState(TypedDict):
    """Progress of a profile under way (`message`), or why it could not run (`error`)."""

    running: bool
    message: str
    error: str


# ------------------------------------------------------------ the widget


class WhatIf(TypedDict):
    """The what-if outcome (read-only; view/whatif.py): the plan shown (`limit`: null for
    none; its final stage's `planned_peak`; split loops' iterations by node id), the limits
    the split can meet (`smallest_limit`, needed by `needed_by`, to `unsplit_limit`; null
    until found), why a change was refused (`error`), what Python is doing (`working`), and
    the plan's latest run (`measured`: stage and backend; null before one)."""

    limit: int | None
    planned_peak: int
    chunks: dict[str, int]
    smallest_limit: int | None
    unsplit_limit: int | None
    needed_by: str
    error: str
    working: str
    measured: str
    measured_peak: int | None
    seconds: float | None


# The tabs below the graphs.
Tab = Literal["diff", "rewrites", "why", "cost", "kernels", "run", "roofline", "memory"]
# What the graphs' overlay colours boxes by: the profile's times, or the nodes' numerical error.
ColourBy = Literal["time", "error"]
# How time maps onto the heat ramp: up to the stage's hottest box, or 3 decades below it (log).
HeatScale = Literal["hottest", "log"]


class WidgetState(TypedDict):
    """The widget's traits other than the current stage's view. `opened` holds the user's
    choices of graph groups and regions to open (true) or close (false), by element key.
    `firing` is the firing of the stage's pass to show (-1: the whole pass); `source` the
    user's lines, `selected_line` the one picked ("file:line"), `show_source` its panel.
    `profiles`, `rooflines` and `timelines` hold the latest of each taken, one per stage at
    most; `show_heat` colours the graphs by the profiles' times (`colour_by` "time", scaled
    per `heat_scale`, the top nodes outlined) or by the nodes' error (`errors`, one per stage
    from trace.numerics()), `profile_backend` is the backend the next profile runs on.
    `selected_node` is the box picked ("" none): the why tab lists its remarks, else the
    stage's; `show_missed` marks the boxes of nodes with a missed remark."""

    title: str
    stages: list[StageSummary]
    index: int
    firing: int
    source: list[SourceLine]
    selected_line: str
    show_source: bool
    hide_unchanged: bool
    search: str
    tab: Tab
    selected_rewrite: int
    sync_panes: bool
    opened: dict[str, bool]
    backends: list[str]
    run_backends: list[str]
    run_baselines: bool
    run_rows: list[RunRow]
    run_state: RunState
    kernels: list[KernelRow]
    profiles: list[ProfileData]
    rooflines: list[RooflineData]
    timelines: list[TimelineData]
    show_heat: bool
    heat_scale: HeatScale
    colour_by: ColourBy
    errors: list[ErrorsData]
    selected_node: str
    show_missed: bool
    profile_backend: str
    profile_state: ProfileState
    interactive: bool
    memory_limit: str  # the what-if limit: "" (none), "16MiB" or bytes
    pipeline: list[str]  # the what-if pipeline: pass names or specs, as explore() takes them
    pass_names: list[str]  # the registered passes, user passes included
    whatif: WhatIf


class Traits(WidgetState, StageView):
    """Every trait the widget syncs: the state and the current stage's view."""


# The traits the front end writes back: the user's choices. Python owns all the others.
Choice = Literal["index", "firing", "hide_unchanged", "search", "selected_rewrite", "tab",
                 "sync_panes", "opened", "selected_line", "show_source", "run_backends",
                 "run_baselines", "show_heat", "profile_backend", "heat_scale", "colour_by",
                 "selected_node", "show_missed", "memory_limit", "pipeline"]


class RunMessage(TypedDict):
    """The front end asks for runs; a key left out means the widget's current choice."""

    type: Literal["run"]
    backends: NotRequired[list[str]]
    baselines: NotRequired[bool]
    stage: NotRequired[int]


class ProfileMessage(TypedDict):
    """The front end asks for a profile of a stage (default: the one shown) and of the stage
    before it, with the stage's roofline and memory timeline, on `backend` (default: the
    widget's profile_backend)."""

    type: Literal["profile"]
    backend: NotRequired[str]
    stage: NotRequired[int]


class WhatIfMessage(TypedDict):
    """The front end's what-if panel opened: find the limits the split can meet."""

    type: Literal["whatif"]


class ReproducerMessage(TypedDict):
    """The front end asks for a stage's reproducer script, or one kernel's (its node id or
    name); Python answers with a ReproducerFile message."""

    type: Literal["reproducer"]
    stage: int
    kernel: NotRequired[int | str]


class ReproducerFile(TypedDict):
    """A reproducer to save as `filename` (a .py naming the function, the stage and the
    kernel), or why there is none (`error`)."""

    type: Literal["reproducer"]
    filename: str
    text: str
    error: str


IDLE = RunState(running=False, done=0, total=0, message="", pending=[])
# The traits' starting values where the type's zero ("", 0, False, [], {}) is not it.
DEFAULTS: dict[str, Any] = {"tab": "diff", "selected_rewrite": -1, "sync_panes": True,
                            "firing": -1, "show_source": True,
                            "run_baselines": True, "interactive": True, "run_state": IDLE,
                            "show_heat": True, "heat_scale": "hottest", "colour_by": "time",
                            "show_missed": True,
                            "profile_state": ProfileState(running=False, message="", error="")}


# ------------------------------------------------------------ exported pages


class ExportView(StageView):
    """One stage of an exported page: its view and the kernels of its runs."""

    kernels: list[KernelRow]


class ExportData(TypedDict):
    """An exported page's data: the state to start from and every stage's view. Pictures
    drawn more than once are stored once: a view's `before_svg`/`after_svg` of the form
    "svg:N" stands for `svgs[N]`."""

    state: Partial[WidgetState]
    views: list[ExportView]
    svgs: NotRequired[list[str]]


# ------------------------------------------------------------ reading the declarations


def fields(tp: Any) -> dict[str, Any]:
    """A TypedDict's keys and their types, in declaration order."""
    return get_type_hints(tp)


def declarations() -> dict[str, Any]:
    """The public TypedDicts and aliases of this module by name, in declaration order."""
    return {name: v for name, v in vars(sys.modules[__name__]).items()
            if name[0].isupper()
            and (is_typeddict(v) or (get_origin(v) is not None and not isinstance(v, type)))}


def problems(value: Any, tp: Any, where: str = "payload") -> list[str]:
    """What in `value` does not fit the declared type `tp`: missing, undeclared or mistyped
    keys, each named by its path. Empty when it fits."""
    origin, args = get_origin(tp), get_args(tp)
    if is_typeddict(tp) or origin is Partial:
        decl = tp if origin is None else args[0]
        if not isinstance(value, dict):
            return _wrong(value, tp, where)
        hints = fields(decl)
        need = set() if origin is Partial else decl.__required_keys__
        out = [f"{where}: undeclared key {k!r}" for k in value if k not in hints]
        out += [f"{where}: missing key {k!r}" for k in hints if k in need and k not in value]
        for k, sub in hints.items():
            if k in value:
                out += problems(value[k], sub, f"{where}.{k}")
        return out
    if origin in (Union, types.UnionType):
        ok = any(not problems(value, a, where) for a in args)
    elif origin is Literal:
        ok = any(value == a and type(value) is type(a) for a in args)
    elif tp in (int, float):
        ok = not isinstance(value, bool) and isinstance(value, (int, float) if tp is float else int)
    elif tp in (str, bool, types.NoneType, None):
        ok = isinstance(value, tp or types.NoneType)
    elif origin in (list, tuple) and isinstance(value, (list, tuple)):
        items = args * len(value) if origin is list else args
        if len(items) != len(value):
            return _wrong(value, tp, where)
        return [p for k, (v, a) in enumerate(zip(value, items)) for p in problems(v, a, f"{where}[{k}]")]
    elif origin is dict and isinstance(value, dict):
        return [p for k, v in value.items()
                for p in problems(k, args[0], f"{where} key") + problems(v, args[1], f"{where}.{k}")]
    else:
        ok = False
    return [] if ok else _wrong(value, tp, where)


def _wrong(value: Any, tp: Any, where: str) -> list[str]:
    return [f"{where}: {reprlib.repr(value)} is not {typescript_type(tp)}"]


# ------------------------------------------------------------ TypeScript names of the types

_SCALARS = {str: "string", int: "number", float: "number", bool: "boolean", types.NoneType: "null",
            None: "null", Any: "unknown"}


def typescript_type(tp: Any, names: dict[str, Any] | None = None) -> str:
    """`tp` in TypeScript; a type declared by name in `names` is referred to by that name."""
    for name, decl in (names or {}).items():
        if tp is decl or (get_origin(tp) is not None and tp == decl):
            return name
    if tp in _SCALARS:
        return _SCALARS[tp]
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(typescript_type(a, names) for a in args)
    if origin is list:
        item = typescript_type(args[0], names)
        return f"({item})[]" if "|" in item else f"{item}[]"
    if origin is tuple:
        return "[" + ", ".join(typescript_type(a, names) for a in args) + "]"
    if origin is dict:
        return f"Record<{typescript_type(args[0], names)}, {typescript_type(args[1], names)}>"
    if origin is Partial:
        return f"Partial<{typescript_type(args[0], names)}>"
    if is_typeddict(tp):
        return tp.__name__
    raise TypeError(f"{tp!r} has no TypeScript form in the schema")
