"""Which nodes a split along one dimension can run chunk by chunk (the split pass's analysis).

Starting from a large tensor and one of its axes, the region grows to every producer and user
through which that dimension maps (elementwise ops, broadcasts, transposes, reshapes that keep
it whole, dot_general free and batch dims, reductions and top_k along other axes) and stops at
nodes that reduce it away: reductions and dot contractions accumulate with their monoid,
argmax/argmin and top_k merge. Such a node is an *exit*: its axis is None and the region does
not grow past it. Every region node has one axis; a conflict rejects the region. The op
table's `split` trait says which ops take part at all (Split.NONE is a barrier) and how an
exit merges; the axis rules of the shape ops are here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph, Node, TensorType
from ..ir.ops import OPS, dot_dims
from ..ir.traits import OpKind, Split

Axes = tuple[int | None, ...]  # per operand: the axis that is split, or None (passed whole)


def exit_kind(op: str) -> str:
    """How a loop merges the chunk results of an exit: its monoid's name for an op that
    accumulates (reductions, dot_general), else the split trait ("arg", "top_k")."""
    row = OPS[op]
    if row.split == Split.ACCUMULATE and row.monoid is not None:
        return row.monoid.name
    return row.split.value


def _source(n: Node) -> bool:
    return OPS[n.op].kind == OpKind.SOURCE


@dataclass(frozen=True)
class Step:
    """How a node splits: the axis of its result (None: an exit) and of each operand."""

    axis: int | None
    operands: Axes


def _rank(g: Graph, i: int) -> int:
    t = g[i].type
    return t.rank if isinstance(t, TensorType) else t.elements[0].rank


def _shape(g: Graph, i: int) -> tuple[int, ...]:
    t = g[i].type
    return t.shape if isinstance(t, TensorType) else t.elements[0].shape


def _same_axis(g: Graph, n: Node, axis: int, size: int) -> Axes:
    """Operands that have the split dimension at `axis` (not broadcast along it)."""
    return tuple(axis if _rank(g, i) == _rank(g, n.id) and _shape(g, i)[axis] == size else None
                 for i in n.inputs)


def _reshape_axis(src: tuple[int, ...], dst: tuple[int, ...], axis: int) -> int | None:
    """The axis of `dst` that holds `src`'s axis whole (same prefix product), if any."""
    prefix = 1
    for d in src[:axis]:
        prefix *= d
    acc = 1
    for b, d in enumerate(dst):
        if acc == prefix and d == src[axis]:
            return b
        acc *= d
    return None


def _row_axes(g: Graph, n: Node) -> dict[int, tuple[int | None, ...]]:
    """The row's own axis rule (OpDef.split_axes) for `n`."""
    return OPS[n.op].split_axes([g[i].type for i in n.inputs], n.type, n.attrs)  # type: ignore[misc, arg-type]


def step_from_result(g: Graph, n: Node, axis: int, size: int) -> Step | None:
    """`n` computes chunks along result axis `axis`: which operand axes does it read?"""
    kind, a = OPS[n.op].kind, n.attrs
    if OPS[n.op].split == Split.NONE:
        return None
    if OPS[n.op].split_axes is not None:
        operands = _row_axes(g, n).get(axis)
        return None if operands is None else Step(axis, operands)
    if kind == OpKind.ELEMENTWISE or n.op in ("concatenate", "sort", "get_tuple_element"):
        if n.op == "concatenate" and a["dimension"] == axis:
            return None
        if n.op == "sort" and a["dimension"] == axis:
            return None
        if n.op == "get_tuple_element":
            return Step(axis, (axis,))
        return Step(axis, _same_axis(g, n, axis, size))
    if n.op == "broadcast_in_dim":
        bd = tuple(a["broadcast_dimensions"])
        src = bd.index(axis) if axis in bd else None
        return Step(axis, (src if src is not None and _shape(g, n.inputs[0])[src] == size
                           else None,))
    if n.op == "transpose":
        return Step(axis, (tuple(a["permutation"])[axis],))
    if n.op in ("reshape", "squeeze", "expand_dims"):
        src = _reshape_axis(_shape(g, n.id), _shape(g, n.inputs[0]), axis)
        return None if src is None else Step(axis, (src,))
    if n.op == "rev":
        return None if axis in a["dimensions"] else Step(axis, (axis,))
    if n.op == "slice":
        full = (a["start_indices"][axis] == 0 and a["limit_indices"][axis] == size
                and _shape(g, n.inputs[0])[axis] == size  # the slice takes the axis whole
                and (a.get("strides") or (1,) * 99)[axis] == 1)
        return Step(axis, (axis,)) if full else None
    if n.op in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"):
        return None if a["axis"] == axis else Step(axis, (axis,))
    if n.op == "top_k":
        return None if a.get("axis", _rank(g, n.inputs[0]) - 1) == axis else Step(axis, (axis,))
    if kind == OpKind.REDUCE:
        kept = [i for i in range(_rank(g, n.inputs[0])) if i not in a["axes"]]
        return Step(axis, (kept[axis],))
    if n.op == "dot_general":
        lc, rc, lb, rb = dot_dims(a)
        lf = [i for i in range(_rank(g, n.inputs[0])) if i not in lc + lb]
        rf = [i for i in range(_rank(g, n.inputs[1])) if i not in rc + rb]
        if axis < len(lb):
            return Step(axis, (lb[axis], rb[axis]))
        if axis < len(lb) + len(lf):
            return Step(axis, (lf[axis - len(lb)], None))
        return Step(axis, (None, rf[axis - len(lb) - len(lf)]))
    return None


