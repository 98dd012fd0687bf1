"""explore(): trace a function, run the pipeline stage by stage, keep every stage."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from .analysis.cost import Cost, graph_cost
from .analysis.memory import MemoryPlan, plan
from .backends import dispatch, reference
from .backends.result import RunResult
from .frontend.jax import Traced, trace
from .ir.graph import Graph
from .passes import DEFAULT_PIPELINE
from .passes.base import Pass, PassReport
from .passes.pipeline import resolve, run_pipeline
from .passes.split import check_limit, with_split
from .units import format_bytes, parse_bytes

if TYPE_CHECKING:
    from .compare import Comparison

# The backends this machine can run ("gpu" only with CuPy and a GPU).
BACKENDS = dispatch.available()


@dataclass(frozen=True)
class Stage:
    name: str
    graph: Graph
    report: PassReport

    @cached_property
    def cost(self) -> Cost:
        return graph_cost(self.graph)

    @cached_property
    def memory(self) -> MemoryPlan:
        return plan(self.graph)

    def __repr__(self) -> str:
        changed = "changed" if self.report.changed else "unchanged"
        return f"<Stage {self.name}: {len(self.graph)} nodes, {changed}, {self.cost}>"


class Trace:
    """The stages of one exploration; stages[0] is the traced program."""

    def __init__(self, traced: Traced, stages: Sequence[Stage], example_args: tuple[Any, ...],
                 memory_limit: int | None = None) -> None:
        self.traced = traced
        self.stages = list(stages)
        self.example_args = example_args
        self.memory_limit = memory_limit

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    @property
    def name(self) -> str:
        return self.traced.fn_name

    def stage(self, key: int | str) -> Stage:
        if isinstance(key, int):
            return self.stages[key]
        for s in self.stages:
            if s.name == key:
                return s
        raise KeyError(f"no stage named {key!r}; stages: {', '.join(s.name for s in self.stages)}")

    def flat_args(self, args: tuple[Any, ...]) -> list[np.ndarray]:
        leaves, tree = jax.tree_util.tree_flatten(args)
        if tree != self.traced.in_tree:
            raise reference.ArgumentError(
                f"{self.name} was traced with arguments shaped like {self.traced.in_tree}, "
                f"got {tree}")
        return [np.asarray(x) for x in leaves]

    def run(self, *args: Any, backend: str = "reference", stage: int | str = -1) -> RunResult:
        """Run one stage on `args` (default: the traced example arguments) on a backend:
        "reference" (the interpreter), "cpu" (generated kernels), "gpu" (CuPy), "jax"."""
        if backend not in BACKENDS:
            raise ValueError(f"unknown or unavailable backend {backend!r}; available: "
                             f"{', '.join(BACKENDS)}")
        g = self.stage(stage).graph
        outs, seconds, peak, kernels = dispatch.run_graph(
            g, self.flat_args(args or self.example_args), backend, self.memory_limit)
        value = jax.tree_util.tree_unflatten(self.traced.out_tree, outs)
        return RunResult(value, seconds, peak, backend, kernels)

    def compare(self, *args: Any, backends: Sequence[str] = ("cpu",),
                baselines: Sequence[str] = ("numpy", "jax-eager", "jax-jit"),
                stages: Sequence[int | str] | None = None, repeats: int = 5,
                plot: bool = True, progress: bool = True) -> Comparison:
        """Time and peak memory of stages on backends against baselines: a table (and a plot);
        see explorer/compare.py."""
        from .compare import compare

        return compare(self, args or self.example_args, backends=backends, baselines=baselines,
                       stages=stages, repeats=repeats, plot=plot, progress=progress)

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


def explore(fn: Callable[..., Any], *args: Any, pipeline: str | Sequence[str | Pass] | None = None,
            memory_limit: int | str | None = None, check: bool | None = None) -> Trace:
    """Trace `fn(*args)` and run `pipeline` (default: the standard one) one stage at a time."""
    limit = parse_bytes(memory_limit) if memory_limit is not None else None
    passes = resolve(DEFAULT_PIPELINE if pipeline is None else pipeline)
    if limit is not None:  # the split pass, after dot-order (explorer/passes/split.py)
        passes = with_split(passes, limit)
    traced = trace(fn, *args)
    stages = [Stage("traced", traced.graph, PassReport(changed=False))]

    def record(p: Pass, g: Graph, report: PassReport) -> None:
        stages.append(Stage(p.name, g, report))

    final = run_pipeline(traced.graph, passes, check=check, on_stage=record)
    if limit is not None:
        check_limit(final, limit)
    result = Trace(traced, stages, args, limit)
    result.fn = fn  # the baselines of compare() call the user's own function
    return result
