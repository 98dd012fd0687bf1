"""trace.profile(): where a stage's time goes, node by node, measured on a backend.

The profiled run is the backend's own executable run through its `stepped` hook (the CPU
backend's generated program has a twin that calls the hook after every top-level statement;
the interpreter core calls it after every node): the time between two calls of the hook is
the node's. Nothing else changes, so a profiled run costs about what a bare one does (the
hook is a clock read and an append). A device backend syncs in the hook, so each node's time
is its own work, not its launch.

Profiled and bare runs alternate after the warm-up. The figures are those of ONE profiled
run, the median one by its total: its node times and its total come from the same run, so
they add up: `sum(p.seconds.values()) + p.outside == p.total`, where `outside` is the time of
that run spent between nodes (the hook itself, the program's own lines, binding arguments).
The other runs give the spread: `p.spread` is (max - min) / median of the profiled runs'
totals, and `p.noisy` says the repeats varied more than the figures can resolve (a spread
above NOISY_SPREAD, or one of the hottest few nodes' times varying above NOISY_NODE of its
median); the printed profile then says so.

Nodes inside a region's body are timed apart where the backend runs that body from the
interpreter core (a split loop's chunks, a scan or while on the interpreter, a kernel run
node by node: bodies.py), summed over the iterations of the run, and the region's row says
"apart"; where the body is generated (a fused kernel, a scan or while compiled as one
function) the region is one statement of the program and is timed whole ("whole"). The jax
backend runs a stage as one XLA program: it has no per-node times, and its profile says so
(trace.roofline places it as a whole).
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
from .bodies import Key, body_of, region_of, timing_bodies, top_level

if TYPE_CHECKING:
    from .protocol import TraceLike

LOOP_OPS = frozenset({"scan", "while", "loop", "conditional", "call"})
DOT_OPS = frozenset({"dot_general", "conv_general_dilated"})
NOISY_SPREAD = 0.25  # (max - min) / median of the profiled runs' totals above this: noisy
NOISY_NODE = 0.5  # one of the TOP_FEW hottest nodes' (max - min) / median above this: noisy
TOP_FEW = 3


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
    """One top-level node of the stage, measured (or, with `place`, a node inside a region's
    body: `place` names the body, as bodies.py does, and `node` is its id there)."""

    node: int
    name: str  # the kernel's name, or "op %id"
    kind: str  # "kernel" | "dot" | "loop" | "op"
    op: str
    source: str  # the user's line, "file:line", or ""
    flops: int
    bytes: int
    seconds: float  # in the profile's chosen run (summed over its runs inside a body)
    calls: int  # how often it runs per run of the stage (a body node: iterations, chunks)
    timed: str = ""  # a region: "apart" (its body's nodes timed too) or "whole"; else ""
    place: str = ""  # a body node: the body it is in ("loop_12/"); "" at the top level

    @property
    def gflops(self) -> float | None:
        """Achieved GFLOP/s (None where it did no arithmetic or took no measurable time)."""
        if not self.flops or self.seconds <= 0:
            return None
        return self.flops * self.calls / self.seconds / 1e9  # (a body node: every run of it)

    @property
    def gbs(self) -> float | None:
        """Achieved GB/s of the bytes it reads and writes."""
        if not self.bytes or self.seconds <= 0:
            return None
        return self.bytes * self.calls / self.seconds / 1e9

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOPs per byte moved."""
        return self.flops / self.bytes if self.flops and self.bytes else None

    def to_data(self) -> dict[str, Any]:
        return {"node": self.node, "name": self.name, "kind": self.kind, "op": self.op,
                "source": self.source, "flops": self.flops, "bytes": self.bytes,
                "seconds": self.seconds, "calls": self.calls, "gflops": self.gflops,
                "gbs": self.gbs, "timed": self.timed, "place": self.place}


