"""fuse: group producer-consumer elementwise ops into `kernel` regions, as XLA's fusion does.

A group grows backwards from a consumer (its root) through producers whose every user is in
the group, so no value inside a kernel is needed outside it and no work is duplicated. The
members of a group share one iteration space: elementwise ops and broadcasts of that shape,
plus at most one reduction (an op whose row says `fuse=Fuse.REDUCTION`: the monoid
reductions) whose input has that shape; the op table's `fuse` trait says which ops are which.
Ops after the reduction, on its (smaller) result, join as the kernel's epilogue, so
`reduce_sum(x + y*z)` and `mean(x**2*3 + y)` (a sum, then a division) are one kernel each.
A `dot_general` never joins a group: it is a BLAS call, not a loop.
Scalar constants are copied into the kernels that read them. Split loops and control-flow
regions are fused inside their bodies (passes/bodies.py). A kernel's `kind` is "loop"
(elementwise only) or "input" (with a reduction), XLA's names.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Attrs, Graph, Node
from ..ir.ops import CONTROL_FLOW, OPS
from ..ir.rewrite import Rewrite
from ..ir.traits import Fuse as Role  # the op table's fuse trait (Fuse here is the pass)
from . import register
from .base import PassReport
from .bodies import descend


def _loopy(n: Node) -> bool:
    """Ops that compute one element from the same element of their inputs (or a broadcast)."""
    return OPS[n.op].fuse == Role.POINTWISE


def _reduction(n: Node) -> bool:
    """The one reduction a kernel may hold."""
    return OPS[n.op].fuse == Role.REDUCTION


def _scalar_constant(n: Node) -> bool:
    return n.op == "constant" and n.type.rank == 0  # type: ignore[union-attr]


class _Group:
    """The members of one kernel, grown from its root. `loop_shape` is the iteration space
    (the reduction's input shape when there is one); `epilogue_shape` the root's shape."""

    def __init__(self, root: Node, loop_shape: tuple[int, ...]) -> None:
        self.root = root
        self.members = {root.id}
        self.reduce: Node | None = root if _reduction(root) else None
        self.epilogue_shape = root.shape
        self.loop_shape = loop_shape

    def phase_shape(self, m: Node) -> tuple[int, ...]:
        """The shape a producer of member `m` must have to join: the iteration space for the
        reduction and the ops before it, the reduction's result shape after it."""
        if self.reduce is not None and (m.id == self.reduce.id or m.shape == self.loop_shape):
            return self.loop_shape
        return self.epilogue_shape


def _grow(g: Graph, root: Node, taken: set[int]) -> _Group:
    group = _Group(root, g[root.inputs[0]].shape if _reduction(root) else root.shape)
    work = [root]
    while work:
        m = work.pop()
        for i in m.inputs:
            p = g[i]
            if p.id in group.members or p.id in taken or m.op == "broadcast_in_dim":
                continue
            if _scalar_constant(p) or p.id in g.outputs \
                    or not all(u in group.members for u in g.users[p.id]):
                continue
            want = group.phase_shape(m)
            if _reduction(p) and group.reduce is None and p.shape == want:
                group.reduce = p
                group.loop_shape = g[p.inputs[0]].shape
            elif not (_loopy(p) and p.shape == want):
                continue
            group.members.add(p.id)
            work.append(p)
    return group


def _kernel(g: Graph, group: _Group) -> Node:
    """The kernel node replacing `group`: its inputs are the values the members read from
    outside (in first-read order); its body renumbers everything from 0."""
    members = [n for n in g.nodes if n.id in group.members]
    external: list[int] = []
    for n in members:
        for i in n.inputs:
            if i not in group.members and not _scalar_constant(g[i]) and i not in external:
                external.append(i)
    body_nodes: list[Node] = []
    new_id: dict[int, int] = {}
    for k, i in enumerate(external):
        body_nodes.append(Node(k, "parameter", (), Attrs({"index": k, "name": f"in{k}"}), g[i].type))
        new_id[i] = k
    for n in members:
        for i in n.inputs:
            if i not in new_id:  # a scalar constant, copied in
                c = g[i]
                new_id[i] = len(body_nodes)
                body_nodes.append(Node(len(body_nodes), "constant", (), c.attrs, c.type, c.source))
        new_id[n.id] = len(body_nodes)
        body_nodes.append(Node(len(body_nodes), n.op, tuple(new_id[i] for i in n.inputs), n.attrs,
                               n.type, n.source))
    body = Graph(body_nodes, range(len(external)), (new_id[group.root.id],), f"fused_{group.root.id}")
    kind = "input" if group.reduce is not None else "loop"
    return Node(group.root.id, "kernel", tuple(external), Attrs({"body": body, "kind": kind}),
                group.root.type, group.root.source)


def fuse_graph(g: Graph) -> tuple[Graph, list[Rewrite]]:
    """Fuse `g`, and the bodies of its split loops and control-flow regions."""
    return descend(g, _fuse_one, CONTROL_FLOW | {"loop"})


def _fuse_one(g: Graph) -> tuple[Graph, list[Rewrite]]:
    log: list[Rewrite] = []
    nodes = {n.id: n for n in g.nodes}
    taken: set[int] = set()
    kernels: dict[int, Node] = {}
    fused_away: set[int] = set()
    for n in reversed(g.nodes):
        if n.id in taken or _scalar_constant(n) or not (_loopy(n) or _reduction(n)):
            continue
        group = _grow(g, n, taken)
        taken |= group.members
        if sum(1 for i in group.members if not _scalar_constant(g[i])) >= 2:
            kernels[n.id] = _kernel(g, group)
            fused_away |= group.members - {n.id}
            rule = "fuse-reduction" if group.reduce is not None else "fuse-elementwise"
            log.append(Rewrite(rule, tuple(sorted(group.members)), (n.id,),
                               str(n.source) if n.source else None))
    kept = [kernels.get(n.id, nodes[n.id]) for n in g.nodes if n.id not in fused_away]
    # Scalar constants that only fused kernels read were copied into them: drop the originals.
    still_read = {i for n in kept for i in n.inputs} | set(g.outputs)
    in_kernels = fused_away | set(kernels)
    copied = {i for m in g.nodes if m.id in in_kernels for i in m.inputs if _scalar_constant(g[i])}
    kept = [n for n in kept if n.id not in copied or n.id in still_read]
    return Graph(kept, g.params, g.outputs, g.name), log


@register
@dataclass(frozen=True)
class Fuse:
    name: str = "fuse"

    def __call__(self, graph: Graph) -> tuple[Graph, PassReport]:
        out, log = fuse_graph(graph)
        if not log:
            return graph, PassReport(changed=False)
        return out, PassReport(changed=True, rewrites=tuple(log))
