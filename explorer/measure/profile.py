"""trace.profile(): where a stage's time goes, node by node, measured on a backend.

The profiled run is the backend's own executable run through its `stepped` hook (the CPU
backend's generated program has a twin that calls the hook after every top-level statement;
the interpreter core calls it after every node): the time between two calls of the hook is
the node's. Nothing else changes, so a profiled run costs about what a bare one does (the
hook is a clock read and an append), and the node times sum to the whole run less the
hook's own few microseconds. A device backend syncs in the hook, so each node's time is its
own work, not its launch.

Profiled and bare runs alternate after the warm-up; each node's time is the median over the
repeats. Nodes inside a region's body (a kernel's fused body, a scan compiled as one numba
function, a split loop's chunk) are timed as their region: the region is one statement of
the program. The jax backend runs a stage as one XLA program: it has no per-node times, and
its profile says so (trace.roofline places it as a whole).
"""

from __future__ import annotations

import html
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..analysis.cost import node_bytes, node_flops
from ..backends import registry
from ..ir.graph import Graph, Node

if TYPE_CHECKING:
    from .protocol import TraceLike

LOOP_OPS = frozenset({"scan", "while", "loop", "conditional", "call"})
DOT_OPS = frozenset({"dot_general", "conv_general_dilated"})


def kind_of(n: Node) -> str:
    """What a top-level node is on a roofline: a fused "kernel" (a "dot" when its body holds
    a dot: BLAS with an epilogue), a "dot" (matrix products and convolutions), a "loop"
    (control flow and split loops), or an "op" run on its own."""
    if n.op == "kernel":
        body = n.attrs["body"]
        return "dot" if any(m.op in DOT_OPS for m in body.nodes) else "kernel"
    if n.op in DOT_OPS:
        return "dot"
    if n.op in LOOP_OPS:
        return "loop"
    return "op"


def label_of(n: Node) -> str:
    if n.op == "kernel":
        return n.attrs["body"].name
    return f"{n.op} %{n.id}"


@dataclass(frozen=True)
class ProfileRow:
    """One top-level node of the stage, measured."""

    node: int
    name: str  # the kernel's name, or "op %id"
    kind: str  # "kernel" | "dot" | "loop" | "op"
    op: str
    source: str  # the user's line, "file:line", or ""
    flops: int
    bytes: int
    seconds: float  # median over the repeats, per run
    calls: int  # how often it runs per run of the stage

    @property
    def gflops(self) -> float | None:
        """Achieved GFLOP/s (None where it did no arithmetic or took no measurable time)."""
        return self.flops / self.seconds / 1e9 if self.flops and self.seconds > 0 else None

    @property
    def gbs(self) -> float | None:
        """Achieved GB/s of the bytes it reads and writes."""
        return self.bytes / self.seconds / 1e9 if self.bytes and self.seconds > 0 else None

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOPs per byte moved."""
        return self.flops / self.bytes if self.flops and self.bytes else None


@dataclass(frozen=True)
class Profile:
    stage: str
    stage_index: int
    backend: str
    total: float  # seconds of a profiled run (median)
    unprofiled: float  # seconds of a bare run (median), measured alternately with the profiled
    repeats: int
    rows: tuple[ProfileRow, ...]  # top-level nodes in schedule order
    notes: tuple[str, ...] = ()
    seconds: dict[int, float] = field(default_factory=dict)  # node id -> seconds per run
    calls: dict[int, int] = field(default_factory=dict)  # node id -> runs per run of the stage

    @property
    def overhead(self) -> float:
        """A profiled run's time over a bare run's."""
        return self.total / self.unprofiled if self.unprofiled > 0 else float("nan")

    coverage: float = float("nan")  # the node times' sum over the whole profiled run's time
    # (1.0: all of it), the median over the profiled runs (nan: no node times)

    def row(self, node: int) -> ProfileRow:
        for r in self.rows:
            if r.node == node:
                return r
        raise KeyError(f"node %{node} is not a top-level node of stage {self.stage!r}")

    def top(self, k: int = 10) -> list[ProfileRow]:
        return sorted(self.rows, key=lambda r: -r.seconds)[:k]

    def to_data(self) -> dict[str, Any]:
        """Plain data for the widget and saved pages."""
        return {
            "stage": self.stage_index, "stage_name": self.stage, "backend": self.backend,
            "total": self.total, "unprofiled": self.unprofiled, "repeats": self.repeats,
            "notes": list(self.notes),
            "rows": [{"node": r.node, "name": r.name, "kind": r.kind, "op": r.op,
                      "source": r.source, "flops": r.flops, "bytes": r.bytes,
                      "seconds": r.seconds, "calls": r.calls, "gflops": r.gflops,
                      "gbs": r.gbs} for r in self.rows],
        }

    def _cells(self, k: int) -> list[list[str]]:
        out = []
        for r in self.top(k):
            share = r.seconds / self.total if self.total > 0 else 0.0
            out.append([r.name, r.kind, r.source, f"{r.seconds * 1e3:.3f}", f"{share:.0%}",
                        "" if r.gflops is None else f"{r.gflops:.2f}",
                        "" if r.gbs is None else f"{r.gbs:.2f}"])
        return out

    HEADER = ["node", "kind", "line", "ms", "share", "GFLOP/s", "GB/s"]

    def head(self) -> str:
        where = f"profile of stage {self.stage_index} {self.stage} on {self.backend}: "
        if not self.rows:
            return where + f"{self.total * 1e3:.3f} ms a run, median of {self.repeats}"
        return where + (f"{self.total * 1e3:.3f} ms profiled, {self.unprofiled * 1e3:.3f} ms "
                        f"bare ({self.overhead:.2f}x), nodes sum to {self.coverage:.0%} of the "
                        f"run, median of {self.repeats}")

    def __str__(self, k: int = 15) -> str:
        cells = [self.HEADER, *self._cells(k)]
        widths = [max(len(c[j]) for c in cells) for j in range(len(self.HEADER))]
        lines = [self.head(), *self.notes]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Profile {self.head()}>"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in self.HEADER)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                       for row in self._cells(15))
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)
        return (f"<p>{html.escape(self.head())}</p>{notes}"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _rows(g: Graph, seconds: dict[int, float]) -> tuple[ProfileRow, ...]:
    return tuple(ProfileRow(n.id, label_of(n), kind_of(n), n.op, str(n.source or ""), node_flops(g, n),
                            node_bytes(g, n), seconds.get(n.id, 0.0), 1)
                 for n in g.nodes if n.op != "parameter")


def stepped_times(exe: Any, prepared: Sequence[Any]) -> tuple[float, dict[int, float]]:
    """One profiled run: (seconds, node id -> seconds)."""
    ticks: list[tuple[int, float]] = []
    clock = time.perf_counter
    sync = exe.sync

    def tick(n: Node, value: object) -> None:
        sync()
        ticks.append((n.id, clock()))

    with np.errstate(all="ignore"):  # (outside the clock: it belongs to no node)
        sync()
        t0 = clock()
        exe.stepped(prepared, tick)
        sync()
        total = clock() - t0
    times: dict[int, float] = {}
    last = t0
    for node, t in ticks:
        times[node] = times.get(node, 0.0) + (t - last)
        last = t
    return total, times


def profile(trace: TraceLike, args: tuple[Any, ...], stage: int | str = -1, backend: str = "cpu",
            repeats: int = 5, **settings: Any) -> Profile:
    """See the module docstring; `args` are the user's arguments (the traced ones by
    default); `settings` are the backend's run settings (as trace.run takes them: the dask
    backend's client=)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    chosen = registry.get(backend)  # unknown or unavailable: a BackendError with the reason
    with chosen.session(**settings):
        return _profile(trace, args, stage, backend, repeats)


