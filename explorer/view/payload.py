"""What the front end shows, as plain JSON-able data: one summary per stage, and the full
view of one stage (graphs, IR diff, rewrites, cost), each built as its schema.py declaration.
The widget sends these as traits; the HTML export inlines them for every stage. Built once per
stage and cached by the caller.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..analysis.cost import Cost, graph_cost
from ..analysis.memory import plan
from ..ir.graph import Graph
from ..ir.remarks import Remark
from ..measure.latest import latest
from ..passes.base import Rewrite
from .diff import ir_diff
from .graphdiff import graph_diff
from .render import DEFAULT_MAX_NODES, Rendered, render, search_reveal
from .schema import (
    DEFAULTS,
    CostNumbers,
    CostView,
    DiffCounts,
    ErrorsData,
    RemarkRow,
    RewriteRow,
    StageSummary,
    StageView,
    fields,
)

if TYPE_CHECKING:
    from ..measure.protocol import TraceLike

# The per-stage keys: a model reads them from the current stage's view.
VIEW_KEYS = tuple(fields(StageView))


def stage_summaries(trace: TraceLike) -> list[StageSummary]:
    return [StageSummary(index=k, name=s.name, changed=bool(s.report.changed) or k == 0,
                         nodes=len(s.graph), rewrites=len(s.report.rewrites),
                         steppable=firings(trace, k) > 0, **_cost(s.cost))
            for k, s in enumerate(trace.stages)]


def firings(trace: TraceLike, index: int) -> int:
    """How many firings stage `index` can be stepped through (0: it steps as a whole)."""
    s = trace.stages[index]
    stepper = getattr(s.pass_, "after_firings", None)
    return len(s.report.rewrites) if index > 0 and stepper is not None else 0


def _graphs(trace: TraceLike, index: int, firing: int) -> tuple[Graph | None, Graph]:
    """The two graphs a view compares: the stage before and the stage, or the graphs just
    before and after the pass's `firing`-th firing (k >= 1)."""
    if firing >= 1:
        return trace.after_firing(index, firing - 1), trace.after_firing(index, firing)
    return (trace.stages[index - 1].graph if index > 0 else None), trace.stages[index].graph


def _cost(c: Cost) -> CostNumbers:
    return CostNumbers(flops=c.flops, bytes=c.bytes, peak_bytes=c.peak_bytes)


def cost_view(trace: TraceLike, index: int, firing: int = -1) -> CostView:
    """The cost tab of stage `index`, or of the graph after its `firing`-th firing (k >= 1)
    against the graph before that firing."""
    if firing >= 1:
        before, after = _graphs(trace, index, firing)
        cost, prev, mem = graph_cost(after), graph_cost(before), plan(after)  # type: ignore[arg-type]
        nodes = len(after)
    else:
        stage = trace.stages[index]
        cost, mem, nodes = stage.cost, stage.memory, len(stage.graph)
        prev = trace.stages[index - 1].cost if index > 0 else None
    return CostView(**_cost(cost), prev=_cost(prev) if prev is not None else None,
                    timeline=list(mem.steps), peak_node=mem.peak_node,
                    memory_limit=trace.memory_limit, nodes=nodes, devices=mem.devices,
                    device_peak_bytes=mem.per_device_peak,
                    per_device_limit=trace.options.per_device)


def _line_text(graphs: tuple[Graph, Graph], ids: tuple[Iterable[int], Iterable[int]],
               source: str | None, region: str) -> str:
    """The text of the line `source` ("file:line", of a rewrite's root or a remark's first
    node) names: taken from a node of `ids` (before, after) at that line, in the body `region`
    names, never from a neighbour's."""
    for graph, nodes in zip(graphs, ids):
        g = _graph_at(graph, region)
        for i in nodes if g is not None else ():
            src = g[i].source if i in g else None  # type: ignore[union-attr]
            if src is not None and (source is None or str(src) == source):
                return src.line_text
    return ""


_REGION_PART = re.compile(r"%(\d+)\.(\w+)(?:\[(\d+)\])?$")


def _graph_at(graph: Graph, region: str) -> Graph | None:
    """The body a Rewrite.region path ("%7.body/%3.branches[1]") names inside `graph` (the
    graph itself for "")."""
    for part in region.split("/") if region else ():
        m = _REGION_PART.match(part)
        if m is None:
            return None
        nid, attr, index = int(m.group(1)), m.group(2), m.group(3)
        body = graph[nid].attrs.get(attr) if nid in graph else None
        body = body[int(index)] if index is not None and isinstance(body, tuple) else body
        if not isinstance(body, Graph):
            return None
        graph = body
    return graph


def rewrite_rows(before: Graph | None, after: Graph, rewrites: Iterable[Rewrite],
                 rb: Rendered | None, ra: Rendered) -> list[RewriteRow]:
    graphs = (before or after, after)
    return [RewriteRow(rule=rw.rule, before=list(rw.before), after=list(rw.after),
                       source=rw.source or "",
                       line_text=_line_text(graphs, (rw.before, rw.after), rw.source, rw.region),
                       region=rw.region,
                       before_keys=rb.elements(rw.before, rw.region) if rb else [],
                       after_keys=ra.elements(rw.after, rw.region))
            for rw in rewrites]


