"""trace.compare(): time and peak memory of stages on backends, against baselines.

Baselines, defined honestly:
  "numpy"      NumPy eager: the traced program (no passes) on the reference interpreter, one
               NumPy call per op, each result a fresh array, as NumPy code written op by op.
  "jax-eager"  the user's function called on JAX arrays without jit: one dispatch per op.
  "jax-jit"    jax.jit of the user's function: XLA alone, with all of its own passes.
Every row is checked against the reference interpreter's values of the traced program.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from ..backends import jax as jax_backend
from ..backends import reference
from ..units import format_bytes
from .timing import Measurement, measure_graph, measure_jax

if TYPE_CHECKING:
    from .protocol import TraceLike

BASELINES = ("numpy", "jax-eager", "jax-jit")


@dataclass
class Comparison:
    rows: list[Measurement]
    figure: Any = field(default=None, repr=False)  # a matplotlib Figure, when plotted

    def row(self, label: str) -> Measurement:
        for r in self.rows:
            if r.label == label:
                return r
        raise KeyError(f"no row {label!r}; rows: {', '.join(r.label for r in self.rows)}")

    def ratio(self, slow: str, fast: str) -> float:
        """How many times faster row `fast` is than row `slow` (by median)."""
        return self.row(slow).median / self.row(fast).median

    def _cells(self) -> list[list[str]]:
        out = []
        for r in self.rows:
            peak = "n/a" if r.peak_bytes is None else format_bytes(r.peak_bytes)
            if r.peak_bytes is not None and r.devices is not None:
                peak += f" per device (x{r.devices})"
            check = "n/a" if r.error is None else ("ok" if r.ok else f"WRONG ({r.error:.1e})")
            out.append([r.label, f"{r.median * 1e3:.3f}", f"{r.minimum * 1e3:.3f}", peak,
                        r.peak_how, check])
        return out

    HEADER = ["run", "median ms", "min ms", "peak temporaries", "peak measured by", "values"]

    def __str__(self) -> str:
        cells = [self.HEADER, *self._cells()]
        widths = [max(len(c[k]) for c in cells) for k in range(len(self.HEADER))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in cells)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in self.HEADER)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                       for row in self._cells())
        table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        if self.figure is None:
            return table
        import io

        buf = io.StringIO()
        self.figure.savefig(buf, format="svg", bbox_inches="tight")
        return table + buf.getvalue()

    def plot(self) -> Any:
        """Bars of median time (the minimum as a tick) and peak temporaries per row."""
        from matplotlib.figure import Figure

        labels = [r.label for r in self.rows]
        fig = Figure(figsize=(9, 0.45 * len(labels) + 1.5))
        t_ax, m_ax = fig.subplots(1, 2, sharey=True)
        y = np.arange(len(labels))
        t_ax.barh(y, [r.median * 1e3 for r in self.rows], color="tab:blue")
        t_ax.plot([r.minimum * 1e3 for r in self.rows], y, "k|", markersize=12)
        t_ax.set_yticks(y, labels)
        t_ax.invert_yaxis()
        t_ax.set_xlabel("time, ms (bar: median, tick: minimum)")
        m_ax.barh(y, [(r.peak_bytes or 0) / 2**20 for r in self.rows], color="tab:orange")
        for k, r in enumerate(self.rows):
            if r.peak_bytes is None:
                m_ax.text(0, k, " n/a", va="center")
        per_device = any(r.devices is not None for r in self.rows)
        m_ax.set_xlabel("peak temporaries, MiB" + (" (sharded runs: per device)" if per_device else ""))
        fig.tight_layout()
        self.figure = fig
        return fig


def _stages(trace: TraceLike, stages: Sequence[int | str] | None) -> list[Any]:
    if stages is not None:
        return [trace.stage(s) for s in stages]
    chosen = [trace.stages[0]] + [s for s in trace.stages[1:] if s.report.changed]
    return chosen if chosen[-1] is trace.final else [*chosen, trace.final]


def expected(trace: TraceLike, flat: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The values every row is checked against: the traced program on the reference."""
    traced = trace.stages[0].graph
    return reference.evaluate(traced, reference.check_args(traced, flat))


def measure_baseline(trace: TraceLike, name: str, args: tuple[Any, ...], flat: Sequence[np.ndarray],
                     want: Sequence[np.ndarray] | None, repeats: int = 5) -> Measurement:
    """One baseline row (see BASELINES); also used by the widget's run tab. Without the
    user's function (a trace of XLA's dumps) the JAX baselines run the traced graph in JAX."""
    traced = trace.stages[0].graph
    if name == "numpy":
        return measure_graph(traced, flat, "reference", want, repeats, "numpy")
    user_fn = getattr(trace, "fn", None)
    fn = user_fn or (lambda *xs: jax_backend.lower(traced)(*xs))
    leaves = jax.tree_util.tree_map(np.asarray, args if user_fn else tuple(flat))
    return measure_jax(fn, leaves, want, jit=name == "jax-jit", repeats=repeats)


def compare(trace: TraceLike, args: tuple[Any, ...], backends: Sequence[str] = ("cpu",),
            baselines: Sequence[str] = BASELINES, stages: Sequence[int | str] | None = None,
            repeats: int = 5, plot: bool = True, progress: bool = True) -> Comparison:
    from tqdm.auto import tqdm

    unknown = [b for b in baselines if b not in BASELINES]
    if unknown:
        raise ValueError(f"unknown baselines {unknown}; known: {', '.join(BASELINES)}")
    flat = trace.flat_args(args)
    want = expected(trace, flat)
    jobs: list[tuple[str, Any]] = [(b, None) for b in baselines]
    jobs += [(b, s) for s in _stages(trace, stages) for b in backends]
    rows = []
    bar = tqdm(jobs, desc="compare", disable=not progress, leave=False)
    for name, stage in bar:
        bar.set_postfix_str(name if stage is None else f"{stage.name} on {name}")
        if stage is not None:
            rows.append(measure_graph(stage.graph, flat, name, want, repeats,
                                      f"{stage.name} on {name}", stage.name, trace.options))
        else:
            rows.append(measure_baseline(trace, name, args, flat, want, repeats))
    bar.close()
    result = Comparison(rows)
    if plot:
        result.plot()
    return result

