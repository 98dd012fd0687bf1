"""`xla_pipeline(fn, *args)`: XLA's own passes as the stages of a Trace.

The function is compiled once through JAX with per-compilation `compiler_options` that make
XLA dump the module after every pass into a temporary folder; no process-wide XLA_FLAGS are
touched, so other compilations in the notebook are not slowed down or dumped. Each dump that
differs from the one before becomes a stage (named "<pipeline>.<pass>" as XLA names them),
between the module before optimisation ("traced") and the final module.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax

from ..frontend.arguments import ArgSpec
from ..frontend.hlo_graph import NodeIds, from_hlo
from ..frontend.jaxpr import Traced, arg_names
from ..passes.base import PassReport
from ..trace import Stage, Trace
from .dumps import DumpFile, module_body, read_dump


@dataclass(frozen=True)
class XlaCompilation:
    """What one compilation left behind: its dumps and XLA's own accounting."""

    fn_name: str
    backend: str
    dumps: tuple[DumpFile, ...]
    memory: Any  # compiled.memory_analysis(): CompiledMemoryStats, or None
    cost: dict[str, float]  # compiled.cost_analysis(): "flops", "bytes accessed", ...
    args: ArgSpec  # the traced and static leaves of the arguments
    fn: Callable[..., Any]
    out_tree: Any

    @property
    def final(self) -> DumpFile:
        return self.dumps[-1]


def compile_with_dumps(fn: Callable[..., Any], *args: Any, backend: str = "cpu") -> XlaCompilation:
    """Compile `fn(*args)` for `backend` with XLA dumping every pass; read the dumps back."""
    try:
        device = jax.devices(backend)[0]
    except RuntimeError as e:
        raise ValueError(f"no {backend!r} device for XLA to compile for: {e}") from None
    spec = ArgSpec.of(args)  # static leaves (functions, config) are closed over, as we trace
    flat_fn, dynamic = spec.closed(fn), spec.dynamic_leaves(args, str)
    placed = jax.device_put(dynamic, device)
    out_tree = jax.tree_util.tree_structure(jax.eval_shape(flat_fn, *dynamic))
    with tempfile.TemporaryDirectory(prefix="gambit-xla-") as folder:
        options = {"xla_dump_to": folder, "xla_dump_hlo_pass_re": ".*",
                   "xla_dump_hlo_as_text": True}
        compiled = jax.jit(flat_fn).lower(*placed).compile(compiler_options=options)
        dumps = read_dump(folder)
    try:
        memory = compiled.memory_analysis()
    except Exception:  # not every backend implements it; the comparison then says so
        memory = None
    cost = compiled.cost_analysis() or {}
    if isinstance(cost, list):  # older JAX: one dict per device
        cost = cost[0] if cost else {}
    name = getattr(fn, "__name__", type(fn).__name__)
    return XlaCompilation(name, backend, tuple(dumps), memory, dict(cost), spec, fn, out_tree)


def xla_pipeline(fn: Callable[..., Any], *args: Any, backend: str = "cpu") -> Trace:
    """A Trace of XLA's passes on `fn(*args)`: the module before optimisation, one stage per
    pass that changed it, and the final module (fusions show as `kernel` regions)."""
    return trace_of(compile_with_dumps(fn, *args, backend=backend), args)


def trace_of(comp: XlaCompilation, args: tuple[Any, ...]) -> Trace:
    ids = NodeIds()  # shared: an instruction keeps its node id from pass to pass
    first, *rest = comp.dumps
    graph = from_hlo(first.text, ids)
    stages = [Stage("traced", graph, PassReport(changed=False, notes=(
        "XLA's module before optimisation", f"file: {first.file}")))]
    previous, seen = module_body(first.text), {"traced": 1}
    for k, d in enumerate(rest):
        body = module_body(d.text)
        final = k == len(rest) - 1 and d.pipeline == ""
        if body == previous and not final:
            continue  # a pipeline's start, with nothing changed since the last dump
        g = from_hlo(d.text, ids)
        notes = [f"file: {d.file}"]
        if final:
            name = "after-optimizations"
            notes.insert(0, f"XLA's final module for {comp.backend}")
        else:
            name = d.stage_name
            notes.insert(0, f"XLA pass {d.pass_name!r} in pipeline {d.pipeline!r}"
                         if d.pass_name != "pipeline-start" else
                         f"XLA's dump at the start ('pipeline-start') of pipeline {d.pipeline!r}: "
                         "the module changed before it, outside the passes XLA dumps")
        if g == stages[-1].graph and body != previous:
            notes.append("the change is in layouts, metadata or attributes this IR does not keep")
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}#{seen[name]}"
        stages.append(Stage(name, g, PassReport(changed=body != previous, notes=tuple(notes))))
        previous = body
    names = tuple(str(p.attrs.get("name", "")) for p in graph.param_nodes)
    traced = Traced(graph, comp.args.tree, comp.out_tree, names, comp.fn_name, comp.args,
                    tuple(arg_names(comp.fn, comp.args.static_paths)))
    return Trace(traced, stages, tuple(args))