@dataclass(frozen=True)
class Profile:
    stage: str
    stage_index: int
    backend: str
    total: float  # seconds of the chosen profiled run (the median one by its total)
    unprofiled: float  # seconds of a bare run (median), measured alternately with the profiled
    repeats: int
    rows: tuple[ProfileRow, ...]  # top-level nodes in schedule order
    notes: tuple[str, ...] = ()
    seconds: dict[int, float] = field(default_factory=dict)  # node id -> seconds, chosen run
    calls: dict[int, int] = field(default_factory=dict)  # node id -> runs per run of the stage
    coverage: float = float("nan")  # sum(seconds) / total, of the chosen run (nan: no nodes)
    totals: tuple[float, ...] = ()  # every profiled run's total, in the order run
    noisy: bool = False  # the repeats varied more than the figures can resolve (see spread)
    noise: str = ""  # why it is noisy, in words ("" when not)
    inner: tuple[ProfileRow, ...] = ()  # nodes inside regions timed apart, by region, in order

    @property
    def overhead(self) -> float:
        """A profiled run's time over a bare run's."""
        return self.total / self.unprofiled if self.unprofiled > 0 else float("nan")

    @property
    def outside(self) -> float:
        """Seconds of the chosen run spent outside every node: the hook, the program's own
        lines between nodes (0.0 without node times)."""
        return max(0.0, self.total - sum(self.seconds.values())) if self.seconds else 0.0

    @property
    def spread(self) -> float:
        """(max - min) / median of the profiled runs' totals (0.0 for one run)."""
        if len(self.totals) < 2:
            return 0.0
        mid = statistics.median(self.totals)
        return (max(self.totals) - min(self.totals)) / mid if mid > 0 else 0.0

    def row(self, node: int) -> ProfileRow:
        for r in self.rows:
            if r.node == node:
                return r
        raise KeyError(f"node %{node} is not a top-level node of stage {self.stage!r}")

    def top(self, k: int = 10) -> list[ProfileRow]:
        return sorted(self.rows, key=lambda r: -r.seconds)[:k]

    def inside(self, region: int) -> list[ProfileRow]:
        """The nodes of top-level region `region`'s bodies, timed apart (empty: timed whole)."""
        return [r for r in self.inner if region_of(r.place) == region]

    def to_data(self) -> dict[str, Any]:
        """Plain data for the widget and saved pages."""
        return {
            "stage": self.stage_index, "stage_name": self.stage, "backend": self.backend,
            "total": self.total, "unprofiled": self.unprofiled, "repeats": self.repeats,
            "notes": list(self.notes), "rows": [r.to_data() for r in self.rows],
            "outside": self.outside, "totals": list(self.totals), "spread": self.spread,
            "noisy": self.noisy, "inner": [r.to_data() for r in self.inner],
        }

    HEADER = ["node", "kind", "line", "ms", "share", "GFLOP/s", "GB/s", "timed"]

    def _cell(self, r: ProfileRow, name: str) -> list[str]:
        share = r.seconds / self.total if self.total > 0 else 0.0
        return [name, r.kind, r.source, f"{r.seconds * 1e3:.3f}", f"{share:.1%}",
                "" if r.gflops is None else f"{r.gflops:.2f}",
                "" if r.gbs is None else f"{r.gbs:.2f}", r.timed]

    def _cells(self, k: int) -> list[list[str]]:
        """The hottest `k` nodes (each region timed apart followed by its hottest body
        nodes), then the rest of the nodes and the time outside them as one row each: the
        shares add up to the run."""
        out = []
        top = self.top(k)
        for r in top:
            out.append(self._cell(r, r.name))
            body = [b for b in self.inside(r.node) if top_level(b.place)]
            for b in sorted(body, key=lambda b: -b.seconds)[:3]:
                out.append(self._cell(b, f"  {b.place}{b.name}"))
        if not self.rows:
            return out
        rest = [r for r in self.rows if r not in top]
        if rest:
            sec = sum(r.seconds for r in rest)
            out.append([f"({len(rest)} other nodes)", "", "", f"{sec * 1e3:.3f}",
                        f"{sec / self.total:.1%}" if self.total > 0 else "", "", "", ""])
        share = self.outside / self.total if self.total > 0 else 0.0
        out.append(["(outside the nodes)", "", "", f"{self.outside * 1e3:.3f}", f"{share:.1%}",
                    "", "", ""])
        return out

    def head(self) -> str:
        where = f"profile of stage {self.stage_index} {self.stage} on {self.backend}: "
        if not self.rows:
            return where + f"{self.total * 1e3:.3f} ms a run, median of {self.repeats}"
        nodes = sum(self.seconds.values())
        return where + (f"{self.total * 1e3:.3f} ms profiled, {self.unprofiled * 1e3:.3f} ms "
                        f"bare ({self.overhead:.2f}x); nodes {nodes * 1e3:.3f} ms "
                        f"({self.coverage:.1%}) + outside the nodes {self.outside * 1e3:.3f} ms; "
                        f"the median of {self.repeats} runs, spread {self.spread:.0%}")

    def warning(self) -> str:
        """What to make of the figures when the repeats varied too much ("" when not)."""
        if not self.noisy:
            return ""
        return (f"NOISY: {self.noise}; the times below cannot rank close nodes (profile again "
                f"with more repeats, or on a quieter machine)")

    def __str__(self, k: int = 15) -> str:
        cells = [self.HEADER, *self._cells(k)]
        widths = [max(len(c[j]) for c in cells) for j in range(len(self.HEADER))]
        lines = [self.head(), *([self.warning()] if self.noisy else []), *self.notes]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Profile {self.head()}{' (noisy)' if self.noisy else ''}>"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in self.HEADER)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                       for row in self._cells(15))
        warn = (f'<p class="gx-noisy" style="color:#b00"><b>{html.escape(self.warning())}</b></p>'
                if self.noisy else "")
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)
        return (f"<p>{html.escape(self.head())}</p>{warn}{notes}"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _rows(g: Graph, seconds: dict[int, float], apart: set[int]) -> tuple[ProfileRow, ...]:
    def timed(n: Node) -> str:
        if n.op != "kernel" and n.op not in LOOP_OPS:
            return ""
        return "apart" if n.id in apart else "whole"

    return tuple(ProfileRow(n.id, label_of(n), kind_of(n), n.op, str(n.source or ""),
                            node_flops(g, n), node_bytes(g, n), seconds.get(n.id, 0.0), 1,
                            timed(n))
                 for n in g.nodes if n.op != "parameter")


def _inner_rows(g: Graph, inner: dict[Key, float],
                calls: dict[Key, int]) -> tuple[ProfileRow, ...]:
    rows = []
    for (place, nid), sec in inner.items():
        body = body_of(g, place)
        assert body is not None  # (bodies.py keeps only places that name a body)
        n = body[nid]
        rows.append(ProfileRow(nid, label_of(n), kind_of(n), n.op, str(n.source or ""),
                               node_flops(body, n), node_bytes(body, n), sec,
                               calls.get((place, nid), 1),
                               "apart" if any(p.startswith(place) and p != place
                                              for p, _ in inner) else "", place))
    order = {n.id: k for k, n in enumerate(g.nodes)}
    return tuple(sorted(rows, key=lambda r: (order.get(region_of(r.place), 0), r.place)))


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


def median_run(totals: Sequence[float]) -> int:
    """The index of the median run by total (the lower of the middle two for an even count:
    always a run that happened)."""
    order = sorted(range(len(totals)), key=lambda k: totals[k])
    return order[(len(order) - 1) // 2]


def noise_of(totals: Sequence[float], runs: Sequence[dict[int, float]], chosen: int) -> str:
    """Why the repeats cannot be trusted to the figures' resolution ("" when they can)."""
    if len(totals) < 2:
        return ""
    mid = statistics.median(totals)
    spread = (max(totals) - min(totals)) / mid if mid > 0 else 0.0
    if spread > NOISY_SPREAD:
        return (f"the profiled runs took {min(totals) * 1e3:.3f} to {max(totals) * 1e3:.3f} ms "
                f"(spread {spread:.0%} of the median, over {NOISY_SPREAD:.0%})")
    if len(runs) >= 3:
        mine = runs[chosen]
        for node in sorted(mine, key=mine.__getitem__, reverse=True)[:TOP_FEW]:
            times = [r.get(node, 0.0) for r in runs]
            mid = statistics.median(times)
            if mid > 0 and (max(times) - min(times)) / mid > NOISY_NODE:
                return (f"node %{node}, among the {TOP_FEW} hottest, took {min(times) * 1e3:.3f} "
                        f"to {max(times) * 1e3:.3f} ms across the runs (over "
                        f"{NOISY_NODE:.0%} of its median)")
    return ""


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
    sync = getattr(exe, "sync", lambda: None)

    def profiled() -> tuple[float, dict[int, float], tuple[dict[Key, float], dict[Key, int]]]:
        inner: dict[Key, float] = {}
        calls: dict[Key, int] = {}
        with timing_bodies(exe, g, sync, inner, calls):
            total, times = stepped_times(exe, prepared)
        return total, {k: v for k, v in times.items() if g[k].op != "parameter"}, (inner, calls)

    registry.warm_up(bare, 1)
    if stepped:  # the profiled path is code of its own (the program's measured twin): warm
        registry.warm_up(profiled, 1)  # it up as well (and makes the bodies' interpreters)
    bare_times: list[float] = []
    runs: list[tuple[float, dict[int, float], tuple[dict[Key, float], dict[Key, int]]]] = []
    notes = []
    if not stepped:
        notes.append(f"the {backend} backend runs the stage as one program: no per-node times "
                     f"(profile the cpu backend for those; trace.roofline places this run whole)")
    for _ in range(repeats):
        t0 = time.perf_counter()
        bare()
        bare_times.append(time.perf_counter() - t0)
        if stepped:
            runs.append(profiled())
    unprofiled = statistics.median(bare_times)
    if not stepped:
        return Profile(s.name, index, backend, unprofiled, unprofiled, repeats, (), tuple(notes),
                       totals=tuple(bare_times))
    totals = [r[0] for r in runs]
    k = median_run(totals)
    total, seconds, (inner, inner_calls) = runs[k]
    apart = {region_of(place) for place, _ in inner}
    rows = _rows(g, seconds, apart)
    regions = [r for r in rows if r.timed]
    whole = [r for r in regions if r.timed == "whole"]
    if regions:
        notes.append(f"{len(regions)} region(s) (kernels, loops, calls): "
                     f"{len(regions) - len(whole)} timed apart (the interpreter core runs their "
                     f"bodies; their nodes' times are in p.inner), {len(whole)} timed whole "
                     f"(generated: the body runs inside one statement)")
    noise = noise_of(totals, [r[1] for r in runs], k)
    return Profile(s.name, index, backend, total, unprofiled, repeats, rows, tuple(notes),
                   seconds=seconds, calls={r.node: r.calls for r in rows},
                   coverage=sum(seconds.values()) / total if total > 0 else float("nan"),
                   totals=tuple(totals), noisy=bool(noise), noise=noise,
                   inner=_inner_rows(g, inner, inner_calls))
