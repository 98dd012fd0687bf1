"""Fused map-reduce kernels for split loop bodies on the CPU backend (KeOps's Sum, Min/Max and
ArgMin/ArgMax reductions are the model).

A split body that ends in a reduction over one axis of a pairwise [I, J] value S, or in a
product S @ V with a small V, where S is computed from per-row and per-column values (and a
dot with a small contraction, such as the cross term of a squared distance) by elementwise
ops, compiles to ONE numba kernel: for each row i (in parallel), a loop over j computes S[i, j]
in registers and folds it into the row's accumulators. The [I, J] chunk never exists. What
the body computes before (row norms, scaled inputs: vectors, not matrices) runs on the
reference interpreter first; the kernel's inputs are those values.

`compile_body(body, name)` returns a `FusedBody` (the interpreter child the CPU backend uses
in place of the body's own interpreter) or None when the body does not have this form.
Softmax and logsumexp ends (a running maximum) are not generated here yet: those bodies run
node by node, with their ordinary fused kernels.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import dtypes
from ..ir.builder import GraphBuilder
from ..ir.graph import Attrs, Graph, Node, TensorType
from ..ir.ops import OPS, dot_dims
from ..ir.traits import OpKind
from .cpu_codegen import PRELUDE, CpuKernelCode, _expr, literal, np_type, scalar
from .kernel_plan import PlanError

MAX_FEATURES = 16  # columns of V (accumulators per row) and of a dot's contraction
REDUCTIONS = {"reduce_sum": "add", "reduce_max": "max", "reduce_min": "min",
              "argmax": "argmax", "argmin": "argmin", "dot_general": "add"}


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


_FOLDS = {"reduce_sum": "add", "reduce_max": "max", "reduce_min": "min", "argmax": "argmax",
          "argmin": "argmin"}
_ROW_OPS = ("broadcast_in_dim", "reshape", "squeeze", "expand_dims")


def _folded_axis(g: Graph, n: Node) -> tuple[int, int] | None:
    """(node read, axis folded) when `n` folds one axis of a rank-2 value."""
    if n.op in _FOLDS and len(n.attrs["axes"]) == 1 and _is_rank(g, n.inputs[0], 2):
        return n.inputs[0], n.attrs["axes"][0]
    if n.op == "top_k" and _is_rank(g, n.inputs[0], 2) and n.attrs.get("axis", 1) in (1, -1):
        return n.inputs[0], 1
    if n.op == "dot_general" and _is_rank(g, n.inputs[0], 2):
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
        if n.op in _ROW_OPS:
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
            reductions.append(Reduction(_FOLDS[n.op], x, (n.id,)))
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
        if n.op in _FOLDS and n.type.rank == 2 and _is_rank(g, n.inputs[0], 3) \
                and n.attrs["axes"] == (2,) and n.op != "argmax" and n.op != "argmin":
            if g[n.inputs[0]].shape[2] > 64:
                raise PlanError("a long inner reduction")
            work.append(n.inputs[0])
            continue
        if n.op not in ("broadcast_in_dim",) and OPS[n.op].kind != OpKind.ELEMENTWISE:
            raise PlanError(f"{n.op} inside the pairwise value")
        if n.op != "broadcast_in_dim":
            _expr(n)
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


class _Emitter:
    """Scalar code for the cone at one (i, j) point (and [I, J, D] values in inner loops)."""

    def __init__(self, plan: MapReducePlan, arg: dict[int, str], lines: list[str]) -> None:
        self.plan, self.g, self.arg, self.lines = plan, plan.flat, arg, lines
        self.pos = ("i", "j") if plan.kept == 0 else ("j", "i")
        self.done: set[int] = set()

    def leaf(self, i: int, shape: tuple[int, ...], vars_: tuple[str, ...],
             dims: tuple[int, ...] | None = None) -> str:
        n = self.g[i]
        if n.op == "constant" and n.shape == ():
            return literal(n)
        if n.shape == ():
            return f"{self.arg[i]}[0]"
        dims = dims if dims is not None else tuple(range(len(shape) - n.type.rank, len(shape)))  # type: ignore[union-attr]
        index = [vars_[t] if d == shape[t] else "0" for d, t in zip(n.shape, dims)]
        return f"{self.arg[i]}[{', '.join(index)}]"

    def value(self, i: int, indent: str, vars_: tuple[str, ...], scope: set[int],
              shape: tuple[int, ...] = ()) -> str:
        """The scalar of `i` at the point `vars_` of a consumer of shape `shape`."""
        g = self.g
        if i not in self.plan.cone:
            return self.leaf(i, shape, vars_)
        if i in scope:
            return f"v{i}"
        n = g[i]
        shape = n.shape
        out = f"v{i}"
        if n.op == "broadcast_in_dim":
            src = g[n.inputs[0]]
            if src.id in self.plan.cone:
                text = self.value(src.id, indent, vars_, scope, shape)
            else:
                text = self.leaf(src.id, shape, vars_, tuple(n.attrs["broadcast_dimensions"]))
            self.lines.append(f"{indent}{out} = {text}")
        elif n.op == "dot_general":
            lc, rc, _, _ = dot_dims(n.attrs)
            a, b = n.inputs
            ia, ib = ["", ""], ["", ""]
            ia[lc[0]], ia[1 - lc[0]] = "d", vars_[0]
            ib[rc[0]], ib[1 - rc[0]] = "d", vars_[1]
            self.lines.append(f"{indent}{out} = {scalar(0, n.dtype)}")
            self.lines.append(f"{indent}for d in range({g[a].shape[lc[0]]}):")
            self.lines.append(f"{indent}    {out} += {self.arg[a]}[{', '.join(ia)}] * "
                              f"{self.arg[b]}[{', '.join(ib)}]")
        elif n.op in _FOLDS:  # an inner fold over the third axis
            src = g[n.inputs[0]]
            ident = {"add": 0.0, "max": -np.inf, "min": np.inf}[_FOLDS[n.op]]
            fold = {"add": "{0} + {1}", "max": "_max({0}, {1})", "min": "_min({0}, {1})"}
            self.lines.append(f"{indent}{out} = {scalar(ident, n.dtype)}")
            self.lines.append(f"{indent}for d in range({src.shape[2]}):")
            inner: set[int] = set(scope)
            text = self.value(src.id, indent + "    ", (*vars_, "d"), inner, src.shape)
            self.lines.append(f"{indent}    {out} = " + fold[_FOLDS[n.op]].format(out, text))
        else:
            ops = [self.value(k, indent, vars_, scope, shape) for k in n.inputs]
            self.lines.append(f"{indent}{out} = {np_type(n.dtype)}({_expr(n)(ops, n)})")
        scope.add(i)
        return out


def generate(plan: MapReducePlan, name: str) -> CpuKernelCode:
    """The numba source of the plan's kernel: per row i, one sweep over j."""
    name = re.sub(r"\W", "_", name)
    g = plan.flat
    arg = {leaf: f"in{k}" for k, leaf in enumerate(plan.leaves)}
    out_name = {o: f"out{k}" for k, o in enumerate(plan.outs)}
    nk, nr = plan.shape[plan.kept], plan.shape[1 - plan.kept]
    lines = ["@njit(parallel=True, error_model='numpy', cache=True)",
             f"def {name}({', '.join([*arg.values(), *out_name.values()])}):",
             f"    for i in prange({nk}):"]
    head, loop, tail = [], [], []
    for k, r in enumerate(plan.reductions):
        x = g[r.value]
        t = x.dtype
        acc_t = "f64" if dtypes.is_float(t) else t
        if r.kind in ("argmax", "argmin"):
            head += [f"best{k} = {scalar(-np.inf if r.kind == 'argmax' else np.inf, t)}", f"at{k} = 0"]
        elif r.kind == "top_k":
            head.append(f"filled{k} = 0")
        elif r.kind == "softmax":
            head += [f"m{k} = {scalar(-np.inf, 'f64')}", f"l{k} = {scalar(0, 'f64')}"]
            for p, (_node, v, _) in enumerate(r.parts[2]):
                width = 1 if g[v].type.rank == 1 else g[v].shape[1]  # type: ignore[union-attr]
                head += [f"a{k}_{p}_{f} = {scalar(0, 'f64')}" for f in range(width)]
        else:
            width = 1 if r.v is None or g[r.v].type.rank == 1 else g[r.v].shape[1]  # type: ignore[union-attr]
            ident = {"add": 0.0, "dot": 0.0, "max": -np.inf, "min": np.inf}[r.kind]
            head += [f"acc{k}_{f} = {scalar(ident, acc_t)}" for f in range(width)]
    em = _Emitter(plan, arg, loop)
    ind = "            "
    scope: set[int] = set()
    for k, r in enumerate(plan.reductions):
        x = g[r.value]
        xv = em.value(r.value, ind, em.pos, scope, plan.shape) if r.value in plan.cone else \
            em.leaf(r.value, plan.shape, em.pos)
        f64 = "np.float64"
        if r.kind in ("argmax", "argmin"):
            cmp = ">" if r.kind == "argmax" else "<"
            loop += [f"{ind}if {xv} {cmp} best{k} or ({xv} != {xv} and best{k} == best{k}):",
                     f"{ind}    best{k} = {xv}", f"{ind}    at{k} = j"]
            tail.append(f"{out_name[r.outs[0]]}[i] = at{k}")
        elif r.kind == "top_k":
            vals, idx = (out_name[o] for o in r.outs[1:3])  # values, indices (as lax.top_k)
            kk = r.k  # a sorted buffer of the best k so far: NaN first, ties keep the first
            loop += [f"{ind}p = filled{k}",
                     f"{ind}take = True",
                     f"{ind}if p == {kk}:",
                     f"{ind}    last = {vals}[i, {kk - 1}]",
                     f"{ind}    take = {xv} > last or ({xv} != {xv} and last == last)",
                     f"{ind}    p = {kk - 1}",
                     f"{ind}else:",
                     f"{ind}    filled{k} = p + 1",
                     f"{ind}if take:",
                     f"{ind}    while p > 0:",
                     f"{ind}        prev = {vals}[i, p - 1]",
                     f"{ind}        if not ({xv} > prev or ({xv} != {xv} and prev == prev)):",
                     f"{ind}            break",
                     f"{ind}        {vals}[i, p] = prev",
                     f"{ind}        {idx}[i, p] = {idx}[i, p - 1]",
                     f"{ind}        p -= 1",
                     f"{ind}    {vals}[i, p] = {xv}",
                     f"{ind}    {idx}[i, p] = j"]
        elif r.kind == "softmax":
            m_node, total, products, steps = r.parts
            loop += [f"{ind}s{k} = {f64}({xv})",
                     f"{ind}if s{k} > m{k}:",
                     f"{ind}    scale = math.exp(m{k} - s{k})",
                     f"{ind}    m{k} = s{k}",
                     f"{ind}    l{k} = l{k} * scale + 1.0"]
            grow, keep = [], []
            for p, (_node, v, _) in enumerate(products):
                rank1 = g[v].type.rank == 1  # type: ignore[union-attr]
                for f in range(1 if rank1 else g[v].shape[1]):
                    vj = f"{arg[v]}[j]" if rank1 else f"{arg[v]}[j, {f}]"
                    grow.append(f"{ind}    a{k}_{p}_{f} = a{k}_{p}_{f} * scale + {f64}({vj})")
                    keep.append(f"{ind}    a{k}_{p}_{f} += w * {f64}({vj})")
            loop += grow + [f"{ind}else:", f"{ind}    w = math.exp(s{k} - m{k})",
                            f"{ind}    l{k} += w"] + keep
            # the program's shift: its row chain from the max, at this row
            tail.append(f"mx = {np_type(g[m_node].dtype)}(m{k})")
            names = {m_node: "mx"}
            for c in steps:
                cn = g[c]
                if cn.op in _ROW_OPS:
                    names[c] = names[cn.inputs[0]]
                    continue
                ops = [names.get(q, literal(g[q]) if g[q].op == "constant" else "?") for q in cn.inputs]
                tail.append(f"r{c} = {np_type(cn.dtype)}({_expr(cn)(ops, cn)})")
                names[c] = f"r{c}"
            shift = names[steps[-1]] if steps else "mx"
            tail.append(f"back = math.exp(m{k} - {f64}({shift}))" if steps else "back = 1.0")
            tail.append(f"{out_name[m_node]}[i] = mx")
            if total is not None:
                tail.append(f"{out_name[total]}[i] = l{k} * back")
            for p, (node, v, divided) in enumerate(products):
                rank1 = g[v].type.rank == 1  # type: ignore[union-attr]
                for f in range(1 if rank1 else g[v].shape[1]):
                    value = f"a{k}_{p}_{f} / l{k}" if divided else f"a{k}_{p}_{f} * back"
                    tail.append(f"{out_name[node]}[{'i' if rank1 else f'i, {f}'}] = {value}")
        else:
            fold = {"add": "_radd({0}, {1})", "dot": "_radd({0}, {1})", "max": "_max({0}, {1})",
                    "min": "_min({0}, {1})"}[r.kind]
            acc_t = "f64" if dtypes.is_float(x.dtype) else x.dtype
            if r.kind == "dot":
                rank1 = g[r.v].type.rank == 1  # type: ignore[union-attr]
                for f in range(1 if rank1 else g[r.v].shape[1]):  # type: ignore[index]
                    vj = f"{arg[r.v]}[j]" if rank1 else f"{arg[r.v]}[j, {f}]"  # type: ignore[index]
                    loop.append(f"{ind}acc{k}_{f} = " + fold.format(
                        f"acc{k}_{f}", f"{np_type(acc_t)}({xv}) * {np_type(acc_t)}({vj})"))
                    tail.append(f"{out_name[r.outs[0]]}[{'i' if rank1 else f'i, {f}'}] = acc{k}_{f}")
            else:
                loop.append(f"{ind}acc{k}_0 = " + fold.format(f"acc{k}_0", f"{np_type(acc_t)}({xv})"))
                tail.append(f"{out_name[r.outs[0]]}[i] = acc{k}_0")
    lines += ["        " + h for h in head]
    lines.append(f"        for j in range({nr}):")
    lines += loop
    lines += ["        " + t for t in tail]
    return CpuKernelCode(name, "\n".join(lines) + "\n", True, None, None, 0)