def _profile(trace: TraceLike, args: tuple[Any, ...], stage: int | str, backend: str,
             repeats: int) -> Profile:
    s = trace.stage(stage)
    index = trace.stages.index(s)
    g = s.graph
    flat = trace.flat_args(args)
    exe = registry.executable(g, backend, trace.options)
    prepared = exe.prepare(flat)

    def bare() -> None:
        exe.execute(prepared)

    stepped = hasattr(exe, "stepped")
    registry.warm_up(bare, 1)
    if stepped:  # the profiled path is code of its own (the program's measured twin): warm
        registry.warm_up(lambda: stepped_times(exe, prepared), 1)  # it up as well
    bare_times, profiled_times, covered = [], [], []
    per_node: dict[int, list[float]] = {}
    notes = []
    if not stepped:
        notes.append(f"the {backend} backend runs the stage as one program: no per-node times "
                     f"(profile the cpu backend for those; trace.roofline places this run whole)")
    for _ in range(repeats):
        t0 = time.perf_counter()
        bare()
        bare_times.append(time.perf_counter() - t0)
        if stepped:
            total, times = stepped_times(exe, prepared)
            profiled_times.append(total)
            covered.append(sum(v for k, v in times.items() if g[k].op != "parameter") / total)
            for node, sec in times.items():
                per_node.setdefault(node, []).append(sec)
    seconds = {node: statistics.median(v) for node, v in per_node.items()
               if g[node].op != "parameter"}
    bodies = [n for n in g.nodes if n.op in LOOP_OPS or n.op == "kernel"]
    if stepped and bodies:
        notes.append(f"{len(bodies)} region(s) (kernels, loops, calls) are timed whole: their "
                     f"bodies run inside one statement")
    rows = _rows(g, seconds) if stepped else ()
    unprofiled = statistics.median(bare_times)
    total = statistics.median(profiled_times) if profiled_times else unprofiled
    return Profile(s.name, index, backend, total, unprofiled, repeats, rows, tuple(notes),
                   seconds=seconds, calls={r.node: r.calls for r in rows},
                   coverage=statistics.median(covered) if covered else float("nan"))
