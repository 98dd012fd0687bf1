"""`xla_pipeline(fn, *args)`: XLA's own passes as the stages of a Trace.

The function is compiled once through JAX with per-compilation `compiler_options` that make
XLA dump the module after every pass into a temporary folder; no process-wide XLA_FLAGS are
touched, so other compilations in the notebook are not slowed down or dumped. Each dump that
differs from the one before becomes a stage (named "<pipeline>.<pass>" as XLA names them),
between the module before optimisation ("traced") and the final module.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import jax

from ..frontend.arguments import ArgSpec
from ..frontend.hlo_graph import NodeIds, from_hlo
from ..frontend.jaxpr import Traced, arg_names
from ..frontend.locations import user_location
from ..passes.base import PassReport
from ..trace import Stage, Trace
from .dumps import DumpFile, module_body, read_dump
from .spmd import PARTITIONER_CLEANUP, SpmdSummary, memory_line, partitioning_stage, spmd_summary


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
    devices: int = 1  # the devices the compiled program runs on: its partitions

    @property
    def final(self) -> DumpFile:
        return self.dumps[-1]


def compile_with_dumps(fn: Callable[..., Any], *args: Any, backend: str = "cpu") -> XlaCompilation:
    """Compile `fn(*args)` for `backend` with XLA dumping every pass; read the dumps back.

    A function the user jitted (`jax.jit(f, in_shardings=..., out_shardings=...)`) is lowered
    as they jitted it; a plain function is jitted here. Arguments keep their own shardings
    (arrays placed with `jax.device_put(x, NamedSharding(...))`); host arrays are left
    uncommitted, so the program's mesh decides where they go and `backend` only picks the
    device of an unsharded program."""
    try:
        device = jax.devices(backend)[0]
    except RuntimeError as e:
        raise ValueError(f"no {backend!r} device for XLA to compile for: {e}") from None
    spec = ArgSpec.of(args)  # static leaves (functions, config) are closed over, as we trace
    flat_fn = spec.closed(fn)
    dynamic = [_on(x, device) for x in spec.dynamic_leaves(args, str)]
    jitted = hasattr(fn, "lower") and not spec.static
    with tempfile.TemporaryDirectory(prefix="gambit-xla-") as folder:
        options = {"xla_dump_to": folder, "xla_dump_hlo_pass_re": ".*",
                   "xla_dump_hlo_as_text": True}
        try:
            with jax.default_device(device):
                lowered = (fn.lower(*spec.rebuild(dynamic)) if jitted else
                           jax.jit(flat_fn).lower(*dynamic))
                compiled = lowered.compile(compiler_options=options)
        except Exception as e:
            if (message := devices_needed(e)) is not None:
                raise ValueError(message) from e
            raise
        dumps = read_dump(folder)
    out_tree = lowered.out_tree
    try:
        memory = compiled.memory_analysis()
    except Exception:  # not every backend implements it; the comparison then says so
        memory = None
    cost = compiled.cost_analysis() or {}
    if isinstance(cost, list):  # older JAX: one dict per device
        cost = cost[0] if cost else {}
    name = getattr(fn, "__name__", type(fn).__name__)
    return XlaCompilation(name, backend, tuple(dumps), memory, dict(cost), spec, fn, out_tree,
                          _device_count(compiled))


def _on(x: Any, device: Any) -> Any:
    """An array committed to one device of another platform moves to `device` (the backend
    asked for); sharded arrays, and the others, stay as they are."""
    if (isinstance(x, jax.Array) and x.committed and len(x.sharding.device_set) == 1
            and next(iter(x.sharding.device_set)).platform != device.platform):
        return jax.device_put(x, device)
    return x


def _device_count(compiled: Any) -> int:
    """How many devices the compiled program runs on (its shardings' devices)."""
    shardings = jax.tree_util.tree_leaves(compiled.input_shardings) + jax.tree_util.tree_leaves(
        compiled.output_shardings)
    return max((len(s.device_set) for s in shardings), default=1)


_TOO_FEW = re.compile(r"Number of devices (\d+) must be >= the product of mesh_shape \(([\d, ]+)\)")


def devices_needed(e: BaseException) -> str | None:
    """A clear message when compiling failed because the program's mesh needs more devices
    than JAX has (or has none), else None."""
    text = str(e)
    have = len(jax.devices())
    if m := _TOO_FEW.search(text):
        need = math.prod(int(d) for d in m.group(2).split(",") if d.strip())
        return (f"the program's mesh needs {need} devices, but JAX has {have} "
                f"({jax.devices()[0].platform}){user_location(e)}. "
                f"{HOST_DEVICES_HINT.format(n=need)}")
    if "AbstractMesh" in text:
        return (f"the program's mesh is abstract (an AbstractMesh, no devices); JAX has {have} "
                f"device(s). Give it a Mesh of real devices. {HOST_DEVICES_HINT.format(n='N')}")
    return None


HOST_DEVICES_HINT = ("To explore a sharded program on a CPU, give JAX {n} host devices before it "
                     "starts: set XLA_FLAGS=--xla_force_host_platform_device_count={n} in the "
                     "environment before `import jax` (in a notebook: before the first import, "
                     "or restart the kernel).")


class XlaTrace(Trace):
    """A Trace of XLA's passes that keeps the compilation: XLA's memory per device and, for a
    sharded program, the SPMD story (`spmd()`)."""

    compilation: XlaCompilation
    node_ids: NodeIds  # instruction name -> node id, shared by the stages

    def spmd(self) -> SpmdSummary:
        """Which stages propagate shardings and partition, the collectives and the user's line
        of each, the global and per-device shapes, XLA's memory per device."""
        return spmd_summary(self)

    def summary(self) -> str:
        rows = [super().summary()]
        comp = self.compilation
        k = partitioning_stage(self.stages) if comp.devices > 1 else None
        if k is not None:
            rows.append(f"{comp.devices} devices: stages from {self.stages[k].name} on are one "
                        "device's program (shapes, FLOPs, bytes and peaks per device)")
        if comp.memory is not None:
            rows.append(memory_line(comp.memory, comp.devices))
        return "\n".join(rows)


def xla_pipeline(fn: Callable[..., Any], *args: Any, backend: str = "cpu") -> XlaTrace:
    """A Trace of XLA's passes on `fn(*args)`: the module before optimisation, one stage per
    pass that changed it, and the final module (fusions show as `kernel` regions). A sharded
    program (a jit over a Mesh, with_sharding_constraint, shard_map) compiles with its
    shardings: its stages include sharding propagation, the SPMD partitioner and the passes
    on the collectives it inserted; `trace.spmd()` tells that story."""
    return trace_of(compile_with_dumps(fn, *args, backend=backend), args)


def trace_of(comp: XlaCompilation, args: tuple[Any, ...]) -> XlaTrace:
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
    k = partitioning_stage(stages) if comp.devices > 1 else None
    if k is not None:  # say so on every stage of the per-device program
        note = f"per device: this module is one device's program, of {comp.devices}"
        if stages[k].name.startswith(f"{PARTITIONER_CLEANUP}."):
            stages[k] = replace(stages[k], report=replace(stages[k].report, notes=(
                *stages[k].report.notes, "the SPMD partitioner's output: XLA dumps it at the "
                f"start of {PARTITIONER_CLEANUP!r}, the pipeline its spmd-partitioning pass runs "
                "inside itself")))
        stages[k:] = [replace(s, report=replace(s.report, notes=(*s.report.notes, note)))
                      for s in stages[k:]]
    result = XlaTrace(traced, stages, tuple(args))
    result.compilation, result.node_ids = comp, ids
    return result
