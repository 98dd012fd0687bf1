"""fuse: group producer-consumer elementwise ops into `kernel` regions, as XLA's fusion does.

A group grows backwards from a consumer (its root) through producers whose every user is in
the group, so no value inside a kernel is needed outside it and no work is duplicated. The
members of a group share one iteration space: elementwise ops and broadcasts of that shape,
plus at most one reduction (an op whose row says `fuse=FusionRole.REDUCTION`: the monoid
reductions) whose input has that shape; the op table's `fuse` trait says which ops are which.
Ops after the reduction, on its (smaller) result, join as the kernel's epilogue, so
`reduce_sum(x + y*z)` and `mean(x**2*3 + y)` (a sum, then a division) are one kernel each.
Row groups (below) take softmax, log-softmax, layer norm and cross-entropy whole: several
reductions over the trailing axes of one iteration space, with their per-row results
broadcast back over the row in between. The larger of the two groups grown from a root wins.
A `dot_general` is a BLAS call, not a loop: it joins an elementwise group only as its head,
when the group is all that reads it and iterates over the dot's result (XLA's output
fusion: a bias, an activation, a scale, a residual add after a matmul). The kernel then
computes the product and runs the rest over its result in place. Reductions never take a dot
in, and bodies of loops and branches keep theirs outside (a compiled scan calls BLAS itself).
A group of one op (and its copied constants) is a kernel only when large (LONE_MIN
elements): a small one is left to the op's NumPy form.
Scalar constants are copied into the kernels that read them, and so is a broadcast that other
values also read (XLA duplicates such cheap producers): the kernel then reads the broadcast's
small input, not the large broadcast value. A static slice (strides >= 1) or a pad (a scalar
constant padding value; negative low or high padding crops) of a value from outside joins the same way, as a
leaf the kernel reads its input through in place (a strided index; an exact index or the
padding value), as XLA fuses them into their consumers' loops: lax.associative_scan's tree of
strided slices and interleaving pads (and its gradient, the transposed tree) is then one pass
over memory a level, not one a slice. Split loops and control-flow regions are fused inside
their bodies (passes/bodies.py). A kernel's `kind` is "loop" (elementwise only), "input"
(with a reduction) or "output" (a dot and its epilogue), XLA's names.

Every value a kernel reads from outside gets a `missed` remark saying why its producer stayed
out (passes/fuse_remarks.py): the decision that refused it as the group grew.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir.graph import Attrs, Graph, Node, TensorType
from ..ir.ops import CONTROL_FLOW, OPS
from ..ir.remarks import analysis, collecting, enabled, missed, settled
from ..ir.rewrite import Rewrite
from ..ir.traits import FusionRole, OpKind
from . import register
from .base import PassReport
from .bodies import descend
from .fuse_remarks import Refusal, head_refusal, op_refusal, users_refusal, value


def _loopy(n: Node) -> bool:
    """Ops that compute one element from the same element of their inputs (or a broadcast)."""
    return OPS[n.op].fuse == FusionRole.POINTWISE


def _reduction(n: Node) -> bool:
    """The one reduction a kernel may hold."""
    return OPS[n.op].fuse == FusionRole.REDUCTION


# A lone elementwise op or reduction this large is a kernel of its own too: NumPy runs it on
# one thread, and a broadcast operand or a reduction over the last axis in its slower loops
LONE_MIN = 1 << 16


def _large(g: Graph, n: Node) -> bool:
    return max(t.size for t in [n.type] + [g[i].type for i in n.inputs]  # type: ignore[union-attr]
               if isinstance(t, TensorType)) >= LONE_MIN


def _scalar_constant(n: Node) -> bool:
    return n.op == "constant" and n.type.rank == 0  # type: ignore[union-attr]


def _read_in_place(g: Graph, n: Node) -> bool:
    """A slice (strides >= 1) or a pad (a scalar constant padding value; a negative low or
    high crops) that a kernel reads its input through, in place (codegen/kernel_plan.readable): as XLA
    fuses them into their consumers' loops, no pass over memory of their own."""
    if n.op == "slice":
        return all(s >= 1 for s in (n.attrs.get("strides") or (1,) * n.type.rank))  # type: ignore[union-attr]
    return n.op == "pad" and _scalar_constant(g[n.inputs[1]]) \
        and all(i >= 0 for _, _, i in n.attrs["padding_config"])


