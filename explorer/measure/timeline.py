"""trace.memory_timeline(): what holds the memory, step by step along a stage's schedule.

Planned: the memory planner's live temporaries after each step and the bytes at each step
(live buffers plus the op's workspace, analysis/memory.py), on the backend's own declared
temporaries, and each temporary buffer's lifetime: from the step that makes it to the last
step that reads it (views share their input's buffer).
Measured: one run on the backend, with its own peak measurement read after every top-level
step (tracemalloc on the CPU backends, CuPy's pool on the GPU): the live temporaries right
after the step and the peak reached while it ran. Inputs and outputs are not temporaries.
The planned peak is marked with the buffers live there, and the memory limit is drawn.
"""

from __future__ import annotations

import html
import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..analysis.memory import plan
from ..backends import registry
from ..units import byte_ticks, format_bytes

if TYPE_CHECKING:
    from .protocol import TraceLike


@dataclass(frozen=True)
class TimelineStep:
    """One step of the schedule."""

    node: int
    op: str
    source: str
    planned_live: int  # live temporaries after the step, as planned
    planned: int  # bytes at the step: live buffers plus the op's workspace, as planned
    measured_live: int | None  # measured right after the step (None: not measured)
    measured_peak: int | None  # the measured peak while the step ran


@dataclass(frozen=True)
class Buffer:
    """A temporary buffer: made at step `start`, last read at step `end`."""

    node: int  # the node owning the buffer
    op: str
    source: str
    bytes: int
    start: int
    end: int


@dataclass(frozen=True)
class MemoryTimeline:
    stage: str
    stage_index: int
    backend: str
    steps: tuple[TimelineStep, ...]
    buffers: tuple[Buffer, ...]
    planned_peak: int
    peak_step: int | None  # the step of the planned peak
    measured_peak: int | None  # the run's measured peak of temporaries
    measured_peak_step: int | None
    memory_limit: int | None
    peak_how: str
    notes: tuple[str, ...] = ()

    def live_at(self, step: int) -> list[Buffer]:
        """The buffers live at `step`, biggest first."""
        return sorted((b for b in self.buffers if b.start <= step <= b.end),
                      key=lambda b: -b.bytes)

    @property
    def at_peak(self) -> list[Buffer]:
        return [] if self.peak_step is None else self.live_at(self.peak_step)

    def to_data(self) -> dict[str, Any]:
        return {
            "stage": self.stage_index, "stage_name": self.stage, "backend": self.backend,
            "steps": [[s.node, s.op, s.source, s.planned_live, s.planned, s.measured_live,
                       s.measured_peak] for s in self.steps],
            "buffers": [[b.node, b.op, b.source, b.bytes, b.start, b.end] for b in self.buffers],
            "planned_peak": self.planned_peak, "peak_step": self.peak_step,
            "measured_peak": self.measured_peak, "measured_peak_step": self.measured_peak_step,
            "memory_limit": self.memory_limit, "peak_how": self.peak_how,
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        measured = ("not measured" if self.measured_peak is None
                    else f"measured peak {format_bytes(self.measured_peak)} ({self.peak_how})")
        limit = "" if self.memory_limit is None else f", limit {format_bytes(self.memory_limit)}"
        lines = [f"memory timeline of stage {self.stage_index} {self.stage} on {self.backend}: "
                 f"{len(self.steps)} steps, {len(self.buffers)} temporary buffers, planned peak "
                 f"{format_bytes(self.planned_peak)}, {measured}{limit}", *self.notes]
        if self.peak_step is not None:
            s = self.steps[self.peak_step]
            lines.append(f"planned peak at step {self.peak_step}: {s.op} %{s.node} {s.source}; "
                         f"live there:")
            lines += [f"  {format_bytes(b.bytes):>10}  {b.op} %{b.node} {b.source} "
                      f"(steps {b.start}-{b.end})" for b in self.at_peak[:10]]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<MemoryTimeline {str(self).splitlines()[0]}>"

    def plot(self) -> Any:
        """Live bytes along the schedule (planned and measured) over each buffer's lifetime,
        as a matplotlib Figure."""
        from matplotlib.figure import Figure
        from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

        fig = Figure(figsize=(7.0, 4.6))
        top, bars = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2, 3]})
        x = range(len(self.steps))
        top.step(x, [s.planned for s in self.steps], where="mid", label="planned", color="#1f77b4")
        measured = [s.measured_peak for s in self.steps]
        if any(m is not None for m in measured):
            top.step(x, [m if m is not None else float("nan") for m in measured], where="mid",
                     label=f"measured ({self.peak_how})", color="#d62728")
        if self.memory_limit is not None:
            top.axhline(self.memory_limit, color="#555", ls="--", lw=1, label="memory limit")
        if self.peak_step is not None:
            top.axvline(self.peak_step, color="#ff7f0e", lw=1, label="planned peak")
        highest = max([s.planned for s in self.steps] + [m or 0 for m in measured]
                      + [self.memory_limit or 0, 1])
        top.yaxis.set_major_locator(FixedLocator(byte_ticks(highest)))  # KiB/MiB/GiB ticks
        top.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_bytes(int(v))))
        top.set_ylim(0, highest * 1.05)
        top.set(ylabel="live bytes", title=f"{self.stage} on {self.backend}")
        top.legend(fontsize=8)
        biggest = sorted(self.buffers, key=lambda b: -b.bytes)[:40]
        for k, b in enumerate(sorted(biggest, key=lambda b: b.start)):
            bars.barh(k, b.end - b.start + 1, left=b.start - 0.5, height=0.8,
                      color="#ff7f0e" if b in self.at_peak else "#9ecae1")
        bars.set(xlabel="step (node of the schedule)", ylabel="buffers (largest 40)", yticks=[])
        bars.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole steps
        top.tick_params(labelbottom=True)
        return fig

    def _repr_html_(self) -> str:
        buf = io.StringIO()
        self.plot().savefig(buf, format="svg", bbox_inches="tight")
        text = html.escape(str(self))
        return f"<pre>{text}</pre>{buf.getvalue()}"


