"""The widget's what-if controls: the memory limit and the pipeline, as traits a notebook cell
or the front end sets, and what they made of the plan (schema.WhatIf).

A change re-plans the traced program (Trace.replanned: nothing is traced again, and a stage
whose pass and input graph are unchanged is reused, so a new limit re-runs the split and what
follows it). A change that cannot be planned is refused whole: the widget keeps the plan it
shows and says why. The limits the split can meet under a pipeline (split.smallest_limit:
the smallest, the node that needs it, and where nothing needs splitting) are found once per
pipeline when asked (the panel opens, or `find_limits`), and a limit under the smallest is
then refused without planning. A view of a stage that a re-plan kept, after the same stage
as before, is kept too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..ir.graph import Node
from ..options import parse_limit as options_limit
from ..passes.base import Pass
from ..passes.pipeline import PipelineError, pass_spec, resolve
from ..passes.split import InfeasibleMemoryLimit, Limits, Split, smallest_limit
from .payload import cost_view
from .schema import RunRow, StageView, WhatIf

if TYPE_CHECKING:
    from ..measure.protocol import TraceLike

PLANS = 8  # earlier plans whose stages a re-plan may reuse
NO_LIMIT = 2**62  # a limit that nothing needs splitting for: the split's input unchanged


def limit_text(limit: int | None, per_device: bool = False) -> str:
    """A limit as the text box shows it: "" for none, "16MiB", "64KiB", else bytes; a limit
    on each device's share ends in "/device"."""
    if limit is None:
        return ""
    each = "/device" if per_device else ""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if limit % size == 0:
            return f"{limit // size}{unit}{each}"
    return f"{limit}{each}"


def trace_limit_text(trace: TraceLike) -> str:
    """The text box's value for `trace`'s own limit."""
    return limit_text(trace.memory_limit, trace.options.per_device)


def read_limit(text: str) -> tuple[int | None, bool]:
    """The memory_limit trait's value as (bytes, per device?): "" or "none" for no limit,
    else a byte size, on each device's share when it ends in "/device" (options.parse_limit)."""
    if not isinstance(text, str):
        raise ValueError(f"memory_limit must be text such as '16MiB', '16MiB/device', "
                         f"'16777216' or '' (none), got {text!r}")
    if text.strip().lower() in ("", "none"):
        return None, False
    try:
        return options_limit(text)
    except ValueError as e:
        raise ValueError(f"memory_limit: {e}") from None


def parse_limit(text: str) -> int | None:
    """The memory_limit trait's value in bytes (None for no limit)."""
    return read_limit(text)[0]


def passes_of(trace: TraceLike, pipeline: Sequence[Any]) -> list[Pass]:
    """The passes a pipeline trait names (pass names or specs): a spec of one of the trace's
    own passes is that pass (a pass object that was never registered stays usable), any
    other is looked up in the registry (PipelineError naming the registered passes)."""
    if isinstance(pipeline, str) or not all(isinstance(p, str) for p in pipeline):
        raise PipelineError(f"pipeline must be a list of pass names or specs, got {pipeline!r}")
    own = {pass_spec(p): p for p in trace.pipeline}
    return [p for spec in pipeline for p in ([own[spec]] if spec in own else resolve(spec))]


def needed_by(node: Node) -> str:
    """The node that needs a limit: '%932 (select_n at model.py:112): return h + ...'."""
    line = node.source.line_text if node.source else ""
    return node.describe() + (f": {line}" if line else "")


def chunks(trace: TraceLike) -> dict[str, int]:
    """The iterations of each split loop of the plan's final stage, by node id."""
    return {str(n.id): math.ceil(n.attrs["size"] / n.attrs["chunk"])
            for n in trace.final.graph.nodes if n.op == "loop"}


