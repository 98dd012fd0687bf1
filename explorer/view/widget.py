"""trace.widget(): the step-through pass widget, an anywidget.

Python owns the state. The front end (extension/src, bundled into explorer/static/) draws the
traits, one per key of schema.Traits, and writes back only the user's choices (schema.Choice)
and its requests: a run (schema.RunMessage), a profile (ProfileMessage), a reproducer script
(ReproducerMessage, answered by a ReproducerFile message). Each stage's view is built on
first visit and cached, so stepping back is instant.
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

import anywidget
import traitlets as t
from typing_extensions import is_typeddict

from ..backends import registry
from ..measure.compare import BASELINES
from ..passes import names as pass_names
from .export import STATIC, static_html, to_html
from .measured import ProfileLog, reproducer_file
from .payload import (
    VIEW_KEYS,
    error_data,
    firings,
    overlay_state,
    remarks_at,
    reveal_for,
    stage_summaries,
    stage_view,
)
from .render import DEFAULT_MAX_NODES
from .runs import RunLog
from .schema import DEFAULTS, ProfileState, RemarkRow, ReproducerFile, RunState, StageView, Traits, fields
from .source import source_listing
from .summary import summary_html
from .whatif import WhatIfs, kept_views, specs_of, trace_limit_text

if TYPE_CHECKING:
    from ..measure.profile import Profile
    from ..measure.protocol import TraceLike

# one background worker builds the views a widget will likely show next (graphviz runs as a
# subprocess, so this overlaps with the kernel's own work)
_PREFETCH = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gambit-view")
_SCALARS = {str: t.Unicode, int: t.Int, float: t.Float, bool: t.Bool}


def trait(tp: Any, default: Any = None) -> t.TraitType:
    """The traitlets type holding a value of the schema's type `tp`."""
    origin, args = get_origin(tp) or tp, get_args(tp)
    kw = {} if default is None else {"default_value": default}
    if origin is Literal:
        origin = type(args[0])
    if origin is list:
        return t.List(_SCALARS[args[0]]() if args[0] in _SCALARS else None, **kw)
    if origin is dict or is_typeddict(tp):
        return t.Dict(**kw)
    return _SCALARS[origin](**kw)


def _synced_traits(namespace: dict[str, Any]) -> None:
    """One synced trait per key of schema.Traits, starting at schema.DEFAULTS or else at the
    type's zero ("", 0, False, [], {})."""
    namespace.update({name: trait(tp, DEFAULTS.get(name)).tag(sync=True)
                      for name, tp in fields(Traits).items()})


def profile_default(chosen: str, backends: Sequence[str]) -> str:
    """The backend a profile runs on first: the options' backend unless that is the reference
    interpreter (a profile of generated kernels says more), else cpu, else what there is."""
    for b in ((chosen,) if chosen != "reference" else ()) + ("cpu", chosen):
        if b in backends:
            return b
    return backends[0] if backends else chosen


SyncedTraits = types.new_class("SyncedTraits", (anywidget.AnyWidget,), exec_body=_synced_traits)


