"""Fused map-reduce kernels for split loop bodies on the GPU backend: the CUDA twin of
cpu_mapreduce.py, from the same plan (mapreduce_plan.py). One thread per row i (or, where
every fold is a float sum, dot, max or min, one warp whose lanes stride over j and combine
by shuffles) loops over j, computes S[i, j] in registers and folds it into its accumulators
(sums and products in double, max/min, argmax/argmin, top_k's sorted buffer, and
softmax/logsumexp with a running maximum); the [I, J] chunk never exists. Inputs are
C-contiguous device arrays indexed with the literal shapes of the body.

This module only writes text (no CuPy needed): tests check the text; `compile_body` builds a
`cupy.RawKernel` where CuPy is installed (backend.py calls it for split bodies).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...ir import dtypes
from ...ir.graph import Graph
from ...ir.ops import dot_dims
from ..kernel_plan import PlanError
from ..mapreduce_plan import FOLDS, ROW_OPS, MapReducePlan, fused_body_peak, plan_mapreduce
from .codegen import PREAMBLE, _expr, c_type, literal

THREADS = 128  # threads per block
LANES = 32  # threads per row (one warp) where every fold combines across threads
# how two accumulators of a fold combine: along j in a thread, and across a warp's lanes
FOLD_EXPR = {"add": "{0} + {1}", "dot": "{0} + {1}", "max": "_max({0}, {1})",
             "min": "_min({0}, {1})"}


@dataclass(frozen=True)
class GpuMapReduceCode:
    name: str
    source: str
    rows: int  # rows of the result: threads to launch are rows * lanes
    lanes: int = 1  # threads per row: 1, or a warp (LANES) striding over j

    @property
    def threads(self) -> int:
        return self.rows * self.lanes


def _warp_lanes(plan: MapReducePlan) -> int:
    """LANES where every fold is a sum, dot, max or min of floats (their accumulators, double
    or the float type, pass through warp shuffles and combine by the fold itself); 1 where a
    fold keeps an order (argmax, top_k, the online softmax): one thread per row."""
    for r in plan.reductions:
        d = plan.flat[r.value].dtype
        if r.kind not in FOLD_EXPR or not dtypes.is_float(d):
            return 1
        if r.kind in ("max", "min") and d not in ("f32", "f64"):
            return 1
    return LANES


def _const(v: float, d: str) -> str:
    if v != v:
        return f"(({c_type(d)})_nan())"
    if math.isinf(v):
        return f"(({c_type(d)}){'-' if v < 0 else ''}_inf())"
    return f"(({c_type(d)}){v!r})"


class _Emitter:
    """C statements for the cone at one (i, j) point (inner folds as inner loops)."""

    def __init__(self, plan: MapReducePlan, arg: dict[int, str], lines: list[str]) -> None:
        self.plan, self.g, self.arg, self.lines = plan, plan.flat, arg, lines
        self.pos = ("i", "j") if plan.kept == 0 else ("j", "i")

    def index(self, i: int, index: list[str]) -> str:
        """Element `index` of C-contiguous input `i` ("0" for a size-1 dimension)."""
        shape = self.g[i].shape
        terms = [v if math.prod(shape[k + 1:]) == 1 else f"{v} * {math.prod(shape[k + 1:])}"
                 for k, v in enumerate(index) if v != "0"]
        return f"{self.arg[i]}[{' + '.join(terms) or '0'}]"

    def leaf(self, i: int, shape: tuple[int, ...], vars_: tuple[str, ...],
             dims: tuple[int, ...] | None = None) -> str:
        n = self.g[i]
        if n.op == "constant" and n.shape == ():
            return literal(n)
        if n.shape == ():
            return f"{self.arg[i]}[0]"
        dims = dims if dims is not None else tuple(range(len(shape) - len(n.shape), len(shape)))
        return self.index(i, [vars_[t] if d == shape[t] else "0" for d, t in zip(n.shape, dims)])

    def value(self, i: int, indent: str, vars_: tuple[str, ...], scope: set[int],
              shape: tuple[int, ...] = ()) -> str:
        g = self.g
        if i not in self.plan.cone:
            return self.leaf(i, shape, vars_)
        if i in scope:
            return f"v{i}"
        n = g[i]
        out, t = f"v{i}", c_type(n.dtype)
        if n.op == "broadcast_in_dim":
            src = g[n.inputs[0]]
            text = self.value(src.id, indent, vars_, scope, n.shape) if src.id in self.plan.cone \
                else self.leaf(src.id, n.shape, vars_, tuple(n.attrs["broadcast_dimensions"]))
            self.lines.append(f"{indent}const {t} {out} = {text};")
        elif n.op == "dot_general":
            lc, rc, _, _ = dot_dims(n.attrs)
            a, b = n.inputs
            ia, ib = ["", ""], ["", ""]
            ia[lc[0]], ia[1 - lc[0]] = "d", vars_[0]
            ib[rc[0]], ib[1 - rc[0]] = "d", vars_[1]
            self.lines.append(f"{indent}{t} {out} = 0;")
            self.lines.append(f"{indent}for (int d = 0; d < {g[a].shape[lc[0]]}; ++d)")
            self.lines.append(f"{indent}  {out} += {self.index(a, ia)} * {self.index(b, ib)};")
        elif n.op in FOLDS:
            src = g[n.inputs[0]]
            kind = FOLDS[n.op]
            ident = {"add": 0.0, "max": -math.inf, "min": math.inf}[kind]
            fold = {"add": "{0} + {1}", "max": "_max({0}, {1})", "min": "_min({0}, {1})"}[kind]
            self.lines.append(f"{indent}{t} {out} = {_const(ident, n.dtype)};")
            self.lines.append(f"{indent}for (int d = 0; d < {src.shape[2]}; ++d) {{")
            text = self.value(src.id, indent + "  ", (*vars_, "d"), set(scope), src.shape)
            self.lines.append(f"{indent}  {out} = " + fold.format(out, text) + ";")
            self.lines.append(f"{indent}}}")
        else:
            ops = [self.value(k, indent, vars_, scope, n.shape) for k in n.inputs]
            self.lines.append(f"{indent}const {t} {out} = ({t})({_expr(self.g, n)(ops, n)});")
        scope.add(i)
        return out


def generate(plan: MapReducePlan, name: str) -> GpuMapReduceCode:
    """The CUDA source of the plan's kernel: thread i folds row i over j; or, where every
    fold combines across threads (`_warp_lanes`), warp i does, its lanes striding over j
    and their accumulators folded by shuffles at the end (a chunk of a few hundred rows
    then still fills the device: 32 threads a row instead of one)."""
    name = re.sub(r"\W", "_", name)
    g = plan.flat
    arg = {leaf: f"in{k}" for k, leaf in enumerate(plan.leaves)}
    out_name = {o: f"out{k}" for k, o in enumerate(plan.outs)}
    params = [f"const {c_type(g[i].dtype)}* __restrict__ {a}" for i, a in arg.items()]
    params += [f"{c_type(plan.out_type(o).dtype)}* __restrict__ {a}" for o, a in out_name.items()]
    nk, nr = plan.shape[plan.kept], plan.shape[1 - plan.kept]
    head: list[str] = []
    loop: list[str] = []
    tail: list[str] = []
    em = _Emitter(plan, arg, loop)
    ind = "    "
    scope: set[int] = set()

    def width(v: int | None) -> int:
        return 1 if v is None or len(g[v].shape) == 1 else g[v].shape[1]

    def vj(v: int, f: int) -> str:
        return em.index(v, ["j"] if len(g[v].shape) == 1 else ["j", str(f)])

    def out_at(o: int, f: int, rank1: bool) -> str:
        return f"{out_name[o]}[{'i' if rank1 else f'i * {width_of[o]} + {f}'}]"

    width_of: dict[int, int] = {}
    lanes = _warp_lanes(plan)
    accs: list[tuple[str, str]] = []  # (accumulator, the fold that combines two of them)
    for k, r in enumerate(plan.reductions):
        x = g[r.value]
        t = c_type(x.dtype)
        xv = em.value(r.value, ind, em.pos, scope, plan.shape) if r.value in plan.cone else \
            em.leaf(r.value, plan.shape, em.pos)
        if r.kind in ("argmax", "argmin"):
            head += [f"{t} best{k} = {_const(-math.inf if r.kind == 'argmax' else math.inf, x.dtype)};",
                     f"long at{k} = 0;"]
            cmp = ">" if r.kind == "argmax" else "<"
            loop += [f"{ind}if ({xv} {cmp} best{k} || ({xv} != {xv} && best{k} == best{k})) "
                     f"{{ best{k} = {xv}; at{k} = j; }}"]
            tail.append(f"{out_name[r.outs[0]]}[i] = at{k};")
        elif r.kind == "top_k":
            vals, idx, kk = out_name[r.outs[1]], out_name[r.outs[2]], r.k
            head += [f"int filled{k} = 0;", f"{t} kth{k} = 0;  // the k-th best, once full"]
            # once full, most values fall below the k-th: one comparison rejects them (a NaN
            # compares false and takes the ordered path, as a tie does)
            loop += [f"{ind}if (filled{k} < {kk} || !({xv} < kth{k})) {{",
                     f"{ind}  int p = filled{k}; bool take = true;",
                     f"{ind}  if (p == {kk}) {{",
                     f"{ind}    take = _tk_key({xv}) > _tk_key(kth{k}); p = {kk - 1}; }}",
                     f"{ind}  else filled{k} = p + 1;",
                     f"{ind}  if (take) {{",
                     f"{ind}    while (p > 0) {{ const {t} prev = {vals}[i * {kk} + p - 1];",
                     f"{ind}      if (!(_tk_key({xv}) > _tk_key(prev))) break;",
                     f"{ind}      {vals}[i * {kk} + p] = prev;",
                     f"{ind}      {idx}[i * {kk} + p] = {idx}[i * {kk} + p - 1]; --p; }}",
                     f"{ind}    {vals}[i * {kk} + p] = {xv}; {idx}[i * {kk} + p] = j;",
                     f"{ind}    kth{k} = {vals}[i * {kk} + {kk - 1}]; }}",
                     f"{ind}}}"]
        elif r.kind == "softmax":
            m_node, total, products, steps = r.parts
            head += [f"double m{k} = -_inf(), l{k} = 0;"]
            grow, keep = [], []
            for p, (node, v, _) in enumerate(products):
                width_of[node] = width(v)
                for f in range(width(v)):
                    head.append(f"double a{k}_{p}_{f} = 0;")
                    grow.append(f"{ind}  a{k}_{p}_{f} = a{k}_{p}_{f} * scale + (double){vj(v, f)};")
                    keep.append(f"{ind}  a{k}_{p}_{f} += w * (double){vj(v, f)};")
            loop += [f"{ind}{{ const double s = (double){xv};",
                     f"{ind}if (s > m{k} || s != s) {{ const double scale = exp(m{k} - s); m{k} = s;",
                     f"{ind}  l{k} = l{k} * scale + 1.0;", *grow,
                     # a -inf adds nothing (exp(-inf - -inf) would be NaN while m is -inf)
                     f"{ind}}} else if (s > -_inf()) {{ const double w = exp(s - m{k}); l{k} += w;",
                     *keep, f"{ind}}} }}"]
            mt = c_type(g[m_node].dtype)
            # a row whose max is -inf sums exp(-inf - -inf) = NaN, as the program does
            tail.append(f"if (m{k} == -_inf()) {{ l{k} = _nan(); " + "".join(
                f"a{k}_{p}_{f} = _nan(); " for p, (_n, v, _) in enumerate(products)
                for f in range(width(v))) + "}")
            tail.append(f"const {mt} mx{k} = ({mt})m{k};")
            names = {m_node: f"mx{k}"}
            for c in steps:
                cn = g[c]
                if cn.op in ROW_OPS:
                    names[c] = names[cn.inputs[0]]
                    continue
                ops = [names[q] if q in names else literal(g[q]) for q in cn.inputs]
                tail.append(f"const {c_type(cn.dtype)} r{c} = ({c_type(cn.dtype)})"
                            f"({_expr(g, cn)(ops, cn)});")
                names[c] = f"r{c}"
            shift = names[steps[-1]] if steps else f"mx{k}"
            tail.append(f"const double back{k} = " + (f"exp(m{k} - (double){shift});"
                                                       if steps else "1.0;"))
            tail.append(f"{out_name[m_node]}[i] = mx{k};")
            if total is not None:
                tail.append(f"{out_name[total]}[i] = l{k} * back{k};")
            for p, (node, v, divided) in enumerate(products):
                for f in range(width(v)):
                    value = f"a{k}_{p}_{f} / l{k}" if divided else f"a{k}_{p}_{f} * back{k}"
                    tail.append(f"{out_at(node, f, len(g[v].shape) == 1)} = {value};")
        else:
            acc = "double" if dtypes.is_float(x.dtype) else t
            ident = {"add": 0.0, "dot": 0.0, "max": -math.inf, "min": math.inf}[r.kind]
            fold = FOLD_EXPR[r.kind]
            if r.kind == "dot":
                assert r.v is not None
                width_of[r.outs[0]] = width(r.v)
                for f in range(width(r.v)):
                    head.append(f"{acc} acc{k}_{f} = 0;")
                    accs.append((f"acc{k}_{f}", fold))
                    loop.append(f"{ind}acc{k}_{f} = " + fold.format(
                        f"acc{k}_{f}", f"({acc}){xv} * ({acc}){vj(r.v, f)}") + ";")
                    tail.append(f"{out_at(r.outs[0], f, len(g[r.v].shape) == 1)} = acc{k}_{f};")
            else:
                head.append(f"{acc} acc{k}_0 = {_const(ident, 'f64' if acc == 'double' else x.dtype)};")
                accs.append((f"acc{k}_0", fold))
                loop.append(f"{ind}acc{k}_0 = " + fold.format(f"acc{k}_0", f"({acc}){xv}") + ";")
                tail.append(f"{out_name[r.outs[0]]}[i] = acc{k}_0;")
    lines = [PREAMBLE, f'extern "C" __global__ void {name}({", ".join(params)}) {{']
    if lanes == 1:
        lines += ["  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;",
                  f"  if (i >= {nk}) return;"]
    else:  # (a whole warp has one row: it returns, or shuffles, together)
        lines += [f"  const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) / {lanes};",
                  f"  const int lane = threadIdx.x % {lanes};",
                  f"  if (i >= {nk}) return;"]
    lines += ["  " + h for h in head]
    lines.append(f"  for (long j = {'0' if lanes == 1 else 'lane'}; j < {nr}; j += {lanes}) {{")
    lines += loop
    lines.append("  }")
    if lanes > 1:
        lines.append(f"  for (int d = {lanes // 2}; d > 0; d >>= 1) {{")
        for a, fold in accs:
            other = f"__shfl_down_sync(0xffffffffu, {a}, d)"
            lines.append(f"    {a} = {fold.format(a, other)};")
        lines += ["  }", "  if (lane != 0) return;"]
    lines += ["  " + t for t in tail]
    lines.append("}")
    return GpuMapReduceCode(name, "\n".join(lines) + "\n", nk, lanes)


class GpuFusedBody:
    """A split body on the GPU: pre-values and post on the interpreter, then one RawKernel."""

    def __init__(self, plan: MapReducePlan, name: str, code: GpuMapReduceCode,
                 child: Any) -> None:
        self.plan, self.name, self.code = plan, name, code
        self.pre, self.post = child(plan.pre, name + "/pre/"), child(plan.post, name + "/post/")
        self.kernel: Any = None
        self.seconds = 0.0
        self.children: dict = {}
        self.timed = False

    @property
    def source(self) -> str:
        return self.code.source

    @property
    def xp(self) -> Any:
        """The array module of the kernel's arguments."""
        import cupy

        return cupy

    def launch(self, args: Sequence[Any]) -> None:
        """The kernel over all rows (one thread or one warp each), in blocks of THREADS."""
        if self.kernel is None:
            self.kernel = self.xp.RawKernel(self.code.source, self.code.name,
                                            options=("--std=c++14", "--fmad=false"))
        blocks = (self.code.threads + THREADS - 1) // THREADS
        self.kernel((blocks,), (THREADS,), tuple(args))

    def evaluate(self, args: Sequence[Any], after_step: Any = None, consume: bool = False) -> list[Any]:
        plan, xp = self.plan, self.xp
        pre = dict(zip(plan.pre.outputs, self.pre.evaluate(args)))
        t0 = time.perf_counter()
        outs = {o: xp.empty(t.shape, dtypes.to_numpy(t.dtype))
                for o in plan.outs for t in (plan.out_type(o),)}
        ins = [xp.ascontiguousarray(xp.reshape(pre[i], (1,)) if pre[i].ndim == 0 else pre[i])
               for i in plan.leaves]
        self.launch([*ins, *outs.values()])
        del ins
        self.seconds += time.perf_counter() - t0
        values = {**pre, **outs}
        del outs, pre
        return self.post.evaluate([values.pop(i) if i in values else None
                                   for i in plan.post.params], consume=True)

    def all_kernels(self) -> list[Any]:
        return [self, *self.pre.all_kernels(), *self.post.all_kernels()]

    def compile_bodies(self) -> None:
        self.pre.compile_bodies()
        self.post.compile_bodies()


def body_peak(body: Graph) -> int | None:
    """The planned peak of a split body run as this module's kernel, or None when the body
    does not have the form (the GPU backend declares this to the planner: such a body's
    chunks hold no [I, J] value, so they are as large as the CPU backend's)."""
    return fused_body_peak(body, generate, "gpu")


def compile_body(body: Graph, name: str, child: Any,
                 fused: type[GpuFusedBody] = GpuFusedBody) -> GpuFusedBody | None:
    """The fused form of a split body (`child(graph, prefix)` makes the interpreters of its
    pre and post parts; `fused` is the class that runs it), or None when it does not have
    the map-reduce form."""
    try:
        plan = plan_mapreduce(body)
        code = generate(plan, "mapreduce_" + name)
    except PlanError:
        return None
    return fused(plan, name, code, child)