class WhatIfs:
    """One widget's what-if state: the limits found per (pipeline, backend)."""

    def __init__(self) -> None:
        self.limits: dict[tuple[tuple[str, ...], str], Limits | None] = {}
        self.refused: Exception | None = None  # why the last change was refused
        self.plans: list[list[Any]] = []  # the stages of recent plans, for replanned() to reuse

    @staticmethod
    def _key(trace: TraceLike, pipeline: Sequence[str]) -> tuple[tuple[str, ...], str]:
        return tuple(pipeline), trace.options.backend

    def known(self, trace: TraceLike) -> Limits | None:
        return self.limits.get(self._key(trace, specs_of(trace)))

    def find_limits(self, trace: TraceLike, pipeline: Sequence[Pass] | None = None
                    ) -> Limits | None:
        """The limits the split can meet on what it gets under `pipeline` (default: the
        trace's), found once; None where the pipeline's split has a limit of its own."""
        pipeline = list(trace.pipeline) if pipeline is None else list(pipeline)
        key = self._key(trace, [pass_spec(p) for p in pipeline])
        if key not in self.limits:
            probe = trace.replanned(memory_limit=NO_LIMIT, pipeline=pipeline)
            at = [k for k, s in enumerate(probe.stages) if isinstance(s.pass_, Split)]
            split = probe.stages[at[0]].pass_ if at else None
            if split is None or split.memory_limit not in (None, NO_LIMIT):
                self.limits[key] = None
            else:
                self.limits[key] = smallest_limit(probe.stages[at[0] - 1].graph,
                                                  split.backend or trace.options.backend)
        return self.limits[key]

    def replan(self, trace: TraceLike, memory_limit: str, pipeline: Sequence[str]) -> TraceLike:
        """`trace`'s program planned under `memory_limit` (text) through `pipeline` (pass names
        or specs), reusing the stages of recent plans. Raises ValueError for an unreadable
        limit, PipelineError for an unknown pass (naming the registered ones),
        InfeasibleMemoryLimit under the smallest limit (without planning, once it is known)."""
        outside = [s.name for s in trace.stages[1:] if s.pass_ is None]
        if outside:
            raise ValueError(f"stages {', '.join(outside)} were not made by passes here (a "
                             f"trace of XLA's own pipeline, gx.xla_pipeline): there is "
                             f"nothing to plan again")
        limit, per_device = read_limit(memory_limit)
        wanted = passes_of(trace, pipeline)
        found = self.limits.get(self._key(trace, [pass_spec(p) for p in wanted]))
        if limit is not None and not per_device and found is not None and limit < found.smallest:
            raise InfeasibleMemoryLimit(limit, found.smallest, found.node)  # (found: global)
        self.plans = [list(trace.stages), *self.plans][:PLANS]
        return trace.replanned(memory_limit=None if limit is None else
                               limit_text(limit, per_device) if per_device else limit,
                               pipeline=wanted, reuse=self.plans)

    def status(self, trace: TraceLike, rows: Sequence[RunRow] = (), working: str = "") -> WhatIf:
        """What the widget shows of the plan: its numbers, the limits found, why the last
        change was refused (an InfeasibleMemoryLimit names the smallest limit and its node)
        and the latest run among `rows` (the run tab's; the final stage's if it was run)."""
        found, error = self.known(trace), self.refused
        smallest, node = (found.smallest, found.node) if found else (None, None)
        if isinstance(error, InfeasibleMemoryLimit):  # under another pipeline, maybe
            if found is not None and found.smallest != error.needed:
                found = None
            smallest, node = error.needed, error.node
        runs = [r for r in rows if r["kind"] == "stage" and not r["error"]]
        final = [r for r in runs if r["stage"] == len(trace.stages) - 1]
        run = (final or runs or [None])[-1]
        return WhatIf(limit=trace.memory_limit, planned_peak=trace.final.cost.peak_bytes,
                      chunks=chunks(trace), smallest_limit=smallest,
                      unsplit_limit=found.unsplit if found else None,
                      needed_by=needed_by(node) if node is not None else "",
                      error="" if error is None else str(error), working=working,
                      measured=run["label"] if run else "",
                      measured_peak=run["peak_bytes"] if run else None,
                      seconds=run["seconds"] if run else None)


def specs_of(trace: TraceLike) -> list[str]:
    """The trace's pipeline as given, as spec strings."""
    return [pass_spec(p) for p in trace.pipeline]


def kept_views(old: TraceLike, new: TraceLike, views: dict[tuple, StageView]
               ) -> dict[tuple, StageView]:
    """The views among `views` (a widget's, keyed by stage index, firing and the choices) of
    the stages of `old` that `new` kept, after the same stage as before: the same pictures,
    under the stage's index in `new`, with the cost tab of `new` (its memory limit)."""
    def pairs(trace: TraceLike) -> list[tuple[int, int]]:
        return [(id(trace.stages[k - 1]) if k else 0, id(s)) for k, s in enumerate(trace.stages)]

    where = {pair: j for j, pair in enumerate(pairs(new))}
    before = pairs(old)
    out = {}
    for key, view in list(views.items()):
        j = where.get(before[key[0]]) if key[0] < len(before) and key[1] == -1 else None
        if j is not None:
            out[(j, *key[1:])] = StageView(**{**view, "stage": j, "cost": cost_view(new, j)})
    return out


def page_state(trace: TraceLike) -> dict[str, Any]:
    """The what-if traits of a page with no kernel (view/export.py): the plan it shows; the
    front end says that changing it needs a kernel."""
    return {"memory_limit": trace_limit_text(trace), "pipeline": specs_of(trace),
            "pass_names": [], "whatif": WhatIfs().status(trace)}