def _region_heads(r: Rendered, region: str) -> list[str]:
    """The boxes of the region nodes a body path ("%7.body/%3.branches[1]") goes through: a
    remark inside a body is listed under its region's node."""
    parts = region.split("/") if region else []
    out: list[str] = []
    for k, part in enumerate(parts):
        m = _REGION_PART.match(part)
        if m is not None:
            out += r.elements([int(m.group(1))], "/".join(parts[:k]))
    return out


def remark_rows(before: Graph | None, after: Graph, remarks: Iterable[Remark],
                rb: Rendered | None, ra: Rendered) -> list[RemarkRow]:
    """The stage's remarks as the why tab and the markers read them (schema.RemarkRow)."""
    graphs = (before or after, after)
    out = []
    for m in remarks:
        keys = [sorted(set(r.elements(m.nodes, m.region) + _region_heads(r, m.region)))
                if r is not None else [] for r in (rb, ra)]
        row = {**m.to_json(), "line_text": _line_text(graphs, (m.nodes, m.nodes), m.source,
                                                       m.region),
               "before_keys": keys[0], "after_keys": keys[1]}
        out.append(RemarkRow(**row))  # type: ignore[typeddict-item]
    return out


def remarks_at(rows: Sequence[RemarkRow], key: str) -> list[RemarkRow]:
    """The remarks about the box `key` (in either pane; "": all of them): the why tab's list
    for the selected node."""
    return [r for r in rows if not key or key in r["before_keys"] or key in r["after_keys"]]


def _finite(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def error_data(trace: TraceLike) -> list[ErrorsData]:
    """Each stage's nodes' own error (max relative, against float64) from the trace's latest
    numerics (measure/latest.py; trace.numerics()), for colouring by error; none before one
    was taken. A stage of the numerics that names another pass (the trace changed since) is
    left out."""
    numerics = getattr(latest(trace), "numerics", None)
    out = []
    for k, (stage, ns) in enumerate(zip(trace.stages, getattr(numerics, "stages", None) or ())):
        if getattr(ns, "name", stage.name) != stage.name:
            continue
        nodes = getattr(ns, "nodes", None) or {}
        out.append(ErrorsData(stage=k, stage_name=stage.name,
                              nodes={str(i): _finite(getattr(e, "max_rel", e))
                                     for i, e in nodes.items()}))
    return out


def overlay_state(trace: TraceLike) -> dict[str, Any]:
    """The overlay's starting state (colouring, its scale, the missed markers, no selection)
    and the trace's errors: what a widget starts from and an exported page carries."""
    return {**{k: DEFAULTS[k] for k in ("heat_scale", "colour_by", "show_missed")},
            "selected_node": "", "errors": error_data(trace)}


def reveal_for(trace: TraceLike, index: int, query: str,
               firing: int = -1) -> tuple[frozenset[int], frozenset[int]]:
    """The nodes a search opens its way to in the before and after graphs of stage `index`
    (or of its `firing`-th firing)."""
    if not query.strip():
        return frozenset(), frozenset()
    before, after = _graphs(trace, index, firing)
    return (frozenset(search_reveal(before, query) if before is not None else ()),
            frozenset(search_reveal(after, query)))


def stage_view(trace: TraceLike, index: int, max_nodes: int = DEFAULT_MAX_NODES,
               opened: Mapping[str, bool] | None = None,
               reveal: tuple[Iterable[int], Iterable[int]] = ((), ()),
               firing: int = -1) -> StageView:
    """Everything the front end needs to show stage `index` against the stage before it, or
    (`firing` k >= 1) the graph after the pass's k-th firing against the graph before it, with
    that firing's rewrite; `opened` and `reveal` (before, after) choose which groups are open
    (render.py)."""
    before, after = _graphs(trace, index, firing)
    rewrites = trace.stages[index].report.rewrites
    rewrites = rewrites[firing - 1:firing] if firing >= 1 else rewrites
    # two panes side by side: each gets half the boxes, so both stay readable
    opts = {"max_nodes": max_nodes if before is None else max(1, max_nodes // 2),
            "opened": opened}
    if before is None:
        ra, rb = render(after, reveal=reveal[1], **opts), None
        counts = DiffCounts(added=0, removed=0, changed=0)
    else:
        ra = render(after, other=before, side="after", reveal=reveal[1], **opts)
        rb = render(before, other=after, side="before", reveal=reveal[0], **opts)
        counts = DiffCounts(**graph_diff(before, after).counts())
    # the traced stage has nothing to diff against: show all of its IR
    text = ir_diff(before, after) if before is not None else \
        ir_diff(after, after, context=len(after) + 10**6)
    notes = [ra.note or (rb.note if rb else "")]  # the panes are grouped alike: say it once
    return StageView(
        stage=index, shown_firing=firing if firing >= 1 else -1,
        before_svg=rb.svg if rb else "", after_svg=ra.svg,
        before_words=rb.words if rb else {}, after_words=ra.words,
        before_lines=rb.lines if rb else {}, after_lines=ra.lines,
        before_groups=rb.groups if rb else {}, after_groups=ra.groups,
        diff_counts=counts, note=notes[0],
        ir_diff=[list(r) for r in text.rows],  # JSON arrays
        rewrites=rewrite_rows(before, after, rewrites, rb, ra),
        remarks=remark_rows(before, after, trace.stages[index].report.remarks if index else (),
                            rb, ra),
        cost=cost_view(trace, index, firing),
    )
