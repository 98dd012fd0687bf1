"""Runs for the widget's run and kernels tabs: a stage on a backend, and the baselines.

Each run is measured as trace.compare() measures it (explorer/measure/compare.py, timing.py):
warm-up, repeats, median and minimum, peak temporaries, and a numeric check against the
reference interpreter's values of the traced program. A run becomes a row of plain data for
the front end; the Measurement behind it is kept, so `comparison()` gives compare's own table
and plot of the same runs without measuring again. Baselines do not depend on the stage, so
each is measured once per widget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..measure.compare import BASELINES, Comparison, expected, measure_baseline
from ..measure.timing import Measurement, measure_graph
from .schema import KernelRow, RunRow

if TYPE_CHECKING:
    from ..measure.protocol import TraceLike

BASELINE_LABELS = {"numpy": "NumPy", "jax-eager": "JAX eager", "jax-jit": "jax.jit"}
NO_FUNCTION = ("cannot run: this trace has no Python function to call (it was read from "
               "XLA's dumps, e.g. by gx.xla_pipeline), so there is nothing to run eagerly or jit")


def stage_key(index: int, backend: str) -> str:
    return f"{index}:{backend}"


def check_text(m: Measurement) -> str:
    """Against the reference interpreter's values of the traced program, within the
    tolerance of the output's element type (measure/closeness.py)."""
    if m.error is None:
        return "no values to check"
    if m.ok:
        return f"matches (rel. error {m.error:.1e})"
    return f"WRONG (rel. error {m.error:.1e})"


def row_of(m: Measurement, key: str, kind: str, stage: int | None,
           backend: str) -> RunRow:
    label = BASELINE_LABELS.get(backend, m.label) if kind == "baseline" else m.label
    return RunRow(key=key, kind=kind, label=label, stage=stage,  # type: ignore[typeddict-item]
                  backend=backend, seconds=m.median, min_seconds=m.minimum, repeats=m.repeats,
                  peak_bytes=m.peak_bytes, peak_how=m.peak_how, check=check_text(m),
                  ok=m.ok if m.error is not None else None, error="",
                  workers=len(m.workers), dashboard=m.dashboard or "", devices=m.devices)


def failed_row(key: str, kind: str, label: str, stage: int | None, backend: str,
               error: str) -> RunRow:
    return RunRow(key=key, kind=kind, label=label, stage=stage,  # type: ignore[typeddict-item]
                  backend=backend, seconds=None, min_seconds=None, repeats=0, peak_bytes=None,
                  peak_how="", check="", ok=None, error=error, workers=0, dashboard="",
                  devices=None)


class RunLog:
    """The measured runs of one trace on its example arguments, by row key."""

    def __init__(self, trace: TraceLike, repeats: int = 5) -> None:
        self.trace = trace
        self.repeats = repeats
        self.measurements: dict[str, Measurement] = {}
        self._flat: list[np.ndarray] | None = None
        self._want: list[np.ndarray] | None = None

    def _inputs(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        if self._flat is None or self._want is None:
            self._flat = self.trace.flat_args(self.trace.example_args)
            self._want = expected(self.trace, self._flat)
        return self._flat, self._want

    def run(self, index: int, backend: str) -> dict[str, Any]:
        """Stage `index` on `backend`; a failure is a row saying why, not an exception."""
        stage = self.trace.stages[index]
        key, label = stage_key(index, backend), f"{stage.name} on {backend}"
        try:
            flat, want = self._inputs()
            m = measure_graph(stage.graph, flat, backend, want, self.repeats, label, stage.name,
                              self.trace.options)
        except Exception as e:  # shown in the row: one failing backend must not stop the rest
            return failed_row(key, "stage", label, index, backend, f"{type(e).__name__}: {e}")
        self.measurements[key] = m
        return row_of(m, key, "stage", index, backend)

    def baseline(self, name: str) -> dict[str, Any]:
        """One of compare.BASELINES, or a row saying why it cannot run on this trace."""
        if name not in BASELINES:
            raise ValueError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")
        key, label = f"baseline:{name}", BASELINE_LABELS[name]
        if name != "numpy" and getattr(self.trace, "fn", None) is None:
            return failed_row(key, "baseline", label, None, name, NO_FUNCTION)
        try:
            flat, want = self._inputs()
            m = measure_baseline(self.trace, name, self.trace.example_args, flat, want,
                                 self.repeats)
        except Exception as e:
            return failed_row(key, "baseline", label, None, name, f"{type(e).__name__}: {e}")
        self.measurements[key] = m
        return row_of(m, key, "baseline", None, name)

    def kernels(self, index: int) -> list[KernelRow]:
        """The generated program and kernels of the latest run of stage `index` on each
        backend (the program first: what calls the kernels, in order)."""
        rows = []
        for key, m in self.measurements.items():
            if not key.startswith(f"{index}:"):
                continue
            if m.program:
                rows.append(KernelRow(backend=m.backend, name="the program", source=m.program,
                                      seconds=m.median))
            rows += [KernelRow(backend=m.backend, name=k.name, source=k.source, seconds=k.seconds)
                     for k in m.kernels]
        return rows

    def comparison(self, keys: list[str], plot: bool = True) -> Comparison:
        """compare()'s table (and plot) of the measured rows among `keys`, in that order."""
        result = Comparison([self.measurements[k] for k in keys if k in self.measurements])
        if plot and result.rows:
            result.plot()
        return result