class _Group:
    """The members of one kernel, grown from its root. `loop_shape` is the iteration space
    (the reduction's input shape when there is one); `epilogue_shape` the root's shape."""

    def __init__(self, root: Node, loop_shape: tuple[int, ...]) -> None:
        self.root = root
        self.members = {root.id}
        self.copies: set[int] = set()  # broadcasts other values also read: copied in
        self.reduce: Node | None = root if _reduction(root) else None
        self.epilogue_shape = root.shape
        self.loop_shape = loop_shape
        self.left: dict[int, Refusal] = {}  # producers kept out, and why (the first reason)

    def refuse(self, p: int, why: Refusal) -> None:
        self.left.setdefault(p, why)

    def phase_shape(self, m: Node) -> tuple[int, ...]:
        """The shape a producer of member `m` must have to join: the iteration space for the
        reduction and the ops before it, the reduction's result shape after it."""
        if self.reduce is not None and (m.id == self.reduce.id or m.shape == self.loop_shape):
            return self.loop_shape
        return self.epilogue_shape


def _joins(g: Graph, group: _Group, m: Node, p: Node, taken: set[int], pinned: set[int],
           ) -> str | None:
    """How producer `p` of member `m` may join `group`: "move" (every user of it is a
    member), "copy" (a broadcast that other values also read: a copy of it joins, as XLA
    duplicates cheap producers, and the kernel reads the broadcast's small input instead of
    the large result), or None (recorded in `group.left`). `pinned` values are read by
    copies already made: they stay."""
    if p.id in group.members or p.id in group.copies or _scalar_constant(p):
        return None
    if p.id in taken:
        group.refuse(p.id, Refusal("producer-in-other-kernel", m.id, _later))
        return None
    if p.id not in g.outputs and p.id not in pinned \
            and all(u in group.members for u in g.users[p.id]):
        return "move"
    if p.op == "broadcast_in_dim" or _read_in_place(g, p):
        return "copy"
    if p.id in g.outputs:
        group.refuse(p.id, Refusal("producer-is-output", m.id, lambda: (
            f"{value(g, p.id)} is an output of the graph: its value is stored whole, so it "
            f"is not computed inside this kernel (no kernel has two outputs)")))
    elif p.id in pinned:
        group.refuse(p.id, Refusal("read-by-copied-broadcast", m.id, lambda: (
            f"{value(g, p.id)} is the input of a broadcast copied into another kernel, "
            f"which reads it from memory: it stays a value of its own")))
    else:
        rule = "dot-has-other-readers" if p.op == "dot_general" else "producer-has-other-users"
        group.refuse(p.id, Refusal(rule, m.id, _later))
    return None


def _later() -> str:  # words formed once every group is known (_why_out)
    return ""


def _add(group: _Group, p: Node, how: str, work: list[Node]) -> None:
    if how == "copy":
        group.copies.add(p.id)  # a leaf: its input stays outside
    else:
        group.members.add(p.id)
        work.append(p)


def _walk(g: Graph, group: _Group, taken: set[int], pinned: set[int],
          refuse: Callable[[Node, Node, str], Refusal | None]) -> None:
    """Grow `group` backwards from its root through the producers that may join (_joins)
    and that `refuse(member, producer, how)` does not refuse (it says why, or None)."""
    work = [group.root]
    while work:
        m = work.pop()
        for i in m.inputs:
            p = g[i]
            how = _joins(g, group, m, p, taken, pinned)
            if how is None:
                continue
            why = refuse(m, p, how)
            if why is None:
                _add(group, p, how, work)
            else:
                group.refuse(p.id, why)


def _broadcast_input(g: Graph, m: Node, p: Node) -> Refusal:
    return Refusal("broadcast-input", m.id, lambda: (
        f"{value(g, p.id)} is the input of broadcast %{m.id} ({m.type}): the kernel reads "
        f"it whole and broadcasts it per element, rather than computing it in the loop"))


def _sliced_input(g: Graph, m: Node, p: Node) -> Refusal:
    return Refusal("read-in-place-input", m.id, lambda: (
        f"{value(g, p.id)} is the input of {m.op} %{m.id} ({m.type}), which the kernel reads "
        f"in place: it reads the input itself from memory"))


def _misfit(g: Graph, m: Node, p: Node, want: str) -> Refusal:
    return Refusal("shape-mismatch", m.id, lambda: (
        f"{value(g, p.id)} has shape {list(p.shape)}, not {want}"))


