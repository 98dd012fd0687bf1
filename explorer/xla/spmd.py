"""XLA's SPMD partitioning in an `xla_pipeline` trace: which stages propagate shardings and
which partitions, the collectives and where each first appears (with the user's line), the
global and per-device shapes of the parameters and results, and XLA's memory per device.

    summary = spmd_summary(trace)   # or trace.spmd()
    print(summary)

A collective is told apart from the others by its opcode, its per-device type, its
communication attributes and its user line, so that one moved between computations (the call
inliner) is not counted again, while one the combiners merge or the async pass splits shows
where its new form appears. A collective already in the traced module was written by the
program (shard_map's psum); the others are XLA's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..frontend.hlo import parse_hlo
from ..frontend.hlo_spmd import COLLECTIVES
from ..ir.graph import Graph, Node, Source, TupleType
from ..ir.ops.regions import bodies
from ..units import format_bytes

# XLA's passes that decide shardings (GSPMD's propagation; Shardy's, run inside XLA as
# `shardy-xla`) and the one that rewrites the module into the per-device program.
PROPAGATION_PASSES = frozenset({"sharding-propagation", "shardy-xla"})
PARTITIONING_PASSES = frozenset({"spmd-partitioning"})
# The pipeline the SPMD partitioner runs inside its own pass, on the partitioned module: its
# first dump ("pipeline-start") is the partitioner's output.
PARTITIONER_CLEANUP = "spmd-cleanup"
_COLLECTIVE_WORDS = ("all-reduce", "all-gather", "all-to-all", "reduce-scatter", "collective",
                     "async")
_COMM_KEYS = ("replica_groups", "source_target_pairs", "dimensions", "reduction")


def pass_of(stage_name: str) -> str:
    """'spmd-partitioner.spmd-partitioning#2' -> 'spmd-partitioning'."""
    return stage_name.split("#")[0].split(".", 1)[-1]


@dataclass(frozen=True)
class Collective:
    stage: str  # where it first appears; "traced": the program itself wrote it
    opcode: str
    type: str  # its result, per device
    attrs: dict[str, Any] = field(compare=False)  # replica_groups, dimensions, reduction, ...
    source: Source | None = None

    def __str__(self) -> str:
        comm = " ".join(f"{k}={_short(self.attrs[k])}" for k in _COMM_KEYS if k in self.attrs)
        where = f"  at {self.source}" if self.source is not None else ""
        return f"{self.opcode} -> {self.type} {comm}{where}"


@dataclass(frozen=True)
class ShapeChange:
    what: str  # "parameter a.1" or "output 0"
    global_type: str  # in the traced module
    device_type: str  # after partitioning: what each device holds
    sharding: str  # XLA's sharding of it, where it printed one

    def __str__(self) -> str:
        return (f"{self.what:<22}{self.global_type:>18} -> {self.device_type:<18}"
                f"{self.sharding}")


@dataclass(frozen=True)
class ValueSharding:
    """The sharding XLA's propagation gave one value of the entry computation."""

    node: int  # its node id in the propagation stage's graph
    op: str  # our op (an opaque node: its HLO opcode)
    type: str  # its global type
    sharding: str  # as XLA printed it
    source: Source | None

    def __str__(self) -> str:
        where = f"  at {self.source}" if self.source is not None else ""
        return f"%{self.node:<5}{self.op:<20}{self.type:>18}  {self.sharding}{where}"


@dataclass(frozen=True)
class SpmdSummary:
    devices: int
    propagation: tuple[str, ...]  # stage names
    partitioning: str | None  # the first stage whose shapes are per device
    collective_passes: tuple[str, ...]  # stages of XLA's passes on collectives
    collectives: tuple[Collective, ...]
    shapes: tuple[ShapeChange, ...]
    memory: Any = None  # XLA's CompiledMemoryStats: per device for a partitioned program
    shardings: tuple[ValueSharding, ...] = ()  # after the (last) propagation stage

    SHOWN = 40  # values listed by str(); `shardings` holds them all

    def __repr__(self) -> str:  # a notebook shows the story, not the fields
        return str(self)

    def inserted(self) -> tuple[Collective, ...]:
        """The collectives XLA inserted (not written by the program)."""
        return tuple(c for c in self.collectives if c.stage != "traced")

    def __str__(self) -> str:
        lines = [f"SPMD over {self.devices} device{'s' if self.devices != 1 else ''}"]
        lines.append("sharding propagation: " + (", ".join(self.propagation) or "(no stage)"))
        inside = (self.partitioning or "").startswith(f"{PARTITIONER_CLEANUP}.")
        lines.append(f"partitioning: {self.partitioning or '(no stage)'}"
                     + (" (the spmd-partitioning pass's output, dumped as the cleanup pipeline "
                        "it runs inside itself starts)" if inside else "")
                     + ("; from here on, shapes are per device" if self.partitioning else ""))
        lines.append("passes on collectives: " + (", ".join(self.collective_passes) or
                                                  "(none changed the module)"))
        if self.shardings:
            lines.append(f"shardings after {self.propagation[-1]} ({len(self.shardings)} values):")
            lines += [f"  {v}" for v in self.shardings[: self.SHOWN]]
            if len(self.shardings) > self.SHOWN:
                lines.append(f"  ... and {len(self.shardings) - self.SHOWN} more")
        if self.shapes:
            lines.append("shapes, global -> per device:")
            lines += [f"  {s}" for s in self.shapes]
        lines.append(f"collectives ({len(self.collectives)}):" if self.collectives else
                     "collectives: none")
        stage = None
        for c in self.collectives:
            if c.stage != stage:
                stage = c.stage
                lines.append(f"  {'written by the program' if stage == 'traced' else 'in ' + stage}"
                             f"{' (the SPMD partitioner)' if stage == self.partitioning else ''}:")
            lines.append(f"    {c}")
        if self.memory is not None:
            lines.append(memory_line(self.memory, self.devices))
        return "\n".join(lines)