def memory_timeline(trace: TraceLike, args: tuple[Any, ...], stage: int | str = -1,
                    backend: str = "cpu", **settings: Any) -> MemoryTimeline:
    """See the module docstring; `settings` are the backend's run settings (as trace.run
    takes them)."""
    chosen = registry.get(backend)  # unknown or unavailable: a BackendError with the reason
    s = trace.stage(stage)
    index = trace.stages.index(s)
    g = s.graph
    p = plan(g, backend)
    position = {node: k for k, node in enumerate(p.schedule)}
    end: dict[int, int] = {}
    for k, node in enumerate(p.schedule):
        for i in g[node].inputs:
            owner = p.buffer_of[i]
            end[owner] = max(end.get(owner, -1), k)
    buffers = tuple(Buffer(b, g[b].op, str(g[b].source or ""), nbytes, position[b],
                           max(end.get(b, position[b]), position[b]))
                    for b, nbytes in p.temporaries.items() if b in position)
    with chosen.session(**settings):
        run = registry.run_graph(g, trace.flat_args(args), backend, trace.options)
    by_node = {st.node: st for st in run.steps}
    notes = []
    if not run.steps:
        notes.append(f"the {backend} backend does not measure memory step by step: only the "
                     f"plan is drawn (its run's peak: {format_bytes(run.peak_bytes)})")
    steps = tuple(TimelineStep(node, g[node].op, str(g[node].source or ""), p.timeline[k], p.steps[k],
                               by_node[node].live if node in by_node else None,
                               by_node[node].peak if node in by_node else None)
                  for k, node in enumerate(p.schedule))
    peaks = [(st.measured_peak, k) for k, st in enumerate(steps) if st.measured_peak is not None]
    measured_step = max(peaks)[1] if peaks else None
    return MemoryTimeline(s.name, index, backend, steps, buffers, p.peak_bytes,
                          position.get(p.peak_node) if p.peak_node is not None else None,
                          run.peak_bytes if run.steps else None, measured_step,
                          trace.memory_limit, run.peak_how, tuple(notes))