def _grow(g: Graph, root: Node, taken: set[int], pinned: set[int]) -> _Group:
    group = _Group(root, g[root.inputs[0]].shape if _reduction(root) else root.shape)

    def refuse(m: Node, p: Node, how: str) -> Refusal | None:
        if m.op == "broadcast_in_dim":
            return _broadcast_input(g, m, p)
        if m.op == "slice" and p.op == "pad" and _read_in_place(g, p) and how == "move":
            return None  # a slice of a pad: read in place as one (the pad has no loop shape)
        if m.op in ("slice", "pad"):
            return _sliced_input(g, m, p)
        want = group.phase_shape(m)
        if how == "move" and _reduction(p) and group.reduce is None and p.shape == want:
            group.reduce = p
            group.loop_shape = g[p.inputs[0]].shape
            return None
        if _reduction(p) and group.reduce is not None:
            r = group.reduce
            return Refusal("second-reduction", m.id, lambda: (
                f"{value(g, p.id)} is a reduction (axes {list(p.attrs['axes'])} of "
                f"{list(g[p.inputs[0]].shape)}) and the kernel holds reduction %{r.id} "
                f"already (axes {list(r.attrs['axes'])} of {list(g[r.inputs[0]].shape)}): "
                f"one reduction per kernel, and no row kernel folds both"))
        if (_loopy(p) or _read_in_place(g, p)) and p.shape == want:
            return None
        if _loopy(p) or _reduction(p) or _read_in_place(g, p):
            return _misfit(g, m, p, f"the kernel's iteration space {list(want)}")
        if p.op in ("slice", "pad"):
            return Refusal("not-read-in-place", m.id, lambda: (
                f"{value(g, p.id)} is a {p.op} no kernel reads in place (a pad's padding value "
                f"computed at run time, or a slice's stride below 1): %{m.id} reads its result "
                f"from memory"))
        return op_refusal(g, p, m)

    _walk(g, group, taken, pinned, refuse)
    return group


# ---------------------------------------------------------------- row groups
# Softmax, layer norm and cross-entropy fold each row of a matrix more than once, with the
# results broadcast back over the row in between: one reduction per kernel would make three
# to five kernels of them, each reading the matrix again. A row group holds them whole. Its
# iteration space `shape` is rows x columns, where every reduction folds exactly the column
# (trailing) axes; each member computes either one value per row (its shape is the rows, or
# the rows with size-1 columns) or one per point (its shape broadcasts to `shape`).

Rows = tuple[tuple[int, ...], int]  # (iteration space, number of row dimensions)


def _row_fold(n: Node, g: Graph) -> Rows | None:
    """The row space of a reduction that folds trailing axes and keeps at least one."""
    if not _reduction(n):
        return None
    shape = g[n.inputs[0]].shape
    axes = tuple(n.attrs["axes"])
    rows = len(shape) - len(axes)
    if rows < 1 or axes != tuple(range(rows, len(shape))):
        return None
    return shape, rows


def _fits(n: Node, space: Rows) -> bool:
    """Whether `n`'s value is one per row or one per point of `space`."""
    shape, rows = space
    s = n.shape
    return s == () or s == shape[:rows] or (
        len(s) == len(shape) and all(d in (1, full) for d, full in zip(s, shape)))


def _keeps_dims(b: Node, g: Graph) -> bool:
    """A broadcast whose computed input may join: each of its input's dimensions stays at the
    same position (so the input is, at every point, the value the broadcast gives)."""
    src = g[b.inputs[0]].shape
    dims = tuple(b.attrs["broadcast_dimensions"])
    return all(d == 1 or dims[t] == t for t, d in enumerate(src))


def _grow_rows(g: Graph, root: Node, taken: set[int], pinned: set[int], space: Rows
               ) -> _Group | None:
    shape, rows = space
    root_ok = _row_fold(root, g) == space or (
        _loopy(root) and root.shape in (shape, shape[:rows], shape[:rows] + (1,) * (len(shape) - rows)))
    if not root_ok:
        return None
    group = _Group(root, shape)
    folds = [root] if _reduction(root) else []

    def refuse(m: Node, p: Node, how: str) -> Refusal | None:
        if m.op == "broadcast_in_dim" and not _keeps_dims(m, g):
            return Refusal("broadcast-moves-axes", m.id, lambda: (
                f"{value(g, p.id)} is read through broadcast %{m.id}, which moves its axes "
                f"(dimensions {list(m.attrs['broadcast_dimensions'])}): a row kernel reads it "
                f"whole"))
        if _reduction(p) and how == "move":
            if _row_fold(p, g) != space:
                return Refusal("reduction-axes-differ", m.id, lambda: (
                    f"{value(g, p.id)} reduces axes {list(p.attrs['axes'])} of "
                    f"{list(g[p.inputs[0]].shape)}; the kernel's reductions fold the trailing "
                    f"axes of {list(shape)} after its {rows} row axes"))
            folds.append(p)
            return None
        if _loopy(p) and _fits(p, space):
            return None
        if _loopy(p) or _reduction(p):
            return _misfit(g, m, p, f"one value per row or per point of the kernel's "
                                    f"{list(shape)}")
        return op_refusal(g, p, m)

    _walk(g, group, taken, pinned, refuse)
    if not folds:
        return None
    group.reduce = folds[0]
    return group


