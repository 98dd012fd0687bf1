"""trace.widget(): the step-through pass widget, an anywidget.

Python owns the state. The front end (extension/src, bundled into explorer/static/) draws the
traits below and writes back only the user's choices: `index`, `hide_unchanged`, `search`,
`selected_rewrite`, `tab`, and a "run" message. Each stage's view is built on first visit
and cached, so stepping back is instant.
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Any

import anywidget
import traitlets as t

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
    run_rows = t.List(t.Dict()).tag(sync=True)
    run_state = t.Dict({"running": False, "done": 0, "total": 0, "message": ""}).tag(sync=True)
    kernels = t.List(t.Dict()).tag(sync=True)
    interactive = t.Bool(True).tag(sync=True)  # False in an exported page: nothing to run on

    def __init__(self, trace: Trace, *, max_nodes: int = DEFAULT_MAX_NODES,
                 backends: Sequence[str] = BACKENDS, **kwargs: Any) -> None:
        self.trace = trace
        self.max_nodes = max_nodes
        self._views: dict[int, dict[str, Any]] = {}
        self.runs = RunLog(trace)
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
            wanted = [b for b in content.get("backends", self.backends) if b in self.backends]
            self.run(wanted or self.backends, stage=int(content.get("stage", self.index)))

    def run(self, backends: Sequence[str] | None = None, stage: int | None = None) -> list[dict]:
        """Run a stage on backends one by one, reporting progress; returns the new rows."""
        index = self.index if stage is None else stage
        todo = list(backends or self.backends)
        rows = []
        for k, backend in enumerate(todo):
            self.run_state = {"running": True, "done": k, "total": len(todo),
                              "message": f"running {self.trace.stages[index].name} "
                                         f"on {backend} ({k + 1}/{len(todo)})"}
            row = self.runs.run(index, backend)
            rows.append(row)
            self.run_rows = self.run_rows + [row]
        self.run_state = {"running": False, "done": len(todo), "total": len(todo),
                          "message": f"ran on {', '.join(todo)}"}
        if index == self.index:
            self.kernels = self.runs.kernels(index)
        return rows

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
