"""trace.roofline(): every kernel, dot and loop of a stage by arithmetic intensity against
its achieved rate, under this machine's measured peaks, with XLA's compiled program of the
same function as one more point.

A point above the roof (achieved FLOP/s over the peak, or bytes/s over the bandwidth) means
the peaks were measured low (on a loaded machine, say): the peaks are then measured again,
once, and the roofline drawn under the new ones. A point still above is flagged, and so is the
roofline as a whole: in the table ("ABOVE"), the plot (ringed in red, the title says so), the
repr and the data (`Roofline.above`, each point's `above`).

A point's FLOPs and bytes are the cost model's (analysis/cost.py: what the node computes and
the bytes it reads and writes), its seconds the profile's (profile.py). XLA's point
is `jax.jit(fn).lower(*args).compile().cost_analysis()` (its own count of FLOPs and bytes
accessed) over the measured median of `jax.jit(fn)`. The peaks are a BLAS matrix product
and a STREAM-style triad (peaks.py), measured once per machine and cached.
"""

from __future__ import annotations

import html
import io
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .peaks import Peaks, peaks
from .profile import Profile, profile
from .timing import measure_jax

if TYPE_CHECKING:
    from .protocol import TraceLike

KINDS = ("kernel", "dot", "loop")


@dataclass(frozen=True)
class Point:
    """One point of the roofline."""

    name: str
    kind: str  # "kernel" | "dot" | "loop" | "xla"
    node: int | None  # the stage's node (None for XLA's whole program)
    source: str
    flops: int
    bytes: int
    seconds: float

    @property
    def intensity(self) -> float | None:
        return self.flops / self.bytes if self.flops and self.bytes else None

    @property
    def rate(self) -> float | None:
        """Achieved FLOP/s."""
        return self.flops / self.seconds if self.flops and self.seconds > 0 else None

    @property
    def bandwidth(self) -> float | None:
        """Achieved bytes/s."""
        return self.bytes / self.seconds if self.bytes and self.seconds > 0 else None

    def above(self, p: Peaks) -> bool:
        """Whether it lands above the roof: FLOP/s over the peak or bytes/s over the
        bandwidth."""
        return ((self.rate is not None and self.rate > p.flops)
                or (self.bandwidth is not None and self.bandwidth > p.bandwidth))

    def bound(self, p: Peaks) -> float | None:
        """The roof above this point: min(peak FLOP/s, intensity x bandwidth)."""
        i = self.intensity
        return None if i is None else min(p.flops, i * p.bandwidth)

    def to_data(self, p: Peaks) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "node": self.node, "source": self.source,
                "flops": self.flops, "bytes": self.bytes, "seconds": self.seconds,
                "intensity": self.intensity, "rate": self.rate, "bandwidth": self.bandwidth,
                "bound": self.bound(p), "above": self.above(p)}


