"""Fused map-reduce kernels for split loop bodies on the GPU backend: the shared map-reduce
emitter (codegen/mapreduce_emitter.py) in the CUDA dialect. One thread per row i (or, where
every fold is a float sum, dot, max or min, one warp whose lanes stride over j and combine
by shuffles) loops over j, computes S[i, j] in registers and folds it into its accumulators
(sums and products in double, max/min, argmax/argmin, top_k's sorted buffer, and
softmax/logsumexp with a running maximum); the [I, J] chunk never exists. Inputs are
C-contiguous device arrays indexed with the literal shapes of the body.

This module only writes text (no CuPy needed): tests check the text; `compile_body` builds a
`cupy.RawKernel` where CuPy is installed (backend.py calls it for split bodies).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...ir import dtypes
from ...ir.graph import Graph
from ..codegen.dialect import COMBINE, Block
from ..codegen.kernel_plan import PlanError
from ..codegen.mapreduce_emitter import Emitter
from ..codegen.mapreduce_plan import MapReducePlan, fused_body_peak, plan_mapreduce
from .cuda_dialect import CUDA, PREAMBLE, RAW_MODULE_OPTIONS, c_type

THREADS = 128  # threads per block
LANES = 32  # threads per row (one warp) where every fold combines across threads


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
        if r.kind not in ("add", "dot", "max", "min") or not dtypes.is_float(d):
            return 1
        if r.kind in ("max", "min") and d not in ("f32", "f64"):
            return 1
    return LANES


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
    lanes = _warp_lanes(plan)
    head, loop, tail = Block(CUDA, 1), Block(CUDA, 2), Block(CUDA, 1)
    em = Emitter(plan, CUDA, arg, out_name, loop)
    em.sweep(head, tail)
    lines = [PREAMBLE, f'extern "C" __global__ void {name}({", ".join(params)}) {{']
    if lanes == 1:
        lines += ["  const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;",
                  f"  if (i >= {nk}) return;"]
    else:  # (a whole warp has one row: it returns, or shuffles, together)
        lines += [f"  const long i = ((long)blockIdx.x * blockDim.x + threadIdx.x) / {lanes};",
                  f"  const int lane = threadIdx.x % {lanes};",
                  f"  if (i >= {nk}) return;"]
    lines += head.lines
    lines.append(f"  for (long j = {'0' if lanes == 1 else 'lane'}; j < {nr}; j += {lanes}) {{")
    lines += loop.lines
    lines.append("  }")
    if lanes > 1:
        lines.append(f"  for (int d = {lanes // 2}; d > 0; d >>= 1) {{")
        for a, kind in em.accumulators:
            lines.append(f"    {a} = {COMBINE[kind].format(a, f'__shfl_down_sync(0xffffffffu, {a}, d)')};")
        lines += ["  }", "  if (lane != 0) return;"]
    lines += tail.lines
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
                                            options=RAW_MODULE_OPTIONS)
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
