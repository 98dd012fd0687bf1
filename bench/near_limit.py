"""How near a program runs to this machine's limits (issue 42, part 4), from a roofline of
its final stage on the cpu backend (explorer/measure/roofline.py: the profile's measured
seconds per node, the cost model's FLOPs and bytes, the machine's measured peaks):

- the share of the peak FLOP/s (BLAS, peaks.py) that its dots of at least DOT_MIN FLOPs
  reach, weighted by their time: their FLOPs over their seconds at the peak;
- the share of the STREAM bandwidth that its memory-bound kernels and ops (below the ridge,
  moving at least MEMORY_MIN bytes a call) reach, weighted by their time likewise;
- the physical floor: the stage's FLOPs at the peak plus its bytes at the bandwidth
  (analysis/cost.py's graph_cost), and the cpu backend's bare time over that floor.

Nodes inside a region whose body the interpreter core runs count where the profile times
them apart (p.inner); a scan or loop compiled whole is one statement, its dots and kernels
out of reach: `loops` is the share of the run spent in such regions, so that a share over a
small part of the run reads as what it is. `python -m bench.models --roofline` prints the
table (bench/models.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from explorer.analysis.cost import graph_cost
from explorer.measure.peaks import Peaks
from explorer.measure.profile import ProfileRow

DOT_MIN = 2 * 64**3  # FLOPs of a dot with 64^3 multiply-adds
MEMORY_MIN = 1 << 20  # bytes a call moves: 1 MiB
DOT_GOAL, MEMORY_GOAL = 0.70, 0.50  # issue 42's goals for the two shares


@dataclass(frozen=True)
class Share:
    """A time-weighted share of a peak over some rows: their work over their seconds at
    the peak (None where no row qualifies or they took no time)."""

    share: float | None
    seconds: float  # the rows' seconds
    rows: int


def time_weighted(rows: Iterable[ProfileRow], work: str, peak: float) -> Share:
    """The share of `peak` (per second) that `rows` reach in `work` ("flops" or "bytes"),
    weighted by time: sum(work x calls) / sum(seconds) / peak, the mean of each row's share
    weighted by its seconds."""
    done = seconds = 0.0
    n = 0
    for r in rows:
        done += getattr(r, work) * r.calls
        seconds += r.seconds
        n += 1
    return Share(done / seconds / peak if seconds > 0 and peak > 0 else None, seconds, n)


def big_dots(rows: Iterable[ProfileRow]) -> list[ProfileRow]:
    """The dots (BLAS, with or without an epilogue; convolutions) of at least DOT_MIN FLOPs
    (a kernel timed apart is counted by its body's nodes, among the rows, not whole)."""
    return [r for r in rows if r.kind == "dot" and r.flops >= DOT_MIN and r.timed != "apart"]


def memory_bound(rows: Iterable[ProfileRow], peaks: Peaks) -> list[ProfileRow]:
    """Kernels and ops (not dots, not regions) below the ridge moving at least MEMORY_MIN
    bytes a call."""
    return [r for r in rows if r.kind in ("kernel", "op") and r.bytes >= MEMORY_MIN
            and r.timed != "apart" and (r.intensity is None or r.intensity < peaks.ridge)]


@dataclass(frozen=True)
class NearLimit:
    """One program's figures (`near_limit`)."""

    seconds: float  # the cpu backend's bare run (the profile's median)
    total: float  # the profiled run the rows' seconds are from (the shares of the run's)
    dots: Share
    memory: Share
    loops: float  # share of the run in regions timed whole (their insides out of reach)
    flops: int
    bytes: int
    floor: float  # seconds: flops at the peak plus bytes at the bandwidth

    @property
    def over_floor(self) -> float:
        return self.seconds / self.floor if self.floor > 0 else float("nan")

    def to_data(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_data(cls, d: dict[str, Any]) -> NearLimit:
        return cls(**{**d, "dots": Share(**d["dots"]), "memory": Share(**d["memory"])})


def near_limit(rows: Iterable[ProfileRow], graph: Any, peaks: Peaks, seconds: float,
               total: float) -> NearLimit:
    """The figures of a stage (`graph`) from its profile's rows (top-level and inner), its
    bare time `seconds` and its profiled run's `total`."""
    rows = list(rows)
    cost = graph_cost(graph)
    whole = sum(r.seconds for r in rows if r.timed == "whole" and r.kind == "loop"
                and not r.place)
    return NearLimit(seconds, total, time_weighted(big_dots(rows), "flops", peaks.flops),
                     time_weighted(memory_bound(rows, peaks), "bytes", peaks.bandwidth),
                     whole / total if total > 0 else 0.0, cost.flops, cost.bytes,
                     cost.flops / peaks.flops + cost.bytes / peaks.bandwidth)


def measure(fn: Any, args: tuple[Any, ...], repeats: int) -> tuple[NearLimit, Peaks]:
    """Explore `fn`, profile its final stage on the cpu backend under the machine's peaks
    (measured again where a point lands above them: roofline.py), and the figures."""
    import explorer as gx
    from explorer.measure.roofline import roofline

    trace = gx.explore(fn, *args)
    roof = roofline(trace, args, backend="cpu", repeats=repeats, xla=False)
    p = roof.profile
    return (near_limit([*p.rows, *p.inner], trace.final.graph, roof.peaks, p.unprofiled,
                       p.total), roof.peaks)