def step_from_operand(g: Graph, n: Node, pos: int, axis: int, size: int) -> Step | None:
    """Operand `pos` of `n` is split along `axis`: how does `n` split (None: it cannot)?"""
    a, row = n.attrs, OPS[n.op]
    if row.split == Split.NONE:
        return None
    if row.kind == OpKind.REDUCE:  # the monoid reductions and argmax/argmin
        if axis in a["axes"]:
            return Step(None, (axis,))
        return Step(axis - sum(1 for r in a["axes"] if r < axis), (axis,))
    if row.split_axes is not None:
        found = [r for r, ops in _row_axes(g, n).items() if ops[pos] == axis]
        return Step(found[0], _row_axes(g, n)[found[0]]) if found else None
    if row.split == Split.TOP_K:
        if a.get("axis", _rank(g, n.inputs[0]) - 1) == axis:
            return Step(None, (axis,))
        return Step(axis, (axis,))
    if n.op == "dot_general":
        lc, rc, lb, rb = dot_dims(a)
        mine, theirs = ((lc, lb), (rc, rb)) if pos == 0 else ((rc, rb), (lc, lb))
        if axis in mine[0]:
            other = theirs[0][mine[0].index(axis)]
            return Step(None, (axis, other) if pos == 0 else (other, axis))
        if axis in mine[1]:
            b = mine[1].index(axis)
            return step_from_result(g, n, b, size)
        free = [i for i in range(_rank(g, n.inputs[pos])) if i not in mine[0] + mine[1]]
        out = len(lb) + free.index(axis)
        if pos == 1:
            out += _rank(g, n.inputs[0]) - len(lc) - len(lb)
        return step_from_result(g, n, out, size)
    if n.op == "broadcast_in_dim":
        return step_from_result(g, n, tuple(a["broadcast_dimensions"])[axis], size)
    if n.op == "transpose":
        return step_from_result(g, n, tuple(a["permutation"]).index(axis), size)
    if n.op in ("reshape", "squeeze", "expand_dims"):
        out = _reshape_axis(_shape(g, n.inputs[0]), _shape(g, n.id), axis)
        return None if out is None else step_from_result(g, n, out, size)
    step = step_from_result(g, n, axis, size) if _rank(g, n.id) == _rank(g, n.inputs[pos]) else None
    return step if step is not None and step.operands[pos] == axis else None


@dataclass
class Region:
    """Nodes computed chunk by chunk: node id -> Step. `size` is the split dimension's extent."""

    size: int
    steps: dict[int, Step]

    def outputs(self, g: Graph) -> list[int]:
        """Region nodes read outside it (or program outputs), in graph order."""
        outs = set(g.outputs)
        return [n.id for n in g.nodes if n.id in self.steps and (
            n.id in outs or any(u not in self.steps for u in g.users.get(n.id, ())))]

    def inputs(self, g: Graph) -> list[tuple[int, int | None]]:
        """(node, axis) pairs the loop reads from outside, in first-use order."""
        seen: dict[tuple[int, int | None], None] = {}
        for n in g.nodes:
            if n.id in self.steps:
                for i, ax in zip(n.inputs, self.steps[n.id].operands):
                    if i not in self.steps:
                        seen.setdefault((i, ax))
        return list(seen)