class TraceWidget(SyncedTraits):
    _esm = STATIC / "widget.js"
    _css = STATIC / "widget.css"

    def __init__(self, trace: TraceLike, *, max_nodes: int = DEFAULT_MAX_NODES,
                 backends: Sequence[str] | None = None, repeats: int = 5,
                 prefetch: bool = True, **kwargs: Any) -> None:
        self.trace = trace
        self.prefetch = prefetch
        self.max_nodes = max_nodes
        self._views: dict[tuple, StageView] = {}
        self.runs = RunLog(trace, repeats)
        self.measured = ProfileLog(trace, repeats)
        runs = registry.sweep() if backends is None else backends  # dask: when asked by name
        backends = registry.available() if backends is None else backends
        kwargs.setdefault("run_backends", list(runs))
        kwargs.setdefault("profile_backend", profile_default(trace.options.backend, backends))
        kwargs.update(self.measured.data())
        kwargs = {**overlay_state(trace), **kwargs}
        source = source_listing(trace.stages[0].graph)
        kwargs.setdefault("show_source", bool(source))
        self._whatifs, self._whatif_live = WhatIfs(), False
        kwargs.setdefault("memory_limit", trace_limit_text(trace))
        kwargs.setdefault("pipeline", specs_of(trace))
        kwargs.update(pass_names=pass_names(), whatif=self._whatifs.status(trace))
        super().__init__(title=trace.name, stages=stage_summaries(trace), source=source,
                         backends=list(backends), **kwargs)
        self.on_msg(self._on_message)
        self._show(self.index)
        self._whatif_live = True
        if (self.memory_limit, list(self.pipeline)) != (trace_limit_text(trace),
                                                         specs_of(trace)):
            self.replan()  # asked for in the options

    # ------------------------------------------------------------ state

    @t.validate("index")
    def _clamp(self, proposal: dict[str, Any]) -> int:
        return max(0, min(int(proposal["value"]), len(self.trace.stages) - 1))

    @t.validate("firing")
    def _clamp_firing(self, proposal: dict[str, Any]) -> int:
        k = int(proposal["value"])
        return k if 1 <= k <= firings(self.trace, self.index) else -1

    @t.observe("index")
    def _index_changed(self, change: dict[str, Any]) -> None:
        self.firing = -1  # a new stage opens on its whole pass
        self._show(change["new"])

    @t.observe("opened", "search")
    def _groups_changed(self, change: dict[str, Any]) -> None:
        self._show(self.index, keep_selection=True)

    @t.observe("firing")
    def _firing_changed(self, change: dict[str, Any]) -> None:
        try:
            self._show(self.index)
        except Exception as e:  # a pass whose replay fails: say so, show the whole pass
            warnings.warn(f"cannot step stage {self.index} ({self.trace.stages[self.index].name})"
                          f" firing by firing: {type(e).__name__}: {e}", stacklevel=2)
            self.firing = -1
            return
        if change["new"] >= 1:
            self.selected_rewrite = 0  # the one rewrite of the firing, lit

    def view(self, index: int, firing: int | None = None) -> StageView:
        """Stage `index` (or its pass's `firing`-th firing; the chosen one by default) with the
        groups the user opened and those holding search hits open; cached per (stage, firing,
        choices), so stepping back or closing again is instant."""
        firing = (self.firing if index == self.index else -1) if firing is None else firing
        return self._view(index, dict(self.opened), self.search, firing)

    def _view(self, index: int, opened: dict[str, bool], search: str,
              firing: int = -1) -> StageView:
        trace, views = self.trace, self._views  # a re-plan swaps both, the trace first
        reveal = reveal_for(trace, index, search, firing)
        key = (index, firing, frozenset(opened.items()), reveal)
        if key not in views:
            view = stage_view(trace, index, self.max_nodes, opened, reveal, firing)
            if trace is not self.trace:  # re-planned meanwhile: a view of the old plan
                return view
            views[key] = view
        return views[key]

    def _prefetch(self, index: int) -> None:
        """Build the next stages' views off the main path, one at a time, so that stepping
        forward finds them ready (a view depends only on the trace and the choices)."""
        if not self.prefetch:
            return
        opened, search = dict(self.opened), self.search
        if self.firing >= 1 and self.firing < firings(self.trace, index):  # the next firing
            _PREFETCH.submit(self._view, index, opened, search, self.firing + 1)
        for k in (index + 1, index + 2):
            if k < len(self.trace.stages):
                _PREFETCH.submit(self._view, k, opened, search)

    def _show(self, index: int, keep_selection: bool = False) -> None:
        view = self.view(index)
        with self.hold_sync():
            for key in VIEW_KEYS:
                if getattr(self, key) != view[key]:
                    setattr(self, key, view[key])
            if not keep_selection:
                self.selected_rewrite = -1
                self.kernels = self.runs.kernels(index)
            self._errors_changed()
        self._prefetch(index)

    @t.observe("colour_by")
    def _errors_changed(self, change: dict[str, Any] | None = None) -> None:
        """The trace's latest numerics (taken since?) for colouring by error."""
        errors = error_data(self.trace)
        if errors != self.errors:
            self.errors = errors

    def why(self, node: int | str | None = None) -> list[RemarkRow]:
        """The remarks the why tab lists: about node `node` (an id, or a box key such as
        "n5"; default: the selected box), or all of the stage's when none is selected."""
        key = self.selected_node if node is None else f"n{node}" if isinstance(node, int) else node
        return remarks_at(self.remarks, key)

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
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "run":
            wanted = content.get("backends", self.run_backends)
            self.run([b for b in wanted if b in self.backends],
                     stage=int(content.get("stage", self.index)),
                     baselines=bool(content.get("baselines", self.run_baselines)))
        elif kind == "profile":
            self.profile(content.get("backend") or None, stage=int(content.get("stage", self.index)))
        elif kind == "whatif":
            self.find_limits()
        elif kind == "reproducer":
            kernel = content.get("kernel")
            self.send(dict(self.reproducer(int(content.get("stage", self.index)),
                                           kernel if isinstance(kernel, int | str) else None)))

    def _put(self, row: dict[str, Any]) -> None:
        """Replace the row with the same key, else add it: baselines first, in BASELINES'
        order (NumPy, JAX eager, jax.jit) whichever was measured first, then stages."""
        rows = list(self.run_rows)
        keys = [r.get("key") for r in rows]
        order = [f"baseline:{b}" for b in BASELINES]

        def rank(key: Any) -> int:
            return order.index(key) if key in order else len(order)

        if row["key"] in keys:
            rows[keys.index(row["key"])] = row
        elif row["kind"] == "baseline":
            rows.insert(sum(r.get("kind") == "baseline" and rank(r.get("key")) <= rank(row["key"])
                            for r in rows), row)
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
            self.run_state = RunState(running=True, done=k, total=len(jobs),
                                      message=f"measuring {label} ({k + 1}/{len(jobs)})",
                                      pending=[j[2] for j in jobs[k:]])
            row = self.runs.baseline(name) if kind == "baseline" else self.runs.run(index, name)
            rows.append(row)
            self._put(row)
        failed = sum(bool(r["error"]) for r in rows)
        self.run_state = RunState(running=False, done=len(jobs), total=len(jobs),
                                  message=f"measured {len(jobs)} runs"
                                          + (f", {failed} could not run" if failed else ""),
                                  pending=[])
        if index == self.index:
            self.kernels = self.runs.kernels(index)
        return rows

    # ------------------------------------------------------------ profiling

    def profile(self, backend: str | None = None, stage: int | None = None) -> Profile | None:
        """Profile the stage shown (or `stage`) and the stage before it on `backend` (default:
        the widget's profile_backend), with the stage's roofline and memory timeline: the
        graphs get a heat overlay of where the time goes, the kernels tab sorts by it, the
        roofline and memory tabs draw the rest (explorer/measure/profile.py, roofline.py,
        timeline.py). Returns the stage's Profile, or None when it could not run: then the
        widget says why (for a backend that cannot run here, the registry's reason)."""
        index = self.index if stage is None else max(0, min(int(stage), len(self.trace.stages) - 1))
        name = backend or self.profile_backend or self.trace.options.backend
        jobs = self.measured.jobs(index)

        def progress(k: int, label: str) -> None:
            self.profile_state = ProfileState(running=True, error="",
                                              message=f"measuring the {label} on {name} "
                                                      f"({k + 1}/{len(jobs)})")

        if self.prefetch:  # views built in the background would run beside the timed runs
            _PREFETCH.submit(lambda: None).result()
        try:
            errors = self.measured.take(index, name, progress)
        except registry.BackendError as e:
            self.profile_state = ProfileState(running=False, message="", error=str(e))
            return None
        with self.hold_sync():
            for key, value in self.measured.data().items():
                setattr(self, key, value)
            done = self.measured.profiles.get(index)
            message = "" if done is None else (
                f"profiled stage {index} {done.stage} on {name}: {done.total * 1e3:.3f} ms")
            self.profile_state = ProfileState(running=False, message=message,
                                              error="; ".join(errors))
        return done

    def reproducer(self, stage: int | None = None, kernel: int | str | None = None,
                   backend: str | None = None) -> ReproducerFile:
        """Stage `stage`'s standalone reproducer script (default: the stage shown), or one
        kernel's (its node id or name), on `backend` (default: the profile backend), as the
        front end saves it: {"filename", "text", "error"} (Stage.reproducer)."""
        index = self.index if stage is None else max(0, min(int(stage), len(self.trace.stages) - 1))
        return reproducer_file(self.trace, index, kernel, backend or self.profile_backend or "cpu")

    def comparison(self, plot: bool = True) -> Any:
        """The measured rows as trace.compare() shows them: its table and plot."""
        return self.runs.comparison([r["key"] for r in self.run_rows], plot=plot)

    def to_html(self, path: Any) -> str:
        """Export as trace.to_html does, with this widget's runs and kernels included."""
        return to_html(self.trace, path, max_nodes=self.max_nodes, runs=self.runs,
                       run_rows=list(self.run_rows), measured=self.measured.data())

    # ------------------------------------------------------------ what if

    @t.observe("memory_limit", "pipeline")
    def _whatif_changed(self, change: dict[str, Any]) -> None:
        if self._whatif_live:
            self.replan()

    @t.observe("run_rows")
    def _runs_changed(self, change: dict[str, Any]) -> None:
        self.whatif = self._whatifs.status(self.trace, self.run_rows)

    def replan(self) -> bool:
        """Plan the traced program again under the `memory_limit` and `pipeline` traits
        (explorer/view/whatif.py) and show the new plan, on the stage of the same name. A
        change that cannot be planned (an unreadable or infeasible limit, an unknown pass, a
        pass that fails) is refused whole: the plan shown stays, the two traits go back to
        it and `whatif["error"]` says why. Returns whether it re-planned."""
        self.pass_names = pass_names()
        self.whatif = {**self.whatif, "working": "re-planning…"}
        try:
            trace = self._whatifs.replan(self.trace, self.memory_limit, list(self.pipeline))
        except Exception as e:  # refused: nothing of it is shown
            self._whatifs.refused = e
            self._whatif_live = False
            try:
                self.memory_limit = trace_limit_text(self.trace)
                self.pipeline = specs_of(self.trace)
            finally:
                self._whatif_live = True
            self.whatif = self._whatifs.status(self.trace, self.run_rows)
            return False
        self._whatifs.refused = None
        self._swap(trace)
        return True

    def find_limits(self) -> dict[str, Any]:
        """Find the limits the split can meet under the pipeline shown (the what-if slider's
        range; once per pipeline) and return the `whatif` trait."""
        self.pass_names = pass_names()
        if self._whatifs.known(self.trace) is None:
            self.whatif = {**self.whatif, "working": "finding the smallest feasible limit…"}
            try:
                self._whatifs.find_limits(self.trace)
            except Exception as e:
                self._whatifs.refused = e
        self.whatif = self._whatifs.status(self.trace, self.run_rows)
        return dict(self.whatif)

    def _swap(self, trace: TraceLike) -> None:
        """Show `trace` (a re-plan of the one shown): its stages, on the stage shown if it
        has one of that name; runs and profiles of the old plan's stages go, baselines stay."""
        old = self.trace.stages
        name = old[self.index].name
        nth = sum(s.name == name for s in old[:self.index])
        same = [k for k, s in enumerate(trace.stages) if s.name == name]
        index = same[nth] if nth < len(same) else min(self.index, len(trace.stages) - 1)
        runs = RunLog(trace, self.runs.repeats)
        runs.measurements.update({k: m for k, m in self.runs.measurements.items()
                                  if k.startswith("baseline:")})
        kept = kept_views(self.trace, trace, self._views)
        self.trace, self._views, self.runs = trace, kept, runs  # the trace first (see _view)
        self.measured = ProfileLog(trace, self.measured.repeats)
        with self.hold_sync():
            self.stages = stage_summaries(trace)
            for key, value in self.measured.data().items():
                setattr(self, key, value)
            self.run_rows = [r for r in self.run_rows if r["kind"] == "baseline"]
            self.index = index
            self.firing = -1
            self._show(self.index)
            self.whatif = self._whatifs.status(trace, self.run_rows)

    # ------------------------------------------------------------ static fallback

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The live widget, plus a static HTML summary for front ends that show one output
        (GitHub, nbviewer)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if data is not None:
            data["text/html"] = summary_html(self.trace, max_nodes=self.max_nodes)
        return bundle

    def _ipython_display_(self) -> None:
        """Two outputs: the live widget, and the same view with no kernel behind it, which
        the live widget hides while it runs. A saved notebook reopened (after a kernel
        restart, or untrusted) still shows the trace: the step-through view where scripts
        may run, else the summary, instead of "model not found" or stripped SVG."""
        from IPython.display import HTML, display

        bundle = super()._repr_mimebundle_()
        display(bundle[0] if isinstance(bundle, tuple) else bundle, raw=True)
        display(HTML(self.static_html()))

    def static_html(self) -> str:
        return static_html(self.trace, summary_html(self.trace, max_nodes=self.max_nodes),
                           max_nodes=self.max_nodes, runs=self.runs, run_rows=list(self.run_rows),
                           measured=self.measured.data())
