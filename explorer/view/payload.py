"""What the front end shows, as plain JSON-able data: one summary per stage, and the full
view of one stage (graphs, IR diff, rewrites, cost), each built as its schema.py declaration.
The widget sends these as traits; the HTML export inlines them for every stage. Built once per
stage and cached by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..analysis.cost import Cost
from ..ir.graph import Graph
from ..passes.base import Rewrite
from ..trace import Stage, Trace
from .diff import ir_diff
from .graphdiff import graph_diff
from .render import DEFAULT_MAX_NODES, Rendered, render, search_reveal
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


def rewrite_rows(before: Stage | None, after: Stage, rb: Rendered | None,
                 ra: Rendered) -> list[RewriteRow]:
    stages = (before or after, after)
    return [RewriteRow(rule=rw.rule, before=list(rw.before), after=list(rw.after),
                       source=rw.source or "", line_text=_line_text(stages, rw),
                       region=rw.region,
                       before_keys=rb.elements(rw.before, rw.region) if rb else [],
                       after_keys=ra.elements(rw.after, rw.region))
            for rw in after.report.rewrites]


def reveal_for(trace: Trace, index: int, query: str) -> tuple[frozenset[int], frozenset[int]]:
    """The nodes a search opens its way to in stage `index`'s before and after graphs."""
    if not query.strip():
        return frozenset(), frozenset()
    before = search_reveal(trace.stages[index - 1].graph, query) if index > 0 else set()
    return frozenset(before), frozenset(search_reveal(trace.stages[index].graph, query))


def stage_view(trace: Trace, index: int, max_nodes: int = DEFAULT_MAX_NODES,
               opened: Mapping[str, bool] | None = None,
               reveal: tuple[Iterable[int], Iterable[int]] = ((), ())) -> StageView:
    """Everything the front end needs to show stage `index` against the stage before it;
    `opened` and `reveal` (before, after) choose which groups are open (render.py)."""
    after = trace.stages[index]
    before = trace.stages[index - 1] if index > 0 else None
    # two panes side by side: each gets half the boxes, so both stay readable
    opts = {"max_nodes": max_nodes if before is None else max(1, max_nodes // 2),
            "opened": opened}
    if before is None:
        ra, rb = render(after.graph, reveal=reveal[1], **opts), None
        counts = DiffCounts(added=0, removed=0, changed=0)
    else:
        ra = render(after.graph, other=before.graph, side="after", reveal=reveal[1], **opts)
        rb = render(before.graph, other=after.graph, side="before", reveal=reveal[0], **opts)
        counts = DiffCounts(**graph_diff(before.graph, after.graph).counts())
    # the traced stage has nothing to diff against: show all of its IR
    text = ir_diff(before.graph, after.graph) if before else \
        ir_diff(after.graph, after.graph, context=len(after.graph) + 10**6)
    notes = [ra.note or (rb.note if rb else "")]  # the panes are grouped alike: say it once
    return StageView(
        stage=index, before_svg=rb.svg if rb else "", after_svg=ra.svg,
        before_words=rb.words if rb else {}, after_words=ra.words,
        diff_counts=counts, note=notes[0],
        ir_diff=[list(r) for r in text.rows],  # JSON arrays
        rewrites=rewrite_rows(before, after, rb, ra),
        cost=cost_view(trace, index),
    )