def _best_group(g: Graph, root: Node, taken: set[int], pinned: set[int], spaces: list[Rows]
                ) -> _Group:
    """The one-reduction group grown from `root`, or a larger row group."""
    best = _grow(g, root, taken, pinned)
    for space in spaces:
        rowwise = _grow_rows(g, root, taken, pinned, space)
        if rowwise is not None and len(rowwise.members) > len(best.members):
            best = rowwise
    return best


def _kernel(g: Graph, group: _Group) -> Node:
    """The kernel node replacing `group`: its inputs are the values the members read from
    outside (in first-read order); its body renumbers everything from 0."""
    inside = group.members | group.copies
    members = [n for n in g.nodes if n.id in inside]
    external: list[int] = []
    for n in members:
        for i in n.inputs:
            if i not in inside and not _scalar_constant(g[i]) and i not in external:
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
    if any(n.op == "dot_general" for n in members):
        kind = "output"
    return Node(group.root.id, "kernel", tuple(external), Attrs({"body": body, "kind": kind}),
                group.root.type, group.root.source)


def fuse_graph(g: Graph) -> tuple[Graph, list[Rewrite]]:
    """Fuse `g`, and the bodies of its split loops and control-flow regions."""
    return descend(g, lambda x: _fuse_one(x, heads=x is g), CONTROL_FLOW | {"loop"})


def _head(g: Graph, group: _Group, taken: set[int]) -> Node | None:
    """The dot an elementwise group may take as its head (output fusion): one the group alone
    reads, of the group's iteration space, whose operands stay the kernel's inputs."""
    if group.reduce is not None or group.loop_shape != group.epilogue_shape:
        return None
    inside = group.members | group.copies
    for m in sorted(inside):
        for i in g[m].inputs:
            d = g[i]
            if d.op == "dot_general" and i not in inside and i not in taken \
                    and i not in g.outputs and d.shape == group.loop_shape \
                    and all(u in group.members for u in g.users[i]) \
                    and not any(j in inside or _scalar_constant(g[j]) for j in d.inputs):
                return d
    return None


def _fuse_one(g: Graph, heads: bool = True) -> tuple[Graph, list[Rewrite]]:
    log: list[Rewrite] = []
    nodes = {n.id: n for n in g.nodes}
    taken: set[int] = set()
    kernels: dict[int, Node] = {}
    fused_away: set[int] = set()
    copies: set[int] = set()
    pinned: set[int] = set()
    made: list[tuple[_Group, Node | None]] = []
    spaces = list(dict.fromkeys(s for n in g.nodes if (s := _row_fold(n, g)) is not None))
    for n in reversed(g.nodes):
        if n.id in taken or _scalar_constant(n) or not (_loopy(n) or _reduction(n)):
            continue
        group = _best_group(g, n, taken, pinned, spaces)
        head = _head(g, group, taken) if heads else None
        if head is not None:
            group.members.add(head.id)
        if enabled():
            _word_dots(g, group, head, taken, heads)
        taken |= group.members
        if sum(1 for i in group.members | group.copies if not _scalar_constant(g[i])) >= 2 \
                or _large(g, n):
            made.append((group, head))
            pinned |= {i for c in group.copies for i in g[c].inputs}
            kernels[n.id] = _kernel(g, group)
            fused_away |= group.members - {n.id}
            copies |= group.copies
            rule = ("fuse-reduction" if group.reduce is not None
                    else "fuse-dot-epilogue" if head is not None else "fuse-elementwise")
            log.append(Rewrite(rule, tuple(sorted(group.members)), (n.id,),
                               str(n.source) if n.source else None))
        elif enabled() and n.op != "broadcast_in_dim" and isinstance(n.type, TensorType) \
                and n.type.size > 1 and any(OPS[g[i].op].kind != OpKind.SOURCE for i in group.left):
            _alone(g, group)  # (a lone broadcast is a view, and one of parameters had no choice)
    kept = [kernels.get(n.id, nodes[n.id]) for n in g.nodes if n.id not in fused_away]
    # Scalar constants and broadcasts that fused kernels read were copied into them: drop the
    # originals that nothing reads now.
    in_kernels = fused_away | set(kernels)
    copies |= {i for m in g.nodes if m.id in in_kernels for i in m.inputs if _scalar_constant(g[i])}
    # (and the scalar constant under a dropped broadcast, once nothing else reads it)
    copies |= {i for c in list(copies) for i in g[c].inputs if _scalar_constant(g[i])}
    while True:
        still_read = {i for n in kept for i in n.inputs} | set(g.outputs)
        left = [n for n in kept if n.id not in copies or n.id in still_read]
        if len(left) == len(kept):
            break
        kept = left
    if enabled():
        _explain(g, made)
    return Graph(kept, g.params, g.outputs, g.name), log


