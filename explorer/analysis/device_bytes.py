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
  - a dot keeps its operands' splits of their free and batch dimensions, a reduction and a
    transpose their operand's, a broadcast its operand's on the dimensions it does not widen,
    unless the dimensions they combine are split (partial sums, summed across devices: whole);
  - anything else (a reshape of a sharded value, a fused kernel with a dot or a reduction, a
    gather) is counted whole.
XLA's propagation shards more than this, so the per-device peak planned from these sizes is
above what XLA plans (bench/sharded_memory.py measures by how much).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph, Node, TensorType, device_types
from ..ir.ops import OPS
from ..ir.sharding import Entry, MeshSpec, Sharding, ShardingError
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


def _laid(s: Sharding, entries: list[Entry]) -> Sharding | None:
    """`entries` as a sharding on `s`'s mesh; None where an axis would split two dimensions."""
    used = [a for e in entries for a in e]
    if len(set(used)) != len(used):
        return None
    while entries and not entries[-1]:
        entries.pop()
    return Sharding(s.mesh, tuple(entries))


def _follows(g: Graph, n: Node, shardings: dict[int, Sharding]) -> Sharding | None:
    """The layout a dot, a reduction, a broadcast or a transpose of a sharded operand keeps,
    as XLA's propagation gives it where no dimension it combines is split (None: whole)."""
    ins = [shardings.get(i) for i in n.inputs]
    rank = lambda i: g[n.inputs[i]].type.rank  # noqa: E731
    if n.op == "dot_general" and ins[0] is not None:
        (lc, rc), (lb, rb) = n.attrs["dimension_numbers"]
        lhs, rhs = ins[0], ins[1]
        if any(lhs.entry(d) for d in lc) or (rhs is not None and any(rhs.entry(d) for d in rc)):
            return None  # a split contraction: partial sums, summed across devices
        if rhs is not None and rhs.mesh != lhs.mesh:
            return None
        r = (lambda d: rhs.entry(d)) if rhs is not None else (lambda d: ())
        free_l = [d for d in range(rank(0)) if d not in lc and d not in lb]
        free_r = [d for d in range(rank(1)) if d not in rc and d not in rb]
        return _laid(lhs, [lhs.entry(d) or r(e) for d, e in zip(lb, rb)]
                     + [lhs.entry(d) for d in free_l] + [r(d) for d in free_r])
    s = ins[0] if ins else None
    if s is None:
        return None
    row = OPS.get(n.op)
    if row is not None and row.kind == OpKind.REDUCE and "axes" in n.attrs:
        axes = n.attrs["axes"]
        if any(s.entry(d) for d in axes):
            return None
        return _laid(s, [s.entry(d) for d in range(rank(0)) if d not in axes])
    if n.op == "transpose":
        return _laid(s, [s.entry(d) for d in n.attrs["permutation"]])
    if n.op == "broadcast_in_dim":
        out: list[Entry] = [()] * n.type.rank  # type: ignore[union-attr]
        src = g[n.inputs[0]].type
        for d, to in enumerate(n.attrs["broadcast_dimensions"]):
            if src.shape[d] == n.type.shape[to]:  # type: ignore[union-attr]
                out[to] = s.entry(d)
        return _laid(s, out)
    return None


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
        if n.id in shardings or not isinstance(n.type, TensorType):
            continue
        if _elementwise(n):
            for i in n.inputs:
                t = g[i].type
                if i in shardings and isinstance(t, TensorType) and t.shape == n.type.shape:
                    shardings[n.id] = shardings[i]
                    break
        else:
            s = _follows(g, n, shardings)
            if s is not None:
                shardings[n.id] = s
    for n in g.nodes:
        if n.op == "shard_map":
            sizes[n.id] = sum(t.nbytes for t in device_types(n) or [])
        elif n.id in shardings and isinstance(n.type, TensorType):
            b = _block_bytes(n.type, shardings[n.id])
            if b is not None:
                sizes[n.id] = b
    return DeviceBytes(sizes, count)