@dataclass(frozen=True)
class Roofline:
    stage: str
    stage_index: int
    backend: str
    peaks: Peaks
    points: tuple[Point, ...]  # the stage's kernels, dots and loops, in schedule order
    xla: Point | None  # jax.jit's compiled program, whole
    profile: Profile = field(repr=False)
    notes: tuple[str, ...] = ()
    remeasured: bool = False  # the peaks were measured again: a point had landed above them

    @property
    def above(self) -> list[Point]:
        """The points above the roof (after measuring the peaks again): empty when the
        roofline can be trusted."""
        return [x for x in self.all_points() if x.above(self.peaks)]

    def all_points(self) -> list[Point]:
        return [*self.points, *((self.xla,) if self.xla else ())]

    def warning(self) -> str:
        """What is wrong with the roofline ("" when nothing is)."""
        if not self.above:
            return ""
        again = " even after measuring them again" if self.remeasured else ""
        above = self.above
        names = ", ".join(x.name for x in above[:5]) + (f", and {len(above) - 5} more"
                                                         if len(above) > 5 else "")
        return (f"ABOVE THE ROOF: {len(above)} point(s) ran faster than the measured "
                f"peaks{again} ({names}): the peaks or the "
                f"cost model's counts are off; read the shares of the roof with care")

    def point(self, name: str) -> Point:
        for p in self.points:
            if p.name == name:
                return p
        raise KeyError(f"no point {name!r}; points: {', '.join(p.name for p in self.points)}")

    def to_data(self) -> dict[str, Any]:
        p = self.peaks
        return {"stage": self.stage_index, "stage_name": self.stage, "backend": self.backend,
                "peaks": {"machine": p.machine, "flops": p.flops, "bandwidth": p.bandwidth,
                          "how": p.how, "measured_at": p.measured_at},
                "points": [x.to_data(p) for x in self.points],
                "xla": None if self.xla is None else self.xla.to_data(p),
                "notes": list(self.notes), "above_roof": bool(self.above),
                "remeasured": self.remeasured}

    def _cells(self) -> list[list[str]]:
        def num(v: float | None, scale: float, fmt: str) -> str:
            return "" if v is None else format(v / scale, fmt)

        out = []
        for x in self.all_points():
            bound = x.bound(self.peaks)
            share = "" if bound is None or x.rate is None else f"{x.rate / bound:.0%}"
            if x.above(self.peaks):
                share = f"{share} ABOVE".strip()
            out.append([x.name, x.kind, x.source, num(x.intensity, 1, ".2f"),
                        f"{x.seconds * 1e3:.3f}", num(x.rate, 1e9, ".2f"),
                        num(x.bandwidth, 1e9, ".2f"), share])
        return out

    HEADER = ["point", "kind", "line", "FLOPs/byte", "ms", "GFLOP/s", "GB/s", "of roof"]

    def __str__(self) -> str:
        cells = [self.HEADER, *self._cells()]
        widths = [max(len(c[j]) for c in cells) for j in range(len(self.HEADER))]
        lines = [f"roofline of stage {self.stage_index} {self.stage} on {self.backend}; "
                 f"peaks: {self.peaks}", *([self.warning()] if self.above else []), *self.notes]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells]
        return "\n".join(lines)

    def plot(self) -> Any:
        """The roofline as a matplotlib Figure (log-log: FLOPs per byte against GFLOP/s)."""
        from matplotlib.figure import Figure

        p = self.peaks
        fig = Figure(figsize=(6.4, 4.2))
        ax = fig.add_subplot()
        shown = [x for x in (*self.points, *((self.xla,) if self.xla else ()))
                 if x.intensity is not None and x.rate is not None]
        xs = [x.intensity for x in shown] or [p.ridge]
        lo = 10 ** math.floor(math.log10(min(min(xs), p.ridge) / 2))
        hi = 10 ** math.ceil(math.log10(max(max(xs), p.ridge) * 2))
        ax.plot([lo, p.ridge, hi], [lo * p.bandwidth / 1e9, p.flops / 1e9, p.flops / 1e9],
                color="#444", lw=1.5, label="roof (measured peaks)")
        colours = {"kernel": "#1f77b4", "dot": "#d62728", "loop": "#2ca02c", "xla": "#9467bd"}
        for kind, colour in colours.items():
            pts = [x for x in shown if x.kind == kind]
            if pts:
                ax.scatter([x.intensity for x in pts], [x.rate / 1e9 for x in pts],  # type: ignore[operator]
                           color=colour, marker="*" if kind == "xla" else "o",
                           s=90 if kind == "xla" else 30, label=kind if kind != "xla" else "jax.jit")
        above = [x for x in shown if x.above(p)]
        if above:
            ax.scatter([x.intensity for x in above], [x.rate / 1e9 for x in above],  # type: ignore[operator]
                       facecolors="none", edgecolors="red", s=160, lw=1.5,
                       label="above the roof")
        title = f"{self.stage} on {self.backend}"
        if self.above:
            title += f": {len(self.above)} point(s) ABOVE THE ROOF"
        ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOPs/byte)",
               ylabel="GFLOP/s", title=title)
        ax.grid(True, which="both", lw=0.3, alpha=0.5)
        ax.legend(fontsize=8, loc="lower right")
        return fig

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in self.HEADER)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                       for row in self._cells())
        buf = io.StringIO()
        self.plot().savefig(buf, format="svg", bbox_inches="tight")
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)
        warn = (f'<p class="gx-above" style="color:#b00"><b>{html.escape(self.warning())}</b></p>'
                if self.above else "")
        return (f"<p>peaks: {html.escape(str(self.peaks))}</p>{warn}{notes}{buf.getvalue()}"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def xla_point(trace: TraceLike, args: tuple[Any, ...], repeats: int) -> tuple[Point | None, str]:
    """jax.jit's compiled program of the user's function as one point (or None and why)."""
    fn = getattr(trace, "fn", None)
    if fn is None:
        return None, "no XLA point: this trace has no Python function to jit"
    import jax

    compiled = jax.jit(fn).lower(*args).compile()
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):  # older JAX: one dict per computation
        analysis = analysis[0] if analysis else {}
    flops = int(analysis.get("flops", 0) or 0) if analysis else 0
    nbytes = int(analysis.get("bytes accessed", 0) or 0) if analysis else 0
    m = measure_jax(fn, args, None, jit=True, repeats=repeats)
    return Point("jax.jit", "xla", None, "", flops, nbytes, m.median), ""


def roofline(trace: TraceLike, args: tuple[Any, ...], stage: int | str = -1, backend: str = "cpu",
             repeats: int = 5, xla: bool = True, remeasure: bool = False,
             **settings: Any) -> Roofline:
    prof = profile(trace, args, stage=stage, backend=backend, repeats=repeats, **settings)
    machine_peaks = peaks(backend, remeasure=remeasure)
    points = tuple(Point(r.name, r.kind, r.node, r.source, r.flops, r.bytes, r.seconds)
                   for r in prof.rows if r.kind in KINDS)
    notes = list(prof.notes)
    point = None
    if xla:
        point, why = xla_point(trace, args, repeats)
        if why:
            notes.append(why)
    again = False
    if not remeasure and any(x.above(machine_peaks) for x in (*points, *((point,) if point else ()))):
        # measured low: once more, keeping the higher of each figure
        machine_peaks, again = peaks(backend, remeasure=True, at_least=machine_peaks), True
        notes.append(f"a point landed above the roof: the peaks were measured again "
                     f"({machine_peaks.measured_at})")
    return Roofline(prof.stage, prof.stage_index, backend, machine_peaks, points, point, prof,
                    tuple(notes), remeasured=again or remeasure)
