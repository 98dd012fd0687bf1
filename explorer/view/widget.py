"""trace.widget(): the step-through pass widget, an anywidget.

Python owns the state. The front end (extension/src, bundled into explorer/static/) draws the
traits below and writes back only the user's choices: `index`, `hide_unchanged`, `search`,
`selected_rewrite`, `tab`, `sync_panes`, the run tab's `run_backends` and `run_baselines`, and
a "run" message. Each stage's view is built on first visit
and cached, so stepping back is instant.
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Any

import anywidget
import traitlets as t

from ..compare import BASELINES
from ..trace import BACKENDS, Trace
from .payload import VIEW_KEYS, stage_summaries, stage_view
from .render import DEFAULT_MAX_NODES
from .runs import RunLog
from .summary import summary_html

STATIC = pathlib.Path(__file__).resolve().parent.parent / "static"


class TraceWidget(anywidget.AnyWidget):
    _esm = STATIC / "widget.js"
    _css = STATIC / "widget.css"

    title = t.Unicode("").tag(sync=True)
    stages = t.List(t.Dict()).tag(sync=True)
    index = t.Int(0).tag(sync=True)
    hide_unchanged = t.Bool(False).tag(sync=True)
    search = t.Unicode("").tag(sync=True)
    tab = t.Unicode("diff").tag(sync=True)
    selected_rewrite = t.Int(-1).tag(sync=True)
    sync_panes = t.Bool(True).tag(sync=True)  # pan and zoom the two graphs together
    # the current stage's view (see payload.stage_view)
    before_svg = t.Unicode("").tag(sync=True)
    after_svg = t.Unicode("").tag(sync=True)
    before_words = t.Dict().tag(sync=True)
    after_words = t.Dict().tag(sync=True)
    diff_counts = t.Dict().tag(sync=True)
    note = t.Unicode("").tag(sync=True)
    ir_diff = t.List().tag(sync=True)
    rewrites = t.List().tag(sync=True)
    cost = t.Dict().tag(sync=True)
    # running stages
    backends = t.List(t.Unicode()).tag(sync=True)
    run_backends = t.List(t.Unicode()).tag(sync=True)  # the run tab's choices
    run_baselines = t.Bool(True).tag(sync=True)
    run_rows = t.List(t.Dict()).tag(sync=True)
    run_state = t.Dict({"running": False, "done": 0, "total": 0, "message": "",
                        "pending": []}).tag(sync=True)
    kernels = t.List(t.Dict()).tag(sync=True)
    interactive = t.Bool(True).tag(sync=True)  # False in an exported page: nothing to run on

    def __init__(self, trace: Trace, *, max_nodes: int = DEFAULT_MAX_NODES,
                 backends: Sequence[str] = BACKENDS, repeats: int = 5, **kwargs: Any) -> None:
        self.trace = trace
        self.max_nodes = max_nodes
        self._views: dict[int, dict[str, Any]] = {}
        self.runs = RunLog(trace, repeats)
        kwargs.setdefault("run_backends", list(backends))
        super().__init__(title=trace.name, stages=stage_summaries(trace),
                         backends=list(backends), **kwargs)
        self.on_msg(self._on_message)
        self._show(self.index)

    # ------------------------------------------------------------ state

    @t.validate("index")
    def _clamp(self, proposal: dict[str, Any]) -> int:
        return max(0, min(int(proposal["value"]), len(self.trace.stages) - 1))

    @t.observe("index")
    def _index_changed(self, change: dict[str, Any]) -> None:
        self._show(change["new"])

    def view(self, index: int) -> dict[str, Any]:
        if index not in self._views:
            self._views[index] = stage_view(self.trace, index, self.max_nodes)
        return self._views[index]

    def _show(self, index: int) -> None:
        view = self.view(index)
        with self.hold_sync():
            for key in VIEW_KEYS:
                setattr(self, key, view[key])
            self.selected_rewrite = -1
            self.kernels = self.runs.kernels(index)

    def step(self, delta: int) -> int:
        """Move `delta` visible stages (unchanged ones are skipped when hidden)."""
        visible = [s["index"] for s in self.stages if s["changed"] or not self.hide_unchanged]
        here = self.index
        later = [i for i in visible if i > here] if delta > 0 else \
            [i for i in reversed(visible) if i < here]
        if later:
            self.index = later[min(abs(delta), len(later)) - 1]
        return self.index

    # ------------------------------------------------------------ running

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "run":
            wanted = content.get("backends", self.run_backends)
            self.run([b for b in wanted if b in self.backends],
                     stage=int(content.get("stage", self.index)),
                     baselines=bool(content.get("baselines", self.run_baselines)))

    def _put(self, row: dict[str, Any]) -> None:
        """Replace the row with the same key, else add it: baselines first, then stages."""
        rows = list(self.run_rows)
        keys = [r.get("key") for r in rows]
        if row["key"] in keys:
            rows[keys.index(row["key"])] = row
        elif row["kind"] == "baseline":
            rows.insert(sum(r.get("kind") == "baseline" for r in rows), row)
        else:
            rows.append(row)
        self.run_rows = rows

    def run(self, backends: Sequence[str] | None = None, stage: int | None = None,
            baselines: bool | Sequence[str] = True) -> list[dict]:
        """Measure a stage on backends against the baselines (NumPy, JAX eager, jax.jit; each
        measured once per widget), one row at a time with progress; returns the new rows."""
        index = self.index if stage is None else stage
        names = list(BASELINES) if baselines is True else list(baselines or ())
        have = {r.get("key") for r in self.run_rows}
        jobs = [("baseline", b, f"baseline {b}") for b in names if f"baseline:{b}" not in have]
        jobs += [("stage", b, f"{self.trace.stages[index].name} on {b}")
                 for b in (self.backends if backends is None else backends)]
        rows = []
        for k, (kind, name, label) in enumerate(jobs):
            self.run_state = {"running": True, "done": k, "total": len(jobs),
                              "message": f"measuring {label} ({k + 1}/{len(jobs)})",
                              "pending": [j[2] for j in jobs[k:]]}
            row = self.runs.baseline(name) if kind == "baseline" else self.runs.run(index, name)
            rows.append(row)
            self._put(row)
        failed = sum(bool(r["error"]) for r in rows)
        self.run_state = {"running": False, "done": len(jobs), "total": len(jobs),
                          "message": f"measured {len(jobs)} runs"
                                     + (f", {failed} could not run" if failed else ""),
                          "pending": []}
        if index == self.index:
            self.kernels = self.runs.kernels(index)
        return rows

    def comparison(self, plot: bool = True) -> Any:
        """The measured rows as trace.compare() shows them: its table and plot."""
        return self.runs.comparison([r["key"] for r in self.run_rows], plot=plot)

    def to_html(self, path: Any) -> str:
        """Export as trace.to_html does, with this widget's runs and kernels included."""
        from .export import to_html

        return to_html(self.trace, path, max_nodes=self.max_nodes, runs=self.runs,
                       run_rows=list(self.run_rows))

    # ------------------------------------------------------------ static fallback

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The live widget, plus a static HTML summary for saved notebooks (e.g. on GitHub)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if data is not None:
            data["text/html"] = summary_html(self.trace, max_nodes=self.max_nodes)
        return bundle
