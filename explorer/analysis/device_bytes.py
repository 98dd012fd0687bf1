"""What one device holds of a sharded program's values: the bytes of each result per device,
for the memory planner's per-device peak (analysis/memory.py).

A value's per-device size follows from a sharding where the program says one, and is taken
whole (its global size, an upper bound) everywhere else:
  - a parameter with a `sharding` attribute, and a `sharding_constraint`'s result (the
    constraint is a view of its operand, so the operand's buffer is laid out so too: XLA's
    propagation runs backwards from a constraint as well);
  - an elementwise op (or a kernel made only of elementwise and shape ops) keeps the sharding
    of an operand of its own shape;
  - a `shard_map`'s results are its body's per-device results (`ir.device_types`), and its
    body runs on every device at per-device types, so its temporaries are per device as
    they stand;
  - anything else (a dot, a reduction, a reshape of a sharded value) is counted whole.
XLA's propagation shards more than this (a dot of a batch-split operand is batch-split), so
the per-device peak planned from these sizes is above what XLA plans, never below it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph, Node, TensorType, device_types
from ..ir.ops import OPS
from ..ir.sharding import MeshSpec, Sharding, ShardingError
from ..ir.traits import OpKind

_ELEMENTWISE_BODY = frozenset({OpKind.ELEMENTWISE, OpKind.SHAPE, OpKind.SOURCE})


@dataclass(frozen=True)
class DeviceBytes:
    """Per-device result bytes of a sharded graph's nodes (those not listed: their global
    size), and how many devices its largest mesh has."""

    sizes: dict[int, int]
    devices: int


def _block_bytes(t: TensorType, s: Sharding) -> int | None:
    try:
        s.check(t.shape)
    except ShardingError:
        return None
    return TensorType(s.block_shape(t.shape), t.dtype).nbytes


def _elementwise(n: Node) -> bool:
    row = OPS.get(n.op)
    if row is None:
        return False
    if row.kind == OpKind.ELEMENTWISE:
        return True
    if n.op == "kernel":
        body = n.attrs.get("body")
        return isinstance(body, Graph) and all(
            OPS[m.op].kind in _ELEMENTWISE_BODY for m in body.nodes if m.op in OPS)
    return False


def _meshes(g: Graph) -> list[MeshSpec]:
    out = []
    for n in g.nodes:
        s = n.attrs.get("sharding")
        if isinstance(s, Sharding):
            out.append(s.mesh)
        elif n.op == "shard_map" and isinstance(n.attrs.get("mesh"), MeshSpec):
            out.append(n.attrs["mesh"])
    return out


def devices(g: Graph) -> int | None:
    """How many devices `g` runs on (its largest mesh); None for a program with no sharding,
    constraint or shard_map."""
    meshes = _meshes(g)
    return max(m.size for m in meshes) if meshes else None


def device_bytes(g: Graph) -> DeviceBytes | None:
    """The per-device sizes of `g`'s results (module docstring); None when nothing in `g` is
    sharded (no sharding attribute, constraint or shard_map)."""
    count = devices(g)
    if count is None:
        return None
    shardings: dict[int, Sharding] = {}
    sizes: dict[int, int] = {}
    for n in g.nodes:
        s = n.attrs.get("sharding")
        if isinstance(s, Sharding) and isinstance(n.type, TensorType):
            shardings[n.id] = s
            if n.op == "sharding_constraint" and n.inputs[0] not in shardings:
                shardings[n.inputs[0]] = s  # (its producer comes before it: set it now)
        if n.op == "shard_map" and isinstance(n.attrs.get("mesh"), MeshSpec):
            outs = [s.on(n.attrs["mesh"]) for s in n.attrs["out_specs"]]
            if isinstance(n.type, TensorType):
                shardings[n.id] = outs[0]
            for m in g.nodes:  # (its results, taken apart after it)
                if m.op == "get_tuple_element" and m.inputs[0] == n.id:
                    shardings[m.id] = outs[m.attrs["index"]]
    for n in g.nodes:
        if n.id not in shardings and isinstance(n.type, TensorType) and _elementwise(n):
            for i in n.inputs:
                t = g[i].type
                if i in shardings and isinstance(t, TensorType) and t.shape == n.type.shape:
                    shardings[n.id] = shardings[i]
                    break
    for n in g.nodes:
        if n.op == "shard_map":
            sizes[n.id] = sum(t.nbytes for t in device_types(n) or [])
        elif n.id in shardings and isinstance(n.type, TensorType):
            b = _block_bytes(n.type, shardings[n.id])
            if b is not None:
                sizes[n.id] = b
    return DeviceBytes(sizes, count)
