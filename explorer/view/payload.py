"""What the front end shows, as plain JSON-able data: one summary per stage, and the full
view of one stage (graphs, IR diff, rewrites, cost), each built as its schema.py declaration.
The widget sends these as traits; the HTML export inlines them for every stage. Built once per
stage and cached by the caller.
"""

from __future__ import annotations

from ..analysis.cost import Cost
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
    a node at that line, never from a neighbour's."""
    for stage, ids in zip(stages, (rw.before, rw.after)):
        for i in ids:
            src = stage.graph[i].source if i in stage.graph else None
            if src is not None and (rw.source is None or str(src) == rw.source):
                return src.line_text
    return ""


def rewrite_rows(before: Stage | None, after: Stage, rb: Rendered | None,
                 ra: Rendered) -> list[RewriteRow]:
    stages = (before or after, after)
    return [RewriteRow(rule=rw.rule, before=list(rw.before), after=list(rw.after),
                       source=rw.source or "", line_text=_line_text(stages, rw),
                       before_keys=rb.elements(rw.before) if rb else [],
                       after_keys=ra.elements(rw.after))
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
        before_svg=rb.svg if rb else "", after_svg=ra.svg,
        before_words=rb.words if rb else {}, after_words=ra.words,
        diff_counts=counts, note="; ".join(notes),
        ir_diff=[list(r) for r in text.rows],  # JSON arrays
        rewrites=rewrite_rows(before, after, rb, ra),
        cost=cost_view(trace, index),
    )