def memory_line(memory: Any, devices: int) -> str:
    """XLA's memory_analysis() in one line, labelled per device."""
    label = f"per device (each of {devices})" if devices > 1 else "on its one device"
    parts = [f"{what} {format_bytes(int(getattr(memory, attr, 0) or 0))}" for what, attr in (
        ("arguments", "argument_size_in_bytes"), ("outputs", "output_size_in_bytes"),
        ("temporaries", "temp_size_in_bytes"), ("aliased", "alias_size_in_bytes"))]
    return f"XLA's memory {label}: " + ", ".join(parts)


def partitioning_stage(stages: list[Any]) -> int | None:
    """The index of the first stage of the partitioned module: the SPMD partitioner's own, or
    the start of the cleanup pipeline it runs inside its pass, or the first whose parameters'
    shapes differ from the traced module's, whichever comes first."""
    first = [p.type for p in stages[0].graph.param_nodes] if stages else []
    for k, s in enumerate(stages[1:], 1):
        if (pass_of(s.name) in PARTITIONING_PASSES or s.name.startswith(f"{PARTITIONER_CLEANUP}.")
                or [p.type for p in s.graph.param_nodes] != first):
            return k
    return None


def is_collective_pass(stage_name: str) -> bool:
    """A pass on collectives: combiners, decomposers, async conversion, ..."""
    return any(w in pass_of(stage_name) for w in _COLLECTIVE_WORDS)


def spmd_summary(trace: Any) -> SpmdSummary:
    """The SPMD story of an `xla_pipeline` trace (see the module's docstring)."""
    stages = trace.stages
    comp = getattr(trace, "compilation", None)
    devices = comp.devices if comp is not None else 1
    k = partitioning_stage(stages) if devices > 1 else None
    seen: set[tuple[Any, ...]] = set()
    found: list[Collective] = []
    for s in stages:
        for n in _walk(s.graph):
            if n.op != "opaque" or n.attrs.get("opcode") not in COLLECTIVES:
                continue
            key = (n.attrs["opcode"], str(n.type), tuple(str(n.attrs.get(c)) for c in _COMM_KEYS),
                   n.source)
            if key not in seen:
                seen.add(key)
                comm = {a: v for a, v in n.attrs.items() if a not in ("opcode", "text", "type")}
                found.append(Collective(s.name, n.attrs["opcode"], str(n.type), comm, n.source))
    shapes = _shapes(stages[0].graph, stages[k].graph) if k is not None else ()
    propagation = [s for s in stages if pass_of(s.name) in PROPAGATION_PASSES]
    shardings = _shardings(trace, propagation[-1]) if propagation and comp is not None else ()
    return SpmdSummary(devices, tuple(s.name for s in stages if pass_of(s.name) in
                                      PROPAGATION_PASSES),
                       stages[k].name if k is not None else None,
                       tuple(s.name for s in stages if is_collective_pass(s.name)), tuple(found),
                       shapes,
                       comp.memory if comp is not None else None, shardings)


def _shardings(trace: Any, stage: Any) -> tuple[ValueSharding, ...]:
    """The entry computation's shardings in the dump a stage was read from, on the stage's
    nodes (our mapped ops keep no `sharding` attribute: the interpreters pass every attribute
    to the op's reference, so XLA's shardings of them are listed here)."""
    files = [n[len("file: "):] for n in stage.report.notes if n.startswith("file: ")]
    dump = next((d for d in trace.compilation.dumps if d.file in files), None)
    ids = getattr(trace, "node_ids", None)
    if dump is None or ids is None:
        return ()
    out = []
    for ins in parse_hlo(dump.text).entry.instructions:
        nid = ids.get(ins.name)
        if "sharding" not in ins.attrs or nid is None or nid not in stage.graph:
            continue
        n = stage.graph[nid]
        op = n.attrs["opcode"] if n.op == "opaque" else n.op
        out.append(ValueSharding(nid, op, str(n.type), ins.attrs["sharding"].text, n.source))
    return tuple(out)


def _shapes(before: Graph, after: Graph) -> tuple[ShapeChange, ...]:
    out = []
    for p, q in zip(before.param_nodes, after.param_nodes):
        out.append(ShapeChange(f"parameter {p.attrs.get('name', p.id)}", str(p.type), str(q.type),
                               str(q.attrs.get("hlo_sharding", p.attrs.get("hlo_sharding", "")))))
    for j, (o, u) in enumerate(zip(before.outputs, after.outputs)):
        if not isinstance(before[o].type, TupleType):
            out.append(ShapeChange(f"output {j}", str(before[o].type), str(after[u].type), ""))
    return tuple(out)


def _walk(g: Graph) -> Iterator[Node]:
    for n in g.nodes:
        yield n
        for _, body in bodies(n):
            yield from _walk(body)


def _short(v: Any, limit: int = 48) -> str:
    text = str(v)
    return text if len(text) <= limit else text[: limit - 3] + "..."
