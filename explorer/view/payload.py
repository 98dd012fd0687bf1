"""What the front end shows, as plain JSON-able data: one summary per stage, and the full
view of one stage (graphs, IR diff, rewrites, cost), each built as its schema.py declaration.
The widget sends these as traits; the HTML export inlines them for every stage. Built once per
stage and cached by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..analysis.cost import Cost
from ..ir.graph import Graph
from ..passes.base import Rewrite
from ..trace import Stage, Trace
from .diff import ir_diff
from .graphdiff import graph_diff
from .render import DEFAULT_MAX_NODES, Rendered, render
from .schema import CostNumbers, CostView, DiffCounts, RewriteRow, StageSummary, StageView, fields

# The per-stage keys: a model reads them from the current stage's view.
VIEW_KEYS = tuple(fields(StageView))


def stage_summaries(trace: Trace) -> list[StageSummary]:
    return [StageSummary(index=k, name=s.name, changed=bool(s.report.changed) or k == 0,
                         nodes=len(s.graph), rewrites=len(s.report.rewrites), **_cost(s.cost))
            for k, s in enumerate(trace.stages)]


def _cost(c: Cost) -> CostNumbers:
    return CostNumbers(flops=c.flops, bytes=c.bytes, peak_bytes=c.peak_bytes)


def cost_view(trace: Trace, index: int) -> CostView:
    stage = trace.stages[index]
    mem = stage.memory
    return CostView(**_cost(stage.cost),
                    prev=_cost(trace.stages[index - 1].cost) if index > 0 else None,
                    timeline=list(mem.steps), peak_node=mem.peak_node,
                    memory_limit=trace.memory_limit, nodes=len(stage.graph))


def _line_text(stages: tuple[Stage, ...], rw: Rewrite) -> str:
    """The text of the line the rewrite names (rw.source, its root's "file:line"): taken from
    a node at that line (in the body the rewrite fired in), never from a neighbour's."""
    for stage, ids in zip(stages, (rw.before, rw.after)):
        g = _graph_at(stage.graph, rw.region)
        for i in ids if g is not None else ():
            src = g[i].source if i in g else None  # type: ignore[union-attr]
            if src is not None and (rw.source is None or str(src) == rw.source):
                return src.line_text
    return ""


_REGION_PART = re.compile(r"%(\d+)\.(\w+)(?:\[(\d+)\])?$")


def _region_parts(region: str) -> list[tuple[int, str, int | None]] | None:
    """A Rewrite.region path ("%7.body/%3.branches[1]") as (node id, attribute, index)."""
    parts = []
    for part in region.split("/") if region else ():
        m = _REGION_PART.match(part)
        if m is None:
            return None
        parts.append((int(m.group(1)), m.group(2), None if m.group(3) is None else int(m.group(3))))
    return parts


def _graph_at(graph: Graph, region: str) -> Graph | None:
    """The body `region` names inside `graph` (the graph itself for "")."""
    for nid, attr, index in _region_parts(region) or ():
        body = graph[nid].attrs.get(attr) if nid in graph else None
        body = body[index] if index is not None and isinstance(body, tuple) else body
        if not isinstance(body, Graph):
            return None
        graph = body
    return graph if _region_parts(region) is not None else None


def _keys(r: Rendered | None, region: str, ids: Sequence[int]) -> list[str]:
    """The drawn elements of node ids in `region` (a Rewrite.region path): the body's own
    boxes when the picture shows bodies (render.py's keys: n7_2, n7_cond_1, n9_branches1_4),
    else the box of the region that holds them."""
    if r is None:
        return []
    if not region:
        return r.elements(ids)
    parts = _region_parts(region)
    if not parts:
        return []
    prefix = "".join(f"n{nid}_" if attr == "body" and index is None else
                     f"n{nid}_{attr}{'' if index is None else index}_"
                     for nid, attr, index in parts)
    top = parts[0][0]
    inside = sorted({f"{prefix}n{i}" for i in ids} & set(r.words))
    return inside or r.elements([top])


def rewrite_rows(before: Stage | None, after: Stage, rb: Rendered | None,
                 ra: Rendered) -> list[RewriteRow]:
    stages = (before or after, after)
    return [RewriteRow(rule=rw.rule, before=list(rw.before), after=list(rw.after),
                       region=rw.region, source=rw.source or "",
                       line_text=_line_text(stages, rw),
                       before_keys=_keys(rb, rw.region, rw.before),
                       after_keys=_keys(ra, rw.region, rw.after))
            for rw in after.report.rewrites]


def stage_view(trace: Trace, index: int, max_nodes: int = DEFAULT_MAX_NODES) -> StageView:
    """Everything the front end needs to show stage `index` against the stage before it."""
    after = trace.stages[index]
    before = trace.stages[index - 1] if index > 0 else None
    if before is None:
        ra, rb = render(after.graph, max_nodes=max_nodes), None
        counts = DiffCounts(added=0, removed=0, changed=0)
    else:
        ra = render(after.graph, other=before.graph, side="after", max_nodes=max_nodes)
        rb = render(before.graph, other=after.graph, side="before", max_nodes=max_nodes)
        counts = DiffCounts(**graph_diff(before.graph, after.graph).counts())
    # the traced stage has nothing to diff against: show all of its IR
    text = ir_diff(before.graph, after.graph) if before else \
        ir_diff(after.graph, after.graph, context=len(after.graph) + 10**6)
    notes = sorted({r.note for r in (ra, rb) if r is not None and r.note})
    return StageView(
        view_index=index, before_svg=rb.svg if rb else "", after_svg=ra.svg,
        before_words=rb.words if rb else {}, after_words=ra.words,
        diff_counts=counts, note="; ".join(notes),
        ir_diff=[list(r) for r in text.rows],  # JSON arrays
        rewrites=rewrite_rows(before, after, rb, ra),
        cost=cost_view(trace, index),
    )