def _alone(g: Graph, group: _Group) -> None:
    """An analysis remark on an op left alone below the size at which it is a kernel."""
    n = group.root
    size = max(t.size for t in [n.type] + [g[i].type for i in n.inputs]  # type: ignore[union-attr]
               if isinstance(t, TensorType))
    out = ", ".join(f"%{i} ({why.rule})" for i, why in group.left.items()
                    if OPS[g[i].op].kind != OpKind.SOURCE)
    analysis("fuse", "lone-op-too-small", (
        f"{value(g, n.id)} stays a single op, not a kernel: its producers stayed out ({out}), "
        f"and at {size:,} elements it is under the {LONE_MIN:,} at which a lone op becomes a "
        f"kernel (a small one runs as its NumPy form)"), (n.id,), g)


def _word_dots(g: Graph, group: _Group, head: Node | None, taken: set[int], heads: bool
               ) -> None:
    """Word why each dot the group reads was not taken as its head (fuse_remarks)."""
    inside = group.members | group.copies
    for pid, why in list(group.left.items()):
        if g[pid].op == "dot_general" and why.rule == "dot-not-head" and pid not in inside:
            group.left[pid] = head_refusal(
                g, g[pid], g[why.member], heads=heads, reduce=group.reduce,
                loop_shape=group.loop_shape, epilogue_shape=group.epilogue_shape, head=head,
                members=group.members, inside=inside, taken=taken,
                is_const=lambda j: _scalar_constant(g[j]))


def _explain(g: Graph, made: list[tuple[_Group, Node | None]]) -> None:
    """A `missed` remark for every value a kernel reads from outside (except the graph's
    parameters): the producer, the kernel, and why the producer stayed out."""
    kernel_of = {i: group.root.id for group, _ in made for i in group.members}
    for group, head in made:
        inside = group.members | group.copies
        root = group.root.id
        said: set[int] = set()
        for n in (g[i] for i in sorted(inside)):
            for x in n.inputs:
                p = g[x]
                if x in inside or x in said or _scalar_constant(p) or p.op == "parameter":
                    continue
                found = _why_out(g, group, head, n, p, kernel_of)
                if found is None:
                    continue
                said.add(x)  # once per edge
                rule, member, words = found
                read = f" (read by %{member})" if member != root else ""
                missed("fuse", rule, f"left out of kernel %{root}{read}: {words}", (x, root), g)


def _why_out(g: Graph, group: _Group, head: Node | None, n: Node, p: Node,
             kernel_of: dict[int, int]) -> tuple[str, int, str] | None:
    """(rule, member, words) for producer `p` of member `n` left out of `group`."""
    why = group.left.get(p.id)
    if why is not None:
        if why.rule in ("producer-has-other-users", "dot-has-other-readers"):
            words = users_refusal(g, p, kernel_of.get, group.members)
        elif why.rule == "producer-in-other-kernel":
            owner = kernel_of.get(p.id)
            words = (f"{value(g, p.id)} belongs to "
                     f"{f'kernel %{owner}' if owner is not None else 'another group'} already")
        else:
            words = why.words()
        return why.rule, why.member, words
    if head is not None and n.id == head.id:
        return "dot-operand", n.id, (
            f"{value(g, p.id)} is an operand of dot %{head.id}, the kernel's head: the matrix "
            f"product (a BLAS call) reads it whole")
    if n.id in group.copies and n.op != "broadcast_in_dim":
        return "read-in-place-input", n.id, _sliced_input(g, n, p).words()
    if n.id in group.copies:
        return "copied-broadcast-input", n.id, (
            f"{value(g, p.id)} is the input of broadcast %{n.id} ({n.type}), copied into this "
            f"kernel as other values read it too: the kernel reads the small input, not the "
            f"broadcast")
    return None


@register
@dataclass(frozen=True)
class Fuse:
    name: str = "fuse"

    def __call__(self, graph: Graph) -> tuple[Graph, PassReport]:
        with collecting() as said:
            out, log = fuse_graph(graph)
        remarks = settled(said, self.name)
        if not log:
            return graph, PassReport(changed=False, remarks=remarks)
        return out, PassReport(changed=True, rewrites=tuple(log), remarks=remarks)
