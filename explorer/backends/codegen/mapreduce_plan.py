"""The shape of a fused map-reduce kernel, read off a split loop's body: the plan that the one
map-reduce emitter (mapreduce_emitter.py) renders for the CPU (cpu/mapreduce.py) and the GPU
(gpu/mapreduce.py). KeOps's Sum, Min/Max, ArgMin/ArgMax, ArgKMin and LogSumExp reductions
are the model.

A body has this form when it folds a pairwise [I, J] value S over one axis: reductions
(sum, max, min, argmax, argmin), top_k along J, products S @ V with a small V, and the
softmax pattern exp(X - max X) folded by a sum and/or products (online: a running maximum).
S is computed, at each (i, j), from per-row and per-column values, small dots (the cross
term of a squared distance) and inner folds over a short third axis, by elementwise ops.
Everything the body computes before from its inputs (vectors, not matrices) is `pre`, run
by the reference interpreter, and everything after the folds is `post`. A body of another
form raises `PlanError`, and the backend runs it node by node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...ir import dtypes
from ...ir.builder import GraphBuilder
from ...ir.graph import Attrs, Graph, Node, TensorType
from ...ir.ops import OPS, dot_dims
from ...ir.traits import OpKind
from .kernel_plan import PlanError

MAX_FEATURES = 16  # columns of V (accumulators per row) and of a dot's contraction




@dataclass(frozen=True)
class Reduction:
    """One fold over j of a pairwise value: `kind` add, max, min, argmax, argmin, top_k, dot
    (with V) or softmax (online: running max, sum and products with V)."""

    kind: str
    value: int  # the [I, J] value folded (for softmax: X in exp(X - max X))
    outs: tuple[int, ...]  # the flat graph's nodes whose values the kernel writes
    v: int | None = None  # V of a product
    k: int = 0  # top_k's k
    # softmax: the max, the running sum, products (node, divided by the sum?), and the
    # row-value chain from the max to the shift the program subtracts
    parts: tuple = ()


@dataclass(frozen=True)
class MapReducePlan:
    flat: Graph
    pre: Graph  # the body's parameters -> the kernel's inputs and what `post` reads
    post: Graph  # (kernel outputs, pre values) -> the body's results
    leaves: tuple[int, ...]  # pre values the kernel reads
    cone: frozenset[int]  # the pairwise values computed in registers
    reductions: tuple[Reduction, ...]
    shape: tuple[int, int]  # (I, J) of the pairwise values
    kept: int  # the axis the results keep (the parallel rows); the other is folded
    outs: tuple[int, ...]  # the kernel's output buffers: flat node ids, or scratch (< 0)
    scratch: dict[int, TensorType]  # the types of the scratch buffers

    def out_type(self, o: int) -> TensorType:
        return self.scratch[o] if o < 0 else self.flat[o].type  # type: ignore[return-value]


def _is_rank(g: Graph, i: int, r: int) -> bool:
    t = g[i].type
    return isinstance(t, TensorType) and t.rank == r


FOLDS = {"reduce_sum": "add", "reduce_max": "max", "reduce_min": "min", "argmax": "argmax",
          "argmin": "argmin"}
ROW_OPS = ("broadcast_in_dim", "reshape", "squeeze", "expand_dims")


def _folded_axis(g: Graph, n: Node) -> tuple[int, int] | None:
    """(node read, axis folded) when `n` folds one axis of a rank-2 value."""
    if n.op in FOLDS and len(n.attrs["axes"]) == 1 and _is_rank(g, n.inputs[0], 2):
        return n.inputs[0], n.attrs["axes"][0]
    if n.op == "top_k" and _is_rank(g, n.inputs[0], 2) and n.attrs.get("axis", 1) in (1, -1):
        return n.inputs[0], 1
    if n.op == "dot_general" and _is_rank(g, n.inputs[0], 2) \
            and n.dtype == g[n.inputs[0]].dtype:  # (a preferred_element_type converts first)
        lc, rc, lb, rb = dot_dims(n.attrs)
        v = g[n.inputs[1]]
        if not lb and not rb and len(lc) == 1 and rc == (0,) and v.type.rank in (1, 2):  # type: ignore[union-attr]
            if (v.type.shape[1] if v.type.rank == 2 else 1) <= MAX_FEATURES:  # type: ignore[union-attr]
                return n.inputs[0], lc[0]
    return None


def _row_chain(g: Graph, start: int, stop: int, kept_size: int) -> list[int] | None:
    """The nodes from `start` (a row value) to `stop`, if every step is elementwise with
    constants or a reshape/broadcast of a row value; else None."""
    chain: list[int] = []
    n = g[stop]
    while n.id != start:
        if n.type.size > kept_size:  # type: ignore[union-attr]
            if n.id != stop or n.op != "broadcast_in_dim":
                return None
        if n.op in ROW_OPS:
            nxt = n.inputs[0]
        elif OPS[n.op].kind == OpKind.ELEMENTWISE:
            row = [i for i in n.inputs if not (g[i].op == "constant" and g[i].shape == ())]
            if len(row) != 1:
                return None
            nxt = row[0]
        else:
            return None
        chain.append(n.id)
        n = g[nxt]
    return chain[::-1]


def _softmax(g: Graph, m: Node, x: int, axis: int, kept_size: int) -> tuple[Reduction, set[int]] | None:
    """The online softmax group around reduce_max `m` of X, with the nodes it absorbs."""
    users = g.users
    for sub in g.nodes:
        if sub.op != "sub" or sub.inputs[0] != x:
            continue
        chain = _row_chain(g, m.id, sub.inputs[1], kept_size)
        if chain is None or len(users.get(sub.id, ())) != 1:
            continue
        e = g[users[sub.id][0]]
        if e.op != "exp":
            return None
        absorbed = {sub.id, e.id, *[c for c in chain if g[c].type.size > kept_size]}  # type: ignore[union-attr]
        total: int | None = None
        products: list[tuple[int, int, bool]] = []
        divisions: list[Node] = []
        for u in users.get(e.id, ()):
            un = g[u]
            fold = _folded_axis(g, un)
            if un.op == "reduce_sum" and fold == (e.id, axis):
                total = un.id
            elif un.op == "dot_general" and fold == (e.id, axis):
                products.append((un.id, un.inputs[1], False))
            elif un.op == "div" and un.inputs[0] == e.id:
                divisions.append(un)
            else:
                return None
        for d in divisions:
            if total is None or _row_chain(g, total, d.inputs[1], kept_size) is None:
                return None
            absorbed |= {d.id, d.inputs[1]}
            for u in users.get(d.id, ()):
                if _folded_axis(g, g[u]) != (d.id, axis) or g[u].op != "dot_general":
                    return None
                products.append((u, g[u].inputs[1], True))
        if total is None and not products:
            return None
        row_steps = tuple(c for c in chain if g[c].type.size <= kept_size)  # type: ignore[union-attr]
        outs = (m.id, *([total] if total is not None else []), *(p[0] for p in products))
        return Reduction("softmax", x, outs, parts=(m.id, total, tuple(products), row_steps)), absorbed
    return None


def plan_mapreduce(body: Graph) -> MapReducePlan:
    g = flatten(body)
    folds = [(n, f) for n in g.nodes if (f := _folded_axis(g, n)) is not None]
    if not folds:
        raise PlanError("no fold of a pairwise value")
    big = max(folds, key=lambda nf: g[nf[1][0]].type.size)  # type: ignore[union-attr]
    shape, axis = g[big[1][0]].shape, big[1][1]
    folds = [(n, f) for n, f in folds if g[f[0]].shape == shape]  # the others are vectors
    if any(f[1] != axis for _, f in folds):
        raise PlanError("folds of a pairwise value along both axes")
    kept = 1 - axis
    kept_size = shape[kept]
    reductions: list[Reduction] = []
    scratch: dict[int, TensorType] = {}
    absorbed: set[int] = set()
    done: set[int] = set()
    for n, (x, _) in folds:
        if n.id in done:
            continue
        if n.op == "reduce_max" and dtypes.is_float(n.dtype):
            group = _softmax(g, n, x, axis, kept_size)
            if group is not None:
                red, more = group
                reductions.append(red)
                absorbed |= more
                done |= set(red.outs)
                continue
        if n.op in ("reduce_max", "reduce_min", "argmax", "argmin", "top_k") \
                and not dtypes.is_float(g[x].dtype):
            raise PlanError("an integer fold")
        if n.op == "top_k":
            if axis != 1 or kept != 0:
                raise PlanError("top_k along the kept axis")
            slot: dict[int, int] = {}
            for u in g.users.get(n.id, ()):
                slot[g[u].attrs["index"]] = u
            for index in (0, 1):
                if index not in slot:  # a buffer the kernel needs, that nothing reads
                    slot[index] = -1 - len(scratch)
                    scratch[slot[index]] = n.type.elements[index]  # type: ignore[union-attr]
            reductions.append(Reduction("top_k", x, (n.id, slot[0], slot[1]), k=n.attrs["k"]))
        elif n.op == "dot_general":
            reductions.append(Reduction("dot", x, (n.id,), v=n.inputs[1]))
        else:
            reductions.append(Reduction(FOLDS[n.op], x, (n.id,)))
        done.add(n.id)
    # the cone: pairwise (and [I, J, D]) values computed in registers
    cone: set[int] = set()
    work = [r.value for r in reductions]
    while work:
        n = g[work.pop()]
        if n.id in cone:
            continue
        if n.id in absorbed or n.op in ("top_k", "get_tuple_element"):
            raise PlanError(f"%{n.id} ({n.op}) is needed as a matrix")
        cone.add(n.id)
        if n.op == "dot_general":
            lc, rc, lb, rb = dot_dims(n.attrs)
            if lb or rb or len(lc) != 1 or n.type.rank != 2 or g[n.inputs[0]].shape[lc[0]] > 64:  # type: ignore[union-attr]
                raise PlanError("a dot that is not a small cross term")
            if any(_is_rank(g, i, 2) is False for i in n.inputs):
                raise PlanError("a dot of other than matrices")
            continue  # its operands are read from the pre values
        if n.op in FOLDS and n.type.rank == 2 and _is_rank(g, n.inputs[0], 3) \
                and n.attrs["axes"] == (2,) and n.op != "argmax" and n.op != "argmin":
            if g[n.inputs[0]].shape[2] > 64:
                raise PlanError("a long inner reduction")
            work.append(n.inputs[0])
            continue
        if n.op not in ("broadcast_in_dim",) and OPS[n.op].kind != OpKind.ELEMENTWISE:
            raise PlanError(f"{n.op} inside the pairwise value")
        for i in n.inputs:  # a value of the full shape is computed here; others are read
            if g[i].op not in ("parameter", "constant") and g[i].shape == n.shape:
                work.append(i)
    leaves: list[int] = []
    for n in g.nodes:
        if n.id in cone:
            reads = n.inputs if n.op != "broadcast_in_dim" or n.inputs[0] not in cone else ()
            for i in reads:
                if i not in cone and i not in leaves and not (g[i].op == "constant" and g[i].shape == ()):
                    leaves.append(i)
    for r in reductions:
        for i in [r.v, *(p[1] for p in (r.parts[2] if r.parts else ()))]:
            if i is not None and i not in leaves:
                leaves.append(i)
    outs = {o for r in reductions for o in r.outs}
    kernel_side = cone | absorbed | outs | {r.outs[0] for r in reductions if r.kind == "top_k"}
    after: set[int] = set()
    for n in g.nodes:  # what depends on the kernel: cone, absorbed or outputs
        if n.id not in kernel_side and any(i in kernel_side or i in after for i in n.inputs):
            after.add(n.id)
    for n in g.nodes:
        if n.id in after and any(i in cone or i in absorbed for i in n.inputs):
            raise PlanError(f"%{n.id} ({n.op}) reads a pairwise value")
    for i in leaves:
        if i in kernel_side or i in after:
            raise PlanError(f"%{i} is read by the pairwise value but computed from a fold")
    big = g[reductions[0].value].type.size  # type: ignore[union-attr]
    for n in g.nodes:
        if n.id not in kernel_side and n.op != "parameter" and isinstance(n.type, TensorType) \
                and n.type.size >= big:
            raise PlanError(f"%{n.id} ({n.op}) is a matrix outside the kernel")
    for o in g.outputs:
        if o in cone or o in absorbed:
            raise PlanError("a pairwise value is a result")
    kernel_outs = [o for r in reductions for o in r.outs
                   if not (r.kind == "top_k" and o == r.outs[0])]
    if any(o in kernel_side for n in g.nodes if n.id in after for o in n.inputs
           if o not in kernel_outs):
        raise PlanError("a value after the kernel reads one inside it")
    before = [n for n in g.nodes if n.id not in kernel_side and n.id not in after]
    pre_needed = [i for n in g.nodes if n.id in after for i in n.inputs
                  if i not in kernel_side and i not in after]
    pre_needed += [o for o in g.outputs if o not in kernel_side and o not in after]
    pre_outs = tuple(dict.fromkeys([*leaves, *pre_needed]))
    pre = Graph(before, g.params, pre_outs, f"{g.name}_pre")
    ext = list(dict.fromkeys([*(o for o in kernel_outs if o >= 0), *pre_outs]))
    params = [Node(i, "parameter", (), Attrs({"index": k, "name": f"v{i}"}), g[i].type)
              for k, i in enumerate(ext)]
    post = Graph(params + [n for n in g.nodes if n.id in after], tuple(ext), g.outputs,
                 f"{g.name}_post")
    return MapReducePlan(g, pre, post, tuple(leaves), frozenset(cone), tuple(reductions),
                         (shape[0], shape[1]), kept, tuple(kernel_outs), scratch)


def flatten(body: Graph) -> Graph:
    """`body` with its fused kernels inlined (their ops in the kernel's place)."""
    b = GraphBuilder(body.name)
    env: dict[int, int] = {}
    for n in body.nodes:
        if n.op == "parameter":
            env[n.id] = b.param(n.type, n.attrs.get("name", ""), n.source)  # type: ignore[arg-type]
        elif n.op == "kernel":
            inner = n.attrs["body"]
            sub = dict(zip(inner.params, (env[i] for i in n.inputs)))
            for m in inner.nodes:
                if m.op != "parameter":
                    sub[m.id] = b.add(m.op, [sub[i] for i in m.inputs], m.attrs, m.source)
            env[n.id] = sub[inner.outputs[0]]
        else:
            env[n.id] = b.add(n.op, [env[i] for i in n.inputs], n.attrs, n.source)
    return b.build([env[o] for o in body.outputs])


def fused_body_peak(body: Graph, generate: Callable[[MapReducePlan, str], object],
                    backend: str) -> int | None:
    """The planned peak of a split body run as a fused map-reduce kernel by `backend` (its
    pre part with the values it hands on, the kernel's outputs, its post part: an upper
    bound, summed), or None when the body does not have the form or `generate`, the
    backend's kernel writer, refuses it. The CPU and GPU backends declare this to the
    planner as their `loop_body`: their chunks hold no [I, J] value, so they can be larger."""
    from ...analysis.memory import plan

    try:
        p = plan_mapreduce(body)
        generate(p, "probe")  # the generator may refuse what the plan accepts
    except PlanError:
        return None
    pre = plan(Graph(p.pre.nodes, p.pre.params, (), p.pre.name), backend).peak_bytes
    handed = sum(p.flat[i].type.nbytes for i in set(p.pre.outputs)  # type: ignore[union-attr]
                 if p.flat[i].op != "parameter")
    outs = sum(p.out_type(o).nbytes for o in p.outs)
    post = plan(p.post, backend).peak_bytes + sum(p.flat[o].type.nbytes for o in p.post.outputs)  # type: ignore[union-attr]
    return pre + handed + outs + post