class FusedBody:
    """A split body run as pre-values (reference interpreter) then one map-reduce kernel: the
    interpreter-child interface the loop driver uses (evaluate, all_kernels)."""

    def __init__(self, plan: MapReducePlan, name: str, fn: Any, code: CpuKernelCode) -> None:
        from .reference import NumpyInterpreter

        self.plan, self.name, self.fn, self.code = plan, name, fn, code
        self.pre = NumpyInterpreter(plan.pre, name + "/pre/")
        self.post = NumpyInterpreter(plan.post, name + "/post/")
        self.seconds = 0.0
        self.children: dict = {}

    @property
    def source(self) -> str:
        return PRELUDE + "\n\n" + self.code.source

    def evaluate(self, args: Sequence[Any], after_step: Any = None, consume: bool = False) -> list[Any]:
        plan = self.plan
        pre = dict(zip(plan.pre.outputs, self.pre.evaluate(args)))
        t0 = time.perf_counter()
        outs = {o: np.empty(t.shape, dtypes.to_numpy(t.dtype))
                for o in plan.outs for t in (plan.out_type(o),)}
        self.fn(*[np.reshape(pre[i], (1,)) if np.ndim(pre[i]) == 0 else pre[i]
                  for i in plan.leaves], *outs.values())
        self.seconds += time.perf_counter() - t0
        values = {**pre, **outs}
        del outs, pre
        post = [values.pop(i) if i in values else None for i in plan.post.params]
        del values
        return self.post.evaluate(post, consume=True)

    def all_kernels(self) -> list[Any]:
        return [self, *self.pre.all_kernels()]

    def compile_bodies(self) -> None:
        self.pre.compile_bodies()


def compile_body(body: Graph, name: str) -> FusedBody | None:
    """The fused form of a split body, or None when it does not have the map-reduce form."""
    from .cpu import load

    try:
        plan = plan_mapreduce(body)
        code = generate(plan, "mapreduce_" + name)
        fn = load(code)
    except (PlanError, ImportError):
        return None
    return FusedBody(plan, name, fn, code)
