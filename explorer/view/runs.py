"""Runs of stages for the widget's run and kernels tabs: one row per run, and its kernels.

A row is plain data (label, backend, seconds, peak bytes, numeric check), so baselines such as
NumPy, JAX eager or jax.jit become more rows of the same shape when their backends land.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ..backends.result import RunResult
from ..trace import Trace


def _leaves(value: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(value)]


def max_error(value: Any, expected: Any) -> float:
    """Largest absolute difference between two outputs of the same structure."""
    worst = 0.0
    for a, b in zip(_leaves(value), _leaves(expected), strict=True):
        if a.shape != b.shape:
            return float("inf")
        if a.size:
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            worst = max(worst, float(np.nanmax(diff)) if not np.isnan(diff).all() else 0.0)
    return worst


def close(value: Any, expected: Any) -> bool:
    try:
        return all(np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)
                   for a, b in zip(_leaves(value), _leaves(expected), strict=True))
    except ValueError:
        return False


class RunLog:
    """Runs stages of one trace, checks each result against the traced program's."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.results: dict[tuple[int, str], RunResult] = {}
        self._expected: Any = None

    def expected(self) -> Any:
        """The oracle: the traced program on the reference interpreter."""
        if self._expected is None:
            self._expected = self.trace.run(backend="reference", stage=0).value
        return self._expected

    def run(self, index: int, backend: str) -> dict[str, Any]:
        stage = self.trace.stages[index]
        row: dict[str, Any] = {"label": f"{stage.name} · {backend}", "stage": index,
                               "backend": backend, "seconds": None, "peak_bytes": None,
                               "check": "", "ok": None, "error": ""}
        try:
            result = self.trace.run(backend=backend, stage=index)
        except Exception as e:  # shown in the row: one failing backend must not stop the rest
            row["error"] = f"{type(e).__name__}: {e}"
            return row
        self.results[(index, backend)] = result
        ok = close(result.value, self.expected())
        error = 0.0 if ok else max_error(result.value, self.expected())
        row.update(seconds=result.seconds, peak_bytes=result.peak_bytes, ok=ok,
                   check="matches the traced program" if ok else
                   f"differs from the traced program (max error {error:.3g})")
        return row

    def result(self, index: int, backend: str) -> RunResult | None:
        return self.results.get((index, backend))

    def kernels(self, index: int) -> list[dict[str, Any]]:
        """The generated kernels of the latest run of stage `index` on each backend."""
        out = []
        for (k, backend), result in self.results.items():
            if k == index:
                out += [{"backend": backend, "name": kern.name, "source": kern.source,
                         "seconds": kern.seconds} for kern in result.kernels]
        return out
