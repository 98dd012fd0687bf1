"""Builds the `loop` node for a split region (explorer/analysis/split_plan.py) at a given chunk
size, and the program with the region replaced by it. Used by the split pass.

The body is the region's nodes copied with their split dimension resized to the chunk (the
shape attributes of broadcasts, reshapes and slices, and top_k's k); small constants read
whole are copied in rather than passed. Exits become combined results: argmax/argmin also
compute their chunk's max/min (the merge compares values), top_k yields values and indices.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

from ..analysis.split_plan import Region, exit_kind
from ..ir.builder import GraphBuilder
from ..ir.graph import Attrs, Graph, Node, TensorType
from ..ir.ops import MONOID_REDUCTIONS, OPS, infer_type
from ..ir.traits import Split

INLINE_CONSTANT = 16  # elements: constants up to this size are copied into the body


@dataclass(frozen=True)
class Loop:
    graph: Graph  # the whole program with the region replaced
    loop: int  # the loop node's id
    new_ids: tuple[int, ...]  # the loop node and its get_tuple_element nodes


def _resize(n: Node, axis: int | None, operand_axis: int | None, rows: int) -> Attrs:
    a = n.attrs
    if n.op == "broadcast_in_dim" and axis is not None:
        return a.replace(shape=tuple(rows if i == axis else d for i, d in enumerate(a["shape"])))
    if n.op == "reshape" and axis is not None:
        return a.replace(new_sizes=tuple(rows if i == axis else d
                                         for i, d in enumerate(a["new_sizes"])))
    if n.op == "slice" and operand_axis is not None:
        return a.replace(limit_indices=tuple(rows if i == operand_axis else d
                                             for i, d in enumerate(a["limit_indices"])))
    if n.op == "top_k" and axis is None:
        return a.replace(k=min(a["k"], rows))
    return a


def _inlined(g: Graph, i: int, axis: int | None) -> bool:
    n = g[i]
    return n.op == "constant" and axis is None and n.type.size <= INLINE_CONSTANT  # type: ignore[union-attr]


def build_body(g: Graph, r: Region, rows: int, name: str) -> tuple[Graph, list[tuple], dict[int, int]]:
    """(body, combine specs, original node id -> index of the loop result replacing it)."""
    b = GraphBuilder(name)
    env: dict[tuple[int, int | None], int] = {}
    for i, ax in r.inputs(g):
        if _inlined(g, i, ax):
            continue
        t = g[i].type
        shape = tuple(rows if k == ax else d for k, d in enumerate(t.shape))  # type: ignore[union-attr]
        name_ = g[i].attrs.get("name", f"v{i}") if g[i].op == "parameter" else f"v{i}"
        env[(i, ax)] = b.param(TensorType(shape, t.dtype), name_)  # type: ignore[union-attr]
    for i, ax in r.inputs(g):  # after the parameters, so that those come first
        if _inlined(g, i, ax):
            env[(i, ax)] = b.add("constant", (), g[i].attrs, g[i].source)
    inner: dict[int, int] = {}
    for n in g.nodes:
        st = r.steps.get(n.id)
        if st is None or (n.op == "get_tuple_element" and st.axis is None):
            continue  # not in the region, or an element of a merged top_k (below)
        ins = [inner[i] if i in r.steps else env[(i, ax)] for i, ax in zip(n.inputs, st.operands)]
        inner[n.id] = b.add(n.op, ins, _resize(n, st.axis, st.operands[0], rows), n.source)
    outs: list[int] = []
    specs: list[tuple] = []
    result_of: dict[int, int] = {}
    done: set[int] = set()
    for o in r.outputs(g):
        n, st = g[o], r.steps[o]
        if st.axis is not None:
            result_of[o] = len(outs)
            outs.append(inner[o])
            specs.append(("concat", st.axis))
            continue
        if n.op == "get_tuple_element":  # an element of a merged top_k
            t = g[n.inputs[0]]
            if t.id not in done:
                done.add(t.id)
                base = len(outs)
                for k in (0, 1):
                    outs.append(b.add("get_tuple_element", [inner[t.id]], {"index": k}, t.source))
                specs += [("top_k", r.steps[t.id].operands[0]), ("index", base)]
                for u in g.users[t.id]:
                    result_of[u] = base + g[u].attrs["index"]
            continue
        if OPS[n.op].split == Split.ARG:  # the chunk's max/min value, then its index
            monoid = OPS[n.op].monoid.name  # type: ignore[union-attr]
            value = b.add(MONOID_REDUCTIONS[monoid], [_operand(inner, env, n, st)],
                          {"axes": n.attrs["axes"]}, n.source)
            outs += [value, inner[o]]
            specs += [(monoid,), ("index", len(outs) - 2)]
            result_of[o] = len(outs) - 1
            continue
        result_of[o] = len(outs)
        outs.append(inner[o])
        specs.append((exit_kind(n.op),))
    return b.build(outs), specs, result_of


def _operand(inner: dict[int, int], env: dict[tuple[int, int | None], int], n: Node,
             st: Any) -> int:
    i = n.inputs[0]
    return inner[i] if i in inner else env[(i, st.operands[0])]


def build_loop(g: Graph, r: Region, chunk: int, source_node: int) -> Loop:
    """The program with region `r` replaced by a loop over chunks of `chunk` positions."""
    body, specs, result_of = build_body(g, r, chunk, "split_body")
    rem = r.size % chunk
    tail = build_body(g, r, rem, "split_tail")[0] if rem else None
    ins = [(i, ax) for i, ax in r.inputs(g) if not _inlined(g, i, ax)]
    attrs: dict[str, Any] = {
        "size": r.size, "chunk": chunk,
        "split_inputs": tuple((k, ax) for k, (_, ax) in enumerate(ins) if ax is not None),
        "combine": tuple(specs), "body": body}
    if tail is not None:
        attrs["tail"] = tail
    a = Attrs(attrs)
    inputs = tuple(i for i, _ in ins)
    typ = infer_type("loop", [g[i].type for i in inputs], a)
    src = g[source_node].source
    loop = Node(g.next_id, "loop", inputs, a, typ, src)
    new = [loop]
    if len(specs) > 1:
        new += [Node(loop.id + 1 + k, "get_tuple_element", (loop.id,), Attrs({"index": k}), t, src)
                for k, t in enumerate(typ.elements)]  # type: ignore[union-attr]
    value = {o: new[k + 1].id if len(specs) > 1 else loop.id for o, k in result_of.items()}
    kept = [n if not any(i in value for i in n.inputs) else
            Node(n.id, n.op, tuple(value.get(i, i) for i in n.inputs), n.attrs, n.type, n.source)
            for n in g.nodes if n.id not in r.steps]
    order = {n.id: k for k, n in enumerate(g.nodes)}
    last = max(order[i] for i in r.steps)
    prio = {**order, **{n.id: last + 0.5 for n in new}}
    nodes = _schedule(kept + new, prio)
    outputs = tuple(value.get(o, o) for o in g.outputs)
    return Loop(Graph(nodes, g.params, outputs, g.name), loop.id, tuple(n.id for n in new))


def _schedule(nodes: list[Node], prio: dict[int, float]) -> list[Node]:
    """A topological order that keeps to `prio` (the original order) wherever it can."""
    by_id = {n.id: n for n in nodes}
    waiting = {n.id: len({i for i in n.inputs if i in by_id}) for n in nodes}
    users: dict[int, list[int]] = {}
    for n in nodes:
        for i in set(n.inputs):
            users.setdefault(i, []).append(n.id)
    ready = [(prio[n.id], n.id) for n in nodes if waiting[n.id] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, nid = heapq.heappop(ready)
        out.append(by_id[nid])
        for u in users.get(nid, ()):
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (prio[u], u))
    assert len(out) == len(nodes), "the split region is not convex"
    return out