def grow(g: Graph, seed: int, axis: int, pull: bool = True, why: list[str] | None = None,
         ) -> Region | None:
    """The region around `seed` split along its result axis `axis`, or None if it is not
    consistent or not convex (a value leaving it would have to come back in); then `why`,
    when given, gets the reason in words (for the split pass's remarks)."""
    def no(reason: str) -> None:
        if why is not None:
            why.append(f"axis {axis}: {reason}")

    size = _shape(g, seed)[axis]
    first = step_from_result(g, g[seed], axis, size)
    if size < 2:
        return no(f"size {size}")
    if _source(g[seed]):
        return no(f"%{seed} is a {g[seed].op}, read, not computed")
    if first is None:
        op = g[seed].op
        return no(f"{op} is a barrier (it does not split)" if OPS[op].split == Split.NONE
                  else f"{op} does not compute its result in chunks along this axis")
    steps: dict[int, Step] = {seed: first}
    work = [seed]
    while work:
        n = g[work.pop()]
        st = steps[n.id]
        for i, ax in zip(n.inputs, st.operands):  # producers
            if i in steps:
                if steps[i].axis != ax or ax is None:
                    return no(f"%{n.id} reads %{i} {'whole' if ax is None else f'along axis {ax}'}"
                              f", but the region splits %{i} along axis {steps[i].axis}")
                continue
            # a broadcast is a view: pulled in always, so the loop reads its (smaller) source
            if ax is None or _source(g[i]) or not (pull or n.op == "get_tuple_element"
                                                   or g[i].op == "broadcast_in_dim"):
                continue
            back = step_from_result(g, g[i], ax, size)
            # a producer read another way by a node already in the region (the norms of `a`
            # in |a_i|^2 + |a_j|^2 - 2 a.a: chunked for one broadcast, whole for the other)
            # stays outside, and the loop takes it both ways
            if back is not None and all(steps[u].operands[k] == ax
                                        for u in g.users.get(i, ()) if u in steps
                                        for k, w in enumerate(g[u].inputs) if w == i) \
                    and all(w not in steps or (steps[w].axis is not None
                                               and steps[w].axis == back.operands[k])
                            for k, w in enumerate(g[i].inputs)):
                steps[i] = back
                work.append(i)
        if st.axis is None:
            if OPS[n.op].split == Split.TOP_K:  # its element reads belong to the merge
                for u in g.users.get(n.id, ()):
                    steps.setdefault(u, Step(None, (None,)))
            continue
        for u in dict.fromkeys(g.users.get(n.id, ())):  # users
            if u in steps:
                continue
            un = g[u]
            pos = un.inputs.index(n.id)
            fwd = step_from_operand(g, un, pos, st.axis, size)
            if fwd is None or any(un.inputs[k] == n.id and fwd.operands[k] != st.axis
                                  for k in range(len(un.inputs))):
                continue
            if any(w in steps and (steps[w].axis is None or steps[w].axis != fwd.operands[k])
                   for k, w in enumerate(un.inputs)):
                continue
            steps[u] = fwd
            work.append(u)
    region = Region(size, steps)
    if not _consistent(g, region):
        return no("a value is read whole by one node of the region and in chunks by another")
    if not _convex(g, region):
        return no("a value leaving the region would have to come back into it (or a tuple "
                  "would cross its boundary)")
    return region


def _consistent(g: Graph, r: Region) -> bool:
    """Every region node reads a region producer along the axis that producer is split on
    (a value wanted whole by one reader and chunked by another stays outside the region)."""
    return all(r.steps[w].axis is not None and r.steps[w].axis == st.operands[k]
               for nid, st in r.steps.items() for k, w in enumerate(g[nid].inputs)
               if w in r.steps and not (st.axis is None and g[nid].op == "get_tuple_element"))


def _convex(g: Graph, r: Region) -> bool:
    tainted: set[int] = set()
    for n in g.nodes:
        if n.id in r.steps:
            if any(i in tainted for i in n.inputs):
                return False
        elif any(i in r.steps or i in tainted for i in n.inputs):
            tainted.add(n.id)
    if any(not isinstance(g[i].type, TensorType) for i, _ in r.inputs(g)):
        return False  # a tuple cannot be sliced: its get_tuple_element reads stay outside
    outs = set(r.outputs(g))
    for n in g.nodes:  # region outputs must be tensors, or a merged top_k's elements
        if n.id in outs and not isinstance(n.type, TensorType):
            return False
    return True
