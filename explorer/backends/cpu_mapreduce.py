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

from ..ir import dtypes
from ..ir.graph import Graph
from ..ir.ops import dot_dims
from .cpu_codegen import KERNEL, PRELUDE, CpuKernelCode, _expr, np_type, scalar
from .kernel_plan import PlanError
from .mapreduce_plan import FOLDS, ROW_OPS, MapReducePlan, plan_mapreduce


class _Emitter:
    """Scalar code for the cone at one (i, j) point (and [I, J, D] values in inner loops)."""

    def __init__(self, plan: MapReducePlan, arg: dict[int, str], lines: list[str]) -> None:
        self.plan, self.g, self.arg, self.lines = plan, plan.flat, arg, lines
        self.pos = ("i", "j") if plan.kept == 0 else ("j", "i")
        self.done: set[int] = set()
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
            return self.runtime(f"c{i}", value)
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
            self.lines.append(f"{indent}for d in range({self.arg[a]}.shape[{lc[0]}]):")
            self.lines.append(f"{indent}    {out} += {self.arg[a]}[{', '.join(ia)}] * "
                              f"{self.arg[b]}[{', '.join(ib)}]")
        elif n.op in FOLDS:  # an inner fold over the third axis
            src = g[n.inputs[0]]
            ident = {"add": 0.0, "max": -np.inf, "min": np.inf}[FOLDS[n.op]]
            fold = {"add": "{0} + {1}", "max": "_max({0}, {1})", "min": "_min({0}, {1})"}
            self.lines.append(f"{indent}{out} = {scalar(ident, n.dtype)}")
            self.lines.append(f"{indent}for d in range({self.runtime(f'kd{i}', src.shape[2])}):")
            inner: set[int] = set(scope)
            text = self.value(src.id, indent + "    ", (*vars_, "d"), inner, src.shape)
            self.lines.append(f"{indent}    {out} = " + fold[FOLDS[n.op]].format(out, text))
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
    lines = ["# mapreduce_kernel: one sweep per row, the pairwise chunk never stored",
             "@njit(parallel=True, error_model='numpy', cache=True)",
             "",  # the signature, once the run-time scalars are known
             "    for i in prange(nk):"]
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
            kk = r.k  # a sorted buffer of the best k so far in lax.top_k's order, ties keep the first
            loop += [f"{ind}p = filled{k}",
                     f"{ind}take = True",
                     f"{ind}if p == {kk}:",
                     f"{ind}    last = {vals}[i, {kk - 1}]",
                     f"{ind}    take = _tk_key({xv}) > _tk_key(last)",
                     f"{ind}    p = {kk - 1}",
                     f"{ind}else:",
                     f"{ind}    filled{k} = p + 1",
                     f"{ind}if take:",
                     f"{ind}    while p > 0:",
                     f"{ind}        prev = {vals}[i, p - 1]",
                     f"{ind}        if not _tk_key({xv}) > _tk_key(prev):",
                     f"{ind}            break",
                     f"{ind}        {vals}[i, p] = prev",
                     f"{ind}        {idx}[i, p] = {idx}[i, p - 1]",
                     f"{ind}        p -= 1",
                     f"{ind}    {vals}[i, p] = {xv}",
                     f"{ind}    {idx}[i, p] = j"]
        elif r.kind == "softmax":
            m_node, total, products, steps = r.parts
            loop += [f"{ind}s{k} = {f64}({xv})",
                     f"{ind}if s{k} > m{k} or s{k} != s{k}:  # a NaN propagates, as max does",
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
                if cn.op in ROW_OPS:
                    names[c] = names[cn.inputs[0]]
                    continue
                ops = [names.get(q, em.leaf(q, (), ()) if g[q].op == "constant" else "?")
                       for q in cn.inputs]
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
    lines.append("        for j in range(nr):")
    lines += loop
    lines += ["        " + t for t in tail]
    scalars = {"nk": nk, "nr": nr, **em.scalars}
    lines[2] = f"def {KERNEL}({', '.join([*arg.values(), *out_name.values(), *scalars])}):"
    return CpuKernelCode(name, "\n".join(lines) + "\n", True, None, None, 0,
                         tuple(scalars.items()))


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
    """The planned peak of a split body run as a fused map-reduce kernel (its pre part with
    the values it hands on, the kernel's outputs, its post part: an upper bound, summed), or
    None when the body does not have the form (the CPU backend declares this to the planner)."""
    from ..analysis.memory import plan

    try:
        p = plan_mapreduce(body)
        generate(p, "probe")  # the generator may refuse what the plan accepts
    except PlanError:
        return None
    pre = plan(Graph(p.pre.nodes, p.pre.params, (), p.pre.name), "cpu").peak_bytes
    handed = sum(p.flat[i].type.nbytes for i in set(p.pre.outputs)  # type: ignore[union-attr]
                 if p.flat[i].op != "parameter")
    outs = sum(p.out_type(o).nbytes for o in p.outs)
    post = plan(p.post, "cpu").peak_bytes + sum(p.flat[o].type.nbytes for o in p.post.outputs)  # type: ignore[union-attr]
    return pre + handed + outs + post


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
