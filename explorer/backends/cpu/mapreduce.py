"""Fused map-reduce kernels for split loop bodies on the CPU backend: a body of the form that
mapreduce_plan.py reads compiles to ONE numba kernel. For each row i (in parallel), a loop
over j computes the pairwise value S[i, j] in registers and folds it into the row's
accumulators: sums (reassociating, so LLVM may vectorize), max/min, argmax/argmin (first
NaN, first of ties), a sorted buffer of the best k for top_k (lax.top_k's order: +NaN
first, -NaN last, ties keep the lower index), products with V, and for softmax/logsumexp a
running maximum with the sum and products rescaled when it grows (online, as flash attention
and KeOps's LogSumExp). The [I, J] chunk never exists. `pre` (the vectors the body computes
from its inputs) and `post` (what it computes from the folds) run on the reference
interpreter.

`compile_body(body, name)` returns a `FusedBody` (the interpreter child the CPU backend uses
in place of the body's own interpreter) or None when the body does not have this form.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.graph import Graph, Node
from ...ir.ops import dot_dims
from ..codegen.scalar_form import C_MATH
from ..kernel_plan import PlanError
from ..mapreduce_plan import FOLDS, ROW_OPS, MapReducePlan, fused_body_peak, plan_mapreduce
from . import vector_math
from .kernel_codegen import KERNEL, PRELUDE, CpuKernelCode, _expr, np_type, scalar


def vector_symbol(n: Node) -> str | None:
    """libmvec's four-lane function computing the elementwise math node `n`, or None. C_MATH
    names C's function, whose name is also libmvec's."""
    form = C_MATH.get(n.op)
    if len(n.inputs) != 1 or not callable(form):
        return None
    c_call = re.fullmatch(r"(\w+)\(x\)", form(["x"], n))
    return vector_math.symbol(c_call.group(1), n.dtype) if c_call else None


UNROLL = 4  # contractions over at most this many features are written out term by term


class _Emitter:
    """Scalar code for the cone at one (i, j) point (and [I, J, D] values in inner loops), or
    at LANES points (i, j0..j3) with vector math calls."""

    def __init__(self, plan: MapReducePlan, arg: dict[int, str], lines: list[str]) -> None:
        self.plan, self.g, self.arg, self.lines = plan, plan.flat, arg, lines
        self.vector_calls = 0
        # variables are numbered by the node's place among the pairwise cone and what it
        # reads, not by its id: bodies of one structure then give one source (one compiled
        # kernel), whatever else the loop body computes before or after
        read = set(plan.cone) | {i for c in plan.cone for i in self.g[c].inputs}
        order = sorted(self.g.nodes, key=lambda n: n.id not in read)  # stable: graph order
        self.num = {n.id: k for k, n in enumerate(order)}
        # run-time scalars (name, value): constants and loop bounds are arguments, so one
        # compiled kernel serves every program of this structure (numba never frees code)
        self.scalars: dict[str, object] = {}

    def runtime(self, name: str, value: object) -> str:
        self.scalars[name] = value
        return name

    def leaf(self, i: int, shape: tuple[int, ...], vars_: tuple[str, ...],
             dims: tuple[int, ...] | None = None) -> str:
        n = self.g[i]
        if n.op == "constant" and n.shape == ():
            value = np.asarray(n.attrs["value"].array).astype(dtypes.to_numpy(n.dtype))[()]
            return self.runtime(f"c{self.num[i]}", value)
        if n.shape == ():
            return f"{self.arg[i]}[0]"
        dims = dims if dims is not None else tuple(range(len(shape) - n.type.rank, len(shape)))  # type: ignore[union-attr]
        index = [vars_[t] if d == shape[t] else "0" for d, t in zip(n.shape, dims)]
        return f"{self.arg[i]}[{', '.join(index)}]"

    def pos(self, j: str) -> tuple[str, str]:
        """The (row, column) loop variables of the pairwise values, with `j` the folded one."""
        return ("i", j) if self.plan.kept == 0 else (j, "i")

    def value(self, i: int, indent: str, vars_: tuple[str, ...], scope: set[int],
              shape: tuple[int, ...] = (), sfx: str = "") -> str:
        """The scalar of `i` at the point `vars_` of a consumer of shape `shape` (named with
        the suffix `sfx`: one lane's copy of the code)."""
        g = self.g
        if i not in self.plan.cone:
            return self.leaf(i, shape, vars_)
        if i in scope:
            return f"v{self.num[i]}{sfx}"
        n = g[i]
        shape = n.shape
        out = f"v{self.num[i]}{sfx}"
        if n.op == "broadcast_in_dim":
            src = g[n.inputs[0]]
            if src.id in self.plan.cone:
                text = self.value(src.id, indent, vars_, scope, shape, sfx)
            else:
                text = self.leaf(src.id, shape, vars_, tuple(n.attrs["broadcast_dimensions"]))
            self.lines.append(f"{indent}{out} = {text}")
        elif n.op == "dot_general":
            self.contraction(n, indent, [(out, (vars_[0], vars_[1]))])
        elif n.op in FOLDS:  # an inner fold over the third axis
            src = g[n.inputs[0]]
            ident = {"add": 0.0, "max": -np.inf, "min": np.inf}[FOLDS[n.op]]
            fold = {"add": "{0} + {1}", "max": "_max({0}, {1})", "min": "_min({0}, {1})"}
            self.lines.append(f"{indent}{out} = {scalar(ident, n.dtype)}")
            self.lines.append(f"{indent}for d in range({self.runtime(f'kd{self.num[i]}', src.shape[2])}):")
            inner: set[int] = set(scope)
            text = self.value(src.id, indent + "    ", (*vars_, "d"), inner, src.shape, sfx)
            self.lines.append(f"{indent}    {out} = " + fold[FOLDS[n.op]].format(out, text))
        else:
            ops = [self.value(k, indent, vars_, scope, shape, sfx) for k in n.inputs]
            self.lines.append(f"{indent}{out} = {np_type(n.dtype)}({_expr(self.g, n)(ops, n)})")
        scope.add(i)
        return out

    def lanes(self, i: int, indent: str, js: Sequence[str], scopes: list[set[int]],
              shape: tuple[int, ...] = ()) -> list[str]:
        """The scalars of `i` at LANES columns `js` at once: a math function libmvec has is
        one vector call for all lanes; everything else is the scalar code, lane by lane."""
        n = self.g[i]
        if n.op == "dot_general" and i in self.plan.cone and i not in scopes[0]:
            return self.lane_dot(n, indent, js, scopes)
        if i not in self.plan.cone or i in scopes[0] or n.op == "broadcast_in_dim" or n.op in FOLDS:
            return [self.value(i, indent, self.pos(j), sc, shape, f"_{lane}")
                    for lane, (j, sc) in enumerate(zip(js, scopes))]
        ins = [self.lanes(k, indent, js, scopes, n.shape) for k in n.inputs]
        outs = [f"v{self.num[i]}_{lane}" for lane in range(len(js))]
        sym = vector_symbol(n)
        if sym is not None:
            self.lines.append(f"{indent}{', '.join(outs)} = _vmath4('{sym}', {', '.join(ins[0])})")
            self.vector_calls += 1
        else:
            for lane, out in enumerate(outs):
                ops = [x[lane] for x in ins]
                self.lines.append(f"{indent}{out} = {np_type(n.dtype)}({_expr(self.g, n)(ops, n)})")
        for sc in scopes:
            sc.add(i)
        return outs

    def lane_dot(self, n: Node, indent: str, js: Sequence[str], scopes: list[set[int]]) -> list[str]:
        """A small dot's contraction for all lanes at once."""
        outs = [f"v{self.num[n.id]}_{lane}" for lane in range(len(js))]
        self.contraction(n, indent, [(out, self.pos(j)) for out, j in zip(outs, js)])
        for sc in scopes:
            sc.add(n.id)
        return outs

    def contraction(self, n: Node, indent: str, outs: Sequence[tuple[str, tuple[str, str]]]) -> None:
        """`out = sum_d a[row, d] * b[col, d]` for each (out, (row, col)), summed in order of d:
        written out term by term for up to UNROLL features (a kernel per feature count: the
        loop's overhead was a third of a d = 3 kNN sweep), else one loop over d."""
        lc, rc, _, _ = dot_dims(n.attrs)
        a, b = n.inputs
        size = self.g[a].shape[lc[0]]

        def term(d: str, pos: tuple[str, str]) -> str:
            ia, ib = ["", ""], ["", ""]
            ia[lc[0]], ia[1 - lc[0]] = d, pos[0]
            ib[rc[0]], ib[1 - rc[0]] = d, pos[1]
            return f"{self.arg[a]}[{', '.join(ia)}] * {self.arg[b]}[{', '.join(ib)}]"

        zero = scalar(0, n.dtype)
        if size <= UNROLL:
            self.lines += [f"{indent}{out} = " + " + ".join([zero, *(term(str(d), pos) for d in range(size))])
                           for out, pos in outs]
            return
        self.lines += [f"{indent}{out} = {zero}" for out, _ in outs]
        self.lines.append(f"{indent}for d in range({self.arg[a]}.shape[{lc[0]}]):")
        self.lines += [f"{indent}    {out} += {term('d', pos)}" for out, pos in outs]


def _width(g: Graph, v: int | None) -> int:
    """Accumulators per row for a product with V (its columns), or 1."""
    return 1 if v is None or g[v].type.rank == 1 else g[v].shape[1]  # type: ignore[union-attr]


def _fold(plan: MapReducePlan, arg: dict[int, str], out_name: dict[int, str], k: int, xv: str,
          j: str, sfx: str, ind: str) -> list[str]:
    """The loop lines folding the value `xv` at column `j` into reduction k (not softmax);
    sums and products fold into the accumulators named with suffix `sfx` (one per lane)."""
    g, r = plan.flat, plan.reductions[k]
    if r.kind in ("argmax", "argmin"):
        cmp = ">" if r.kind == "argmax" else "<"
        return [f"{ind}if {xv} {cmp} best{k} or ({xv} != {xv} and best{k} == best{k}):",
                f"{ind}    best{k} = {xv}", f"{ind}    at{k} = {j}"]
    if r.kind == "top_k":
        vals, idx = (out_name[o] for o in r.outs[1:3])  # values, indices (as lax.top_k)
        kk = r.k  # a sorted buffer of the best k so far in lax.top_k's order, ties keep the first
        # once the buffer is full, most values fall below its k-th (kth{k}): one comparison
        # rejects them (a NaN compares false and takes the ordered path, as a tie does)
        insert = [f"p = filled{k}",
                  "take = True",
                  f"if p == {kk}:",
                  f"    take = _tk_key({xv}) > _tk_key(kth{k})",
                  f"    p = {kk - 1}",
                  "else:",
                  f"    filled{k} = p + 1",
                  "if take:",
                  "    while p > 0:",
                  f"        prev = {vals}[i, p - 1]",
                  f"        if not _tk_key({xv}) > _tk_key(prev):",
                  "            break",
                  f"        {vals}[i, p] = prev",
                  f"        {idx}[i, p] = {idx}[i, p - 1]",
                  "        p -= 1",
                  f"    {vals}[i, p] = {xv}",
                  f"    {idx}[i, p] = {j}",
                  f"    kth{k} = {vals}[i, {kk - 1}]"]
        return [f"{ind}if filled{k} < {kk} or not {xv} < kth{k}:", *(f"{ind}    {x}" for x in insert)]
    acc_t = np_type("f64" if dtypes.is_float(g[r.value].dtype) else g[r.value].dtype)
    if r.kind == "dot":
        rank1 = g[r.v].type.rank == 1  # type: ignore[union-attr,index]
        return [f"{ind}acc{k}_{f}{sfx} = _radd(acc{k}_{f}{sfx}, {acc_t}({xv}) * {acc_t}("
                f"{arg[r.v]}[{j if rank1 else f'{j}, {f}'}]))"  # type: ignore[index]
                for f in range(_width(g, r.v))]
    if r.kind == "add":
        return [f"{ind}acc{k}_0{sfx} = _radd(acc{k}_0{sfx}, {acc_t}({xv}))"]
    return [f"{ind}acc{k}_0 = _{r.kind}(acc{k}_0, {acc_t}({xv}))"]  # max, min: in order


def _softmax_state(plan: MapReducePlan, k: int, sfx: str) -> list[str]:
    """The head lines of one lane's online-softmax state: running max, sum, products."""
    g, r = plan.flat, plan.reductions[k]
    return [f"m{k}{sfx} = {scalar(-np.inf, 'f64')}", f"l{k}{sfx} = {scalar(0, 'f64')}"] + [
        f"a{k}_{p}_{f}{sfx} = {scalar(0, 'f64')}" for p, (_node, v, _) in enumerate(r.parts[2])
        for f in range(_width(g, v))]


def _softmax_step(plan: MapReducePlan, arg: dict[int, str], k: int, sfx: str, e: str, j: str,
                  ind: str) -> list[str]:
    """One lane's online-softmax update with the value s{k}{sfx} at column j, given
    g{k}{sfx} (it raises the running max, or is NaN) and e = exp(-|s - m|): a new max rescales
    the sum and products by e; any other value adds its weight e. A -inf adds nothing (its
    weight exp(-inf - m) is 0, also while m is still -inf, where exp would give NaN)."""
    g, r = plan.flat, plan.reductions[k]
    f64 = "np.float64"
    grow, keep = [], []
    for p, (_node, v, _) in enumerate(r.parts[2]):
        rank1 = g[v].type.rank == 1  # type: ignore[union-attr]
        for f in range(_width(g, v)):
            vj = f"{f64}({arg[v]}[{j}])" if rank1 else f"{f64}({arg[v]}[{j}, {f}])"
            acc = f"a{k}_{p}_{f}{sfx}"
            grow.append(f"{ind}    {acc} = {acc} * {e} + {vj}")
            keep.append(f"{ind}    {acc} += {e} * {vj}")
    return [f"{ind}if g{k}{sfx}:", f"{ind}    m{k}{sfx} = s{k}{sfx}",
            f"{ind}    l{k}{sfx} = l{k}{sfx} * {e} + 1.0", *grow,
            f"{ind}elif s{k}{sfx} > -math.inf:", f"{ind}    l{k}{sfx} += {e}", *keep]


def _softmax_guard(k: int, xv: str, sfx: str, ind: str) -> list[str]:
    """s, g and the exponent t = -|s - m| of one lane's step (NaN propagates, as max does)."""
    s, m = f"s{k}{sfx}", f"m{k}{sfx}"
    return [f"{ind}{s} = np.float64({xv})", f"{ind}g{k}{sfx} = {s} > {m} or {s} != {s}",
            f"{ind}t{k}{sfx} = {m} - {s} if g{k}{sfx} else {s} - {m}"]


def _softmax_merge(plan: MapReducePlan, k: int, lanes: int) -> list[str]:
    """Tail lines folding lanes 1.. into lane 0's state (each rescaled to the common max),
    then the row's whole-row rule: a row whose max is -inf sums exp(-inf - -inf) = NaN."""
    g, r = plan.flat, plan.reductions[k]
    accs = [f"l{k}"] + [f"a{k}_{p}_{f}" for p, (_node, v, _) in enumerate(r.parts[2])
                        for f in range(_width(g, v))]
    lines = []
    if lanes > 1:
        sfxs = [""] + [f"_{lane}" for lane in range(1, lanes)]
        lines.append(f"mm = m{k}")
        lines += [f"mm = _max(mm, m{k}{sfx})" for sfx in sfxs[1:]]
        for sfx in sfxs:
            lines.append(f"sc{sfx} = 1.0 if m{k}{sfx} == mm else math.exp(m{k}{sfx} - mm)")
        lines += [f"{a} = " + " + ".join(f"{a}{sfx} * sc{sfx}" for sfx in sfxs) for a in accs]
        lines.append(f"m{k} = mm")
    lines.append(f"if m{k} == -math.inf:")
    lines += [f"    {a} = math.nan" for a in accs]
    return lines


def _softmax(plan: MapReducePlan, arg: dict[int, str], out_name: dict[int, str], em: _Emitter,
             k: int, xv: str, ind: str, lanes: int) -> tuple[list[str], list[str]]:
    """(loop lines, tail lines) of an online softmax fold: a running maximum, with the sum
    and the products rescaled when it grows; the tail first merges the state of `lanes`
    lanes (the blocked sweep's)."""
    g, r = plan.flat, plan.reductions[k]
    f64 = "np.float64"
    m_node, total, products, steps = r.parts
    loop = _softmax_guard(k, xv, "", ind) + [f"{ind}e{k} = math.exp(t{k})"]
    loop += _softmax_step(plan, arg, k, "", f"e{k}", "j", ind)
    # the program's shift: its row chain from the max, at this row
    tail = _softmax_merge(plan, k, lanes) + [f"mx = {np_type(g[m_node].dtype)}(m{k})"]
    names = {m_node: "mx"}
    for c in steps:
        cn = g[c]
        if cn.op in ROW_OPS:
            names[c] = names[cn.inputs[0]]
            continue
        ops = [names.get(q, em.leaf(q, (), ()) if g[q].op == "constant" else "?") for q in cn.inputs]
        tail.append(f"r{em.num[c]} = {np_type(cn.dtype)}({_expr(g, cn)(ops, cn)})")
        names[c] = f"r{em.num[c]}"
    shift = names[steps[-1]] if steps else "mx"
    tail.append(f"back = math.exp(m{k} - {f64}({shift}))" if steps else "back = 1.0")
    tail.append(f"{out_name[m_node]}[i] = mx")
    if total is not None:
        tail.append(f"{out_name[total]}[i] = l{k} * back")
    for p, (node, v, divided) in enumerate(products):
        rank1 = g[v].type.rank == 1  # type: ignore[union-attr]
        for f in range(_width(g, v)):
            value = f"a{k}_{p}_{f} / l{k}" if divided else f"a{k}_{p}_{f} * back"
            tail.append(f"{out_name[node]}[{'i' if rank1 else f'i, {f}'}] = {value}")
    return loop, tail


def _lane_loop(plan: MapReducePlan, arg: dict[int, str], out_name: dict[int, str]) -> list[str] | None:
    """The sweep over j in blocks of LANES columns: each math function libmvec has computed
    for the block in one vector call (an online softmax's exp too: each lane keeps its own
    running max, merged at the row's end), and a top_k's four values tested against its k-th
    best at once; None when the block would gain neither."""
    lanes = vector_math.LANES
    js = [f"j{lane}" for lane in range(lanes)]
    sfxs = [f"_{lane}" if lane else "" for lane in range(lanes)]
    ind = " " * 12
    body = [f"{ind}{j} = jb + {lane}" for lane, j in enumerate(js)]
    em = _Emitter(plan, arg, body)
    scopes: list[set[int]] = [set() for _ in js]
    values = [em.lanes(r.value, ind, js, scopes, plan.shape) for r in plan.reductions]
    exp = vector_math.symbol("exp", "f64")
    softmax = [k for k, r in enumerate(plan.reductions) if r.kind == "softmax"]
    if softmax and exp is None:
        return None
    if not em.vector_calls and not softmax and all(r.kind != "top_k" for r in plan.reductions):
        return None
    for k in range(len(plan.reductions)):
        if k in softmax:
            for xv, sfx in zip(values[k], sfxs):
                body += _softmax_guard(k, xv, sfx, ind)
            es = [f"e{k}{sfx}" for sfx in sfxs]
            body.append(f"{ind}{', '.join(es)} = _vmath4('{exp}', "
                        f"{', '.join(f't{k}{sfx}' for sfx in sfxs)})")
            for e, j, sfx in zip(es, js, sfxs):
                body += _softmax_step(plan, arg, k, sfx, e, j, ind)
            continue
        if plan.reductions[k].kind == "top_k":  # the block's four below the k-th: one test
            below = " and ".join(f"{xv} < kth{k}" for xv in values[k])
            body.append(f"{ind}if not (filled{k} == {plan.reductions[k].k} and {below}):")
            for j, xv in zip(js, values[k]):
                body += _fold(plan, arg, out_name, k, xv, j, "", ind + "    ")
            continue
        for j, xv, sfx in zip(js, values[k], sfxs):
            body += _fold(plan, arg, out_name, k, xv, j, sfx, ind)
    return [f"        for jb in range(0, nr - nr % {lanes}, {lanes}):", *body]


def generate(plan: MapReducePlan, name: str) -> CpuKernelCode:
    """The numba source of the plan's kernel: per row i, one sweep over j (in blocks of
    LANES columns where _lane_loop gains from them, then the remaining columns)."""
    name = re.sub(r"\W", "_", name)
    g = plan.flat
    arg = {leaf: f"in{k}" for k, leaf in enumerate(plan.leaves)}
    out_name = {o: f"out{k}" for k, o in enumerate(plan.outs)}
    nk, nr = plan.shape[plan.kept], plan.shape[1 - plan.kept]
    blocks = _lane_loop(plan, arg, out_name)
    lanes = vector_math.LANES if blocks else 1
    lines = ["# mapreduce_kernel: one sweep per row, the pairwise chunk never stored",
             "@njit(parallel=True, error_model='numpy', cache=True)",
             "",  # the signature, once the run-time scalars are known
             "    for i in prange(nk):"]
    head, loop, tail = [], [], []
    for k, r in enumerate(plan.reductions):
        t = g[r.value].dtype
        acc_t = "f64" if dtypes.is_float(t) else t
        if r.kind in ("argmax", "argmin"):
            head += [f"best{k} = {scalar(-np.inf if r.kind == 'argmax' else np.inf, t)}", f"at{k} = 0"]
            tail.append(f"{out_name[r.outs[0]]}[i] = at{k}")
        elif r.kind == "top_k":
            head += [f"filled{k} = 0", f"kth{k} = {out_name[r.outs[1]]}[i, 0]"]  # set once full
        elif r.kind == "softmax":
            for lane in range(lanes):
                head += _softmax_state(plan, k, f"_{lane}" if lane else "")
        else:
            ident = {"add": 0.0, "dot": 0.0, "max": -np.inf, "min": np.inf}[r.kind]
            per_lane = lanes if r.kind in ("add", "dot") else 1
            for f in range(_width(g, r.v)):
                accs = [f"acc{k}_{f}"] + [f"acc{k}_{f}_{lane}" for lane in range(1, per_lane)]
                head += [f"{a} = {scalar(ident, acc_t)}" for a in accs]
                if per_lane > 1:  # the lanes' partial sums
                    tail.append(f"acc{k}_{f} = {' + '.join(accs)}")
                rank1 = r.v is None or g[r.v].type.rank == 1  # type: ignore[union-attr]
                tail.append(f"{out_name[r.outs[0]]}[{'i' if rank1 else f'i, {f}'}] = acc{k}_{f}")
    em = _Emitter(plan, arg, loop)
    ind = "            "
    scope: set[int] = set()
    for k, r in enumerate(plan.reductions):
        xv = em.value(r.value, ind, em.pos("j"), scope, plan.shape)
        if r.kind == "softmax":
            more, after = _softmax(plan, arg, out_name, em, k, xv, ind, lanes)
            loop += more
            tail += after
        else:
            loop += _fold(plan, arg, out_name, k, xv, "j", "", ind)
    lines += ["        " + h for h in head]
    if blocks:
        lines += blocks
        lines.append(f"        for j in range(nr - nr % {lanes}, nr):")
    else:
        lines.append("        for j in range(nr):")
    lines += loop
    lines += ["        " + t for t in tail]
    scalars = {"nk": nk, "nr": nr, **em.scalars}
    lines[2] = f"def {KERNEL}({', '.join([*arg.values(), *out_name.values(), *scalars])}):"
    if blocks and any("_vmath4(" in b for b in blocks):
        lines.insert(0, "from explorer.backends.cpu.vector_math import _vmath4")
    return CpuKernelCode(name, "\n".join(lines) + "\n", True, None, None, 0,
                         tuple(scalars.items()))


class FusedBody:
    """A split body run as pre-values (reference interpreter) then one map-reduce kernel: the
    interpreter-child interface the loop driver uses (evaluate, all_kernels)."""

    def __init__(self, plan: MapReducePlan, name: str, fn: Any, code: CpuKernelCode) -> None:
        from ..reference import NumpyInterpreter

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
                  for i in plan.leaves], *outs.values(), *(v for _, v in self.code.scalars))
        self.seconds += time.perf_counter() - t0
        values = {**pre, **outs}
        del outs, pre
        post = [values.pop(i) if i in values else None for i in plan.post.params]
        del values
        return self.post.evaluate(post, consume=True)

    def all_kernels(self) -> list[Any]:
        return [self, *self.pre.all_kernels(), *self.post.all_kernels()]

    def compile_bodies(self) -> None:
        self.pre.compile_bodies()
        self.post.compile_bodies()


@functools.lru_cache(maxsize=256)
def body_peak(body: Graph) -> int | None:
    """The planned peak of a split body run as this module's fused kernel, or None when the
    body does not have the form (the CPU backend declares this to the planner)."""
    return fused_body_peak(body, generate, "cpu")


def compile_body(body: Graph, name: str) -> FusedBody | None:
    """The fused form of a split body, or None when it does not have the map-reduce form."""
    from .kernels import load

    try:
        plan = plan_mapreduce(body)
        code = generate(plan, "mapreduce_" + name)
        fn = load(code)
    except (PlanError, ImportError):
        return None
    return FusedBody(plan, name, fn, code)
