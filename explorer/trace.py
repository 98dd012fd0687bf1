"""explore(): trace a function, run the pipeline stage by stage, keep every stage.

The public facade: a Trace is the record of the stages and their options; what it measures
(compare, profile, roofline, memory timeline, reproducers: explorer/measure/) and shows
(widget, HTML page: explorer/view/) are functions of it, which its methods call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import EllipsisType
from typing import Any

import jax
import numpy as np

from .analysis.cost import Cost, graph_cost
from .analysis.memory import MemoryPlan, plan
from .backends import reference, registry
from .backends.result import RunResult, owned
from .frontend.arguments import ArgumentMismatch
from .frontend.jaxpr import Traced, trace
from .ir.graph import Graph
from .measure.compare import Comparison, compare
from .measure.latest import latest
from .measure.numerics import Numerics, numerics
from .measure.profile import Profile, profile
from .measure.reproducer import reproducer
from .measure.roofline import Roofline, roofline
from .measure.timeline import MemoryTimeline, memory_timeline
from .options import CompileOptions
from .passes import DEFAULT_PIPELINE
from .passes.base import Pass, PassReport
from .passes.pipeline import configure, resolve, run_pipeline
from .passes.split import check_limit
from .units import format_bytes


def __getattr__(name: str) -> Any:
    if name == "BACKENDS":  # the backends this machine can run, as the registry says now
        return registry.available()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Stage:
    name: str
    graph: Graph
    report: PassReport
    pass_: Pass | None = None  # the pass that made it (None for the traced program)

    @cached_property
    def cost(self) -> Cost:
        return graph_cost(self.graph)

    @cached_property
    def memory(self) -> MemoryPlan:
        return plan(self.graph)

    def reproducer(self, path: Any = None, *, kernel: int | str | None = None,
                   backend: str = "cpu") -> str:
        """A standalone Python script that rebuilds this stage (or one `kernel` of it: its node
        id or body name) from its IR text, runs it on random inputs on `backend` and checks it
        against the reference interpreter, printing one line starting with `ok` or `MISMATCH`
        (explorer/measure/reproducer.py). With `path`, the script is also written there."""
        return reproducer(self, path, kernel=kernel, backend=backend)

    def __repr__(self) -> str:
        changed = "changed" if self.report.changed else "unchanged"
        return f"<Stage {self.name}: {len(self.graph)} nodes, {changed}, {self.cost}>"


class Trace:
    """The stages of one exploration; stages[0] is the traced program."""

    def __init__(self, traced: Traced, stages: Sequence[Stage], example_args: tuple[Any, ...],
                 memory_limit: int | None = None, options: CompileOptions | None = None) -> None:
        self.traced = traced
        self.stages = list(stages)
        self.example_args = example_args
        self.options = CompileOptions.make(memory_limit, base=options)
        # the passes as given, before the options filled them in and called for more (explore
        # sets them; replanned() runs them again)
        self.pipeline: list[Pass] = [s.pass_ for s in self.stages[1:] if s.pass_ is not None]

    @property
    def memory_limit(self) -> int | None:
        return self.options.memory_limit

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    @property
    def name(self) -> str:
        return self.traced.fn_name

    def stage(self, key: int | str) -> Stage:
        """A stage by index (negative counts from the end) or by name (the first so named)."""
        names = ", ".join(f"{k} {s.name}" for k, s in enumerate(self.stages))
        if isinstance(key, int | np.integer) and not isinstance(key, bool | np.bool_):
            n = len(self.stages)
            if not -n <= key < n:
                raise IndexError(f"no stage {key}: this trace has stages 0..{n - 1} "
                                 f"(or -{n}..-1): {names}")
            return self.stages[key]
        for s in self.stages:
            if s.name == key:
                return s
        raise KeyError(f"no stage named {key!r}; stages: {names}")

    def after_firing(self, stage: int | str, k: int) -> Graph:
        """Stage `stage`'s pass stepped rewrite by rewrite: the graph after its first `k`
        firings (0: the stage before; len(stage.report.rewrites): the stage itself). Rule-based
        passes only; others (fusion, splitting, reordering) step as a whole."""
        s = self.stage(stage)
        index = self.stages.index(s)
        n = len(s.report.rewrites)
        if index == 0:
            raise ValueError("the traced program is no pass: it has no firings to step")
        if not isinstance(k, int | np.integer) or isinstance(k, bool) or not 0 <= k <= n:
            raise IndexError(f"stage {s.name!r} logged {n} firings: k must be 0..{n}, got {k!r}")
        if k == n:
            return s.graph
        stepper = getattr(s.pass_, "after_firings", None)
        if stepper is None:
            raise TypeError(f"pass {s.name!r} is not rule-driven (no after_firings): it steps "
                            f"as a whole")
        return stepper(self.stages[index - 1].graph, int(k))

    def flat_args(self, args: tuple[Any, ...]) -> list[np.ndarray]:
        """The graph's parameters from arguments like the traced ones (static leaves must
        equal the traced ones; typed PRNG keys become their key data)."""
        try:
            return self.traced.flat_args(args)
        except ArgumentMismatch as e:
            raise reference.ArgumentError(f"{self.name}: {e}") from None

    def run(self, *args: Any, backend: str | None = None, stage: int | str = -1,
            **settings: Any) -> RunResult:
        """Run one stage on `args` (default: the traced example arguments) on a registered
        backend (default: the options' backend): "reference" (the interpreter), "cpu"
        (generated kernels), "gpu" (CuPy), "jax", "dask" (split loops on a Dask cluster:
        `client=` a distributed.Client or a scheduler address); see
        `explorer.backends.registry`. `settings` are the backend's run settings."""
        name = backend or self.options.backend
        chosen = registry.get(name)  # unknown or unavailable: a BackendError naming the reason
        g = self.stage(stage).graph
        flat = self.flat_args(args or self.example_args)
        with chosen.session(**settings):
            r = registry.run_graph(g, flat, name, self.options)
        value = jax.tree_util.tree_unflatten(self.traced.out_tree, owned(list(r.outputs), flat))
        return RunResult(value, r.seconds, r.peak_bytes, name, r.kernels, r.workers, r.dashboard,
                         r.program, r.devices)

    def compare(self, *args: Any, backends: Sequence[str] = ("cpu",),
                baselines: Sequence[str] = ("numpy", "jax-eager", "jax-jit"),
                stages: Sequence[int | str] | None = None, repeats: int = 5,
                plot: bool = True, progress: bool = True) -> Comparison:
        """Time and peak memory of stages on backends against baselines: a table (and a plot);
        see explorer/measure/compare.py."""
        return compare(self, args or self.example_args, backends=backends, baselines=baselines,
                       stages=stages, repeats=repeats, plot=plot, progress=progress)

    def profile(self, *args: Any, stage: int | str = -1, backend: str | None = None,
                repeats: int = 5, **settings: Any) -> Profile:
        """Measured seconds of every node, kernel, dot and loop of a stage on a backend
        (explorer/measure/profile.py); the widget draws the latest one as a heat overlay
        (measure/latest.py). `settings` are the backend's run settings, as for `run`."""
        taken = profile(self, args or self.example_args, stage=stage,
                        backend=backend or self.options.backend, repeats=repeats, **settings)
        latest(self).profile = taken
        return taken

    def roofline(self, *args: Any, stage: int | str = -1, backend: str | None = None,
                 repeats: int = 5, xla: bool = True, remeasure: bool = False,
                 **settings: Any) -> Roofline:
        """One row per kernel, dot and loop of a stage (FLOPs, bytes, seconds, achieved rates)
        with this machine's measured peaks (cached per machine; `remeasure=True` measures
        them again), and jax.jit's compiled program as one more point
        (explorer/measure/roofline.py)."""
        taken = roofline(self, args or self.example_args, stage=stage,
                         backend=backend or self.options.backend, repeats=repeats, xla=xla,
                         remeasure=remeasure, **settings)
        latest(self).roofline = taken
        return taken

    def memory_timeline(self, *args: Any, stage: int | str = -1, backend: str | None = None,
                        **settings: Any) -> MemoryTimeline:
        """Planned and measured live bytes along a stage's schedule, each buffer's lifetime,
        the peak and what is live there (explorer/measure/timeline.py)."""
        taken = memory_timeline(self, args or self.example_args, stage=stage,
                                backend=backend or self.options.backend, **settings)
        latest(self).timeline = taken
        return taken

    def numerics(self, *args: Any, seed: int | None = None) -> Numerics:
        """Each stage's outputs and each surviving node's error against the traced program
        computed in float64, stage by stage on the reference interpreter, on `args` (default:
        the traced example arguments) or on random inputs drawn with `seed`;
        `.first_change(rtol=...)` names the first stage, and the firing, that moved the
        outputs (explorer/measure/numerics.py). The widget colours nodes by the latest."""
        taken = numerics(self, args or None, seed=seed)
        latest(self).numerics = taken
        return taken

    def summary(self) -> str:
        rows = [f"{'stage':<22}{'nodes':>7}{'FLOPs':>16}{'bytes':>14}{'peak':>12}  rewrites"]
        for s in self.stages:
            c = s.cost
            rows.append(f"{s.name:<22}{len(s.graph):>7}{c.flops:>16,}{c.bytes:>14,}"
                        f"{format_bytes(c.peak_bytes):>12}  {len(s.report.rewrites)}")
        return "\n".join(rows)

    def __repr__(self) -> str:
        return f"<Trace of {self.name}: {len(self.stages)} stages>\n{self.summary()}"

    def widget(self, **options: Any) -> Any:
        """The step-through pass widget (explorer/view/widget.py)."""
        from .view.widget import TraceWidget

        return TraceWidget(self, **options)

    def to_html(self, path: Any, **options: Any) -> Any:
        """Write a standalone HTML page of this trace: no kernel, no network needed."""
        from .view.export import to_html

        return to_html(self, path, **options)

    def replanned(self, memory_limit: int | str | None | EllipsisType = ...,
                  pipeline: str | Sequence[str | Pass] | None = None,
                  reuse: Sequence[Sequence[Stage]] = (), check: bool | None = None) -> Trace:
        """The same traced program through `pipeline` (default: this trace's, `self.pipeline`)
        under `memory_limit` (default: this trace's; None: no limit), without tracing it
        again: a stage whose pass and input graph are the same as one of this trace's is that
        stage (a pass is a function of its graph), so a new limit re-runs the split and what
        it changed; so is one of `reuse` (the stages of other plans of this program). Raises
        as explore() does (an unknown pass: PipelineError naming the registered ones; an
        infeasible limit: InfeasibleMemoryLimit), leaving this trace as it was. `check`: verify
        each new stage (passes/pipeline.py; default: under pytest or GAMBIT_VERIFY=1)."""
        options = self.options if memory_limit is ... else \
            self.options.with_(memory_limit=None) if memory_limit is None else \
            CompileOptions.make(memory_limit, base=self.options)
        given = resolve(self.pipeline if pipeline is None else pipeline)
        stages = [self.stages[0]]

        def record(p: Pass, g: Graph, report: PassReport) -> None:
            stages.append(Stage(p.name, g, report, p))

        known = [pair for plan in (self.stages, *reuse) for pair in zip(plan, plan[1:])]
        for p in configure(given, options):
            g = stages[-1].graph  # a pass is a function of its graph: one run per (pass, graph)
            same = [s for prev, s in known if prev.graph is g and s.pass_ == p]
            if same:
                stages.append(same[0])
            else:
                run_pipeline(g, [p], check=check, on_stage=record)
        final = stages[-1].graph
        if options.memory_limit is not None:
            check_limit(final, options.memory_limit, options.backend, options.per_device)
        result = Trace(self.traced, stages, self.example_args, options=options)
        result.fn = getattr(self, "fn", None)
        result.pipeline = given
        return result


def explore(fn: Callable[..., Any], *args: Any, pipeline: str | Sequence[str | Pass] | None = None,
            memory_limit: int | str | None = None, check: bool | None = None,
            options: CompileOptions | None = None) -> Trace:
    """Trace `fn(*args)` and run `pipeline` (default: the standard one) one stage at a time.
    `memory_limit` is sugar for `options=CompileOptions(memory_limit=...)`; the pipeline's
    passes read the options they serve (explorer/passes/pipeline.py)."""
    options = CompileOptions.make(memory_limit, base=options)
    registry.get(options.backend)  # an unknown backend fails before any work
    given = resolve(DEFAULT_PIPELINE if pipeline is None else pipeline)
    traced = trace(fn, *args)
    start = Trace(traced, [Stage("traced", traced.graph, PassReport(changed=False))], args,
                  options=options)
    start.fn = fn  # the baselines of compare() call the user's own function
    return start.replanned(pipeline=given, check=check)
