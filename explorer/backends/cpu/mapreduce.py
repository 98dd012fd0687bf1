"""Fused map-reduce kernels for split loop bodies on the CPU backend: a body of the form that
mapreduce_plan.py reads compiles to ONE numba kernel: the shared map-reduce emitter
(codegen/mapreduce_emitter.py) in the numba dialect, with this module's blocked sweep. For
each row i (in parallel), a loop over j computes the pairwise value S[i, j] in registers and
folds it into the row's accumulators (sums reassociating, so LLVM may vectorize); the
[I, J] chunk never exists. The sweep runs in blocks of four columns where libmvec's vector
math or a top_k's one test per block gains from it. `pre` (the vectors the body computes
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
from ..codegen.dialect import Block
from ..codegen.kernel_plan import PlanError
from ..codegen.mapreduce_emitter import Emitter
from ..codegen.mapreduce_plan import FOLDS, MapReducePlan, fused_body_peak, plan_mapreduce
from . import vector_math
from .kernel_codegen import KERNEL, CpuKernelCode
from .numba_dialect import NUMBA, PRELUDE

# numba's names of C's math functions, where they differ (libmvec has C's names)
C_NAMES = {"exp32": "exp", "tanh32": "tanh", "arcsin": "asin", "arccos": "acos", "arctan": "atan",
           "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh"}


def vector_symbol(g: Graph, n: Node) -> str | None:
    """libmvec's four-lane function computing the elementwise math node `n` of graph `g`, or
    None: its numba form is a call of C's function (under numba's name)."""
    if len(n.inputs) != 1:
        return None
    call = re.fullmatch(r"(?:np\.|math\.)?(\w+)\(x\)", NUMBA.scalar_form(g, n)(["x"], n))
    return vector_math.symbol(C_NAMES.get(call.group(1), call.group(1)), n.dtype) if call else None


class LaneEmitter(Emitter):
    """The shared emitter, and the scalars of the cone at LANES points (i, j0..j3) at once,
    with vector math calls."""

    vector_calls = 0

    def lanes(self, i: int, js: Sequence[str], scopes: list[set[int]],
              shape: tuple[int, ...] = ()) -> list[str]:
        """The scalars of `i` at LANES columns `js` at once: a math function libmvec has is
        one vector call for all lanes; everything else is the scalar code, lane by lane."""
        n = self.g[i]
        if n.op == "dot_general" and i in self.plan.cone and i not in scopes[0]:
            outs = [f"v{self.num[n.id]}_{lane}" for lane in range(len(js))]
            self.contraction(n, [(out, self.pos(j)) for out, j in zip(outs, js)])
            for sc in scopes:
                sc.add(n.id)
            return outs
        if i not in self.plan.cone or i in scopes[0] or n.op == "broadcast_in_dim" or n.op in FOLDS:
            return [self.value(i, self.pos(j), sc, shape, f"_{lane}")
                    for lane, (j, sc) in enumerate(zip(js, scopes))]
        ins = [self.lanes(k, js, scopes, n.shape) for k in n.inputs]
        outs = [f"v{self.num[i]}_{lane}" for lane in range(len(js))]
        sym = vector_symbol(self.g, n)
        if sym is not None:
            self.b(f"{', '.join(outs)} = vmath4('{sym}', {', '.join(ins[0])})")
            self.vector_calls += 1
        else:
            for lane, out in enumerate(outs):
                ops = [x[lane] for x in ins]
                self.b(NUMBA.define(out, n.dtype, NUMBA.cast(NUMBA.scalar_form(self.g, n)(ops, n), n.dtype)))
        for sc in scopes:
            sc.add(i)
        return outs


def _lane_loop(plan: MapReducePlan, arg: dict[int, str], out_name: dict[int, str]) -> list[str] | None:
    """The sweep over j in blocks of LANES columns: each math function libmvec has computed
    for the block in one vector call (an online softmax's exp too: each lane keeps its own
    running max, merged at the row's end), and a top_k's four values tested against its k-th
    best at once; None when the block would gain neither."""
    lanes = vector_math.LANES
    js = [f"j{lane}" for lane in range(lanes)]
    sfxs = Emitter.suffixes(lanes)
    b = Block(NUMBA, 3)
    b(*(f"{j} = jb + {lane}" for lane, j in enumerate(js)))
    em = LaneEmitter(plan, NUMBA, arg, out_name, b)
    scopes: list[set[int]] = [set() for _ in js]
    values = [em.lanes(r.value, js, scopes, plan.shape) for r in plan.reductions]
    exp = vector_math.symbol("exp", "f64")
    softmax = [k for k, r in enumerate(plan.reductions) if r.kind == "softmax"]
    if softmax and exp is None:
        return None
    if not em.vector_calls and not softmax and all(r.kind != "top_k" for r in plan.reductions):
        return None
    for k, r in enumerate(plan.reductions):
        if k in softmax:
            for xv, sfx in zip(values[k], sfxs):
                em.softmax_guard(k, xv, sfx)
            es = [f"e{k}{sfx}" for sfx in sfxs]
            b(f"{', '.join(es)} = vmath4('{exp}', {', '.join(f't{k}{sfx}' for sfx in sfxs)})")
            for e, j, sfx in zip(es, js, sfxs):
                em.softmax_step(k, sfx, e, j)
        elif r.kind == "top_k":  # the block's four below the k-th: one test
            below = " and ".join(f"{xv} < kth{k}" for xv in values[k])
            with b.block(f"if not (filled{k} == {r.k} and {below}):"):
                for j, xv in zip(js, values[k]):
                    em.fold(k, xv, j)
        else:
            for j, xv, sfx in zip(js, values[k], sfxs):
                em.fold(k, xv, j, sfx)
    return [f"        for jb in range(0, nr - nr % {lanes}, {lanes}):", *b.lines]


def generate(plan: MapReducePlan, name: str) -> CpuKernelCode:
    """The numba source of the plan's kernel: per row i (in parallel), one sweep over j (in
    blocks of LANES columns where _lane_loop gains from them, then the remaining columns)."""
    name = re.sub(r"\W", "_", name)
    arg = {leaf: f"in{k}" for k, leaf in enumerate(plan.leaves)}
    out_name = {o: f"out{k}" for k, o in enumerate(plan.outs)}
    nk, nr = plan.shape[plan.kept], plan.shape[1 - plan.kept]
    blocks = _lane_loop(plan, arg, out_name)
    lanes = vector_math.LANES if blocks else 1
    head, loop, tail = Block(NUMBA, 2), Block(NUMBA, 3), Block(NUMBA, 2)
    em = Emitter(plan, NUMBA, arg, out_name, loop)
    em.sweep(head, tail, lanes)
    scalars = {"nk": nk, "nr": nr, **em.scalars}
    lines = ["# mapreduce_kernel: one sweep per row, the pairwise chunk never stored",
             "@njit(parallel=True, error_model='numpy', cache=True)",
             f"def {KERNEL}({', '.join([*arg.values(), *out_name.values(), *scalars])}):",
             "    for i in prange(nk):", *head.lines]
    if blocks:
        lines += blocks
        lines.append(f"        for j in range(nr - nr % {lanes}, nr):")
    else:
        lines.append("        for j in range(nr):")
    lines += loop.lines + tail.lines
    if blocks and any("vmath4(" in b for b in blocks):
        lines.insert(0, "from explorer.backends.cpu.vector_math import vmath4")
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
