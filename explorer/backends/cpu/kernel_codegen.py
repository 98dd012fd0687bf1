"""Generated CPU kernels: a fused kernel's plan (codegen/kernel_plan.py) -> Python source for
numba, in the numba dialect (numba_dialect.py); row kernels are the shared row walk
(codegen/kernel_emitter.RowEmitter) as numba loops.

Why numba: measured on the fusion goal, `mean(x**2*3 + y)` on 8192x8192 float32 with two
cores, a numba loop nest with `parallel=True` took 29 ms, `jax.jit` 39 ms, cache-blocked
NumPy (16K-element blocks, `out=` buffers) 90 ms on one thread and 122 ms on two, NumPy eager
164 ms (bench/RESULTS.md). Only the loop nest reads each input once and keeps nothing else.

The kernel's source is shape-generic: the loop bounds (`n0`, `n1`, ...) and the scalar
constants (`v<id>`) are run-time arguments and the function is always named `kernel`, so every
kernel with the same structure (ops, element types, ranks, which input dimensions broadcast,
whether it runs in parallel) has the same source and compiles once, whatever its shapes and
constants: numba never frees compiled code, so a per-shape kernel would cost about 1 MiB for
every new program shape. Phase A loops over the iteration space in memory order, computing each
point's prologue values in registers and folding the reduced value into a scalar accumulator;
the outermost loop is `prange` when the space is large. When the outermost dimension is itself
reduced, each parallel chunk folds into its own row of `partial`, and the rows are combined
afterwards. Phase B runs the epilogue over the (small) reduced result. Float sums and products
accumulate in float64. The kernel allocates nothing: every buffer it writes (outputs, `red`,
`partial`) is allocated by the launcher with NumPy, where tracemalloc sees it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ...ir import dtypes
from ...ir.graph import Graph, Node, TensorType
from ...ir.ops import OPS
from ...ir.traits import MONOIDS
from ..codegen.dialect import Block
from ..codegen.kernel_emitter import RowEmitter, check, emit_chain, read
from ..codegen.kernel_plan import (
    Access,
    KernelPlan,
    RowPlan,
    accumulation,
    broadcast_access,
    param_access,
    read_access,
    readable,
)
from .numba_dialect import NUMBA, np_type, scalar

# Iteration spaces at least this large run in parallel: below it, waking threads costs more
# than it saves (and on a busy machine a descheduled thread stalls the whole kernel). A kernel
# that computes transcendentals (ops the table counts 4 FLOPs an element or more) is 8x
# costlier an element, so it runs in parallel from PARALLEL_MIN / 8 (a GPT block's gelu).
PARALLEL_MIN = 1 << 21


def accumulator(reduce: Node) -> tuple[str, str, object]:
    """(combine op, accumulator element type, identity) of a kernel's reduction."""
    kind, acc = accumulation(reduce)
    return kind, acc, dtypes.to_numpy(acc).type(MONOIDS[kind].identity_value(acc))


def fold(kind: str, acc: str, into: str, value: str) -> str:
    """The statement folding `value` into accumulator `into` of element type `acc`. A float
    max or min folds through LLVM's maximum/minimum (NaN wins, as np.maximum), which vectorize
    where a compare-and-select does not (a row's max: 42 -> 8 us for 64K floats)."""
    if kind in ("max", "min") and acc in ("f32", "f64"):
        return f"{into} = llvm_{kind}imum({into}, {value})"
    return f"{into} = " + NUMBA.accumulate(kind, into, value)


KERNEL = "kernel"  # the generated function's name, the same for every kernel


@dataclass(frozen=True)
class CpuKernelCode:
    name: str  # the region's name, for listings (the function itself is KERNEL)
    source: str  # shape-generic: the same for every kernel of one structure
    parallel: bool
    red: str | None  # None: no reduction; "out": it folds into the output; else its dtype
    identity: object
    chunks: int  # rows of `partial` (0: none)
    # the run-time arguments after `out`, (name, value): loop bounds, then constants
    scalars: tuple[tuple[str, object], ...] = ()


def _parallel(body: Graph, shape: tuple[int, ...]) -> bool:
    """Whether a kernel over iteration space `shape` is worth running on every core."""
    heavy = any(n.op in OPS and OPS[n.op].kind == "elementwise" and isinstance(n.type, TensorType)
                and OPS[n.op].flops([body[i].type for i in n.inputs], n.type, n.attrs)
                >= 4 * max(1, n.type.size) for n in body.nodes)
    return len(shape) > 0 and math.prod(shape) * (8 if heavy else 1) >= PARALLEL_MIN


def _scalars(body: Graph, shape: tuple[int, ...]) -> tuple[tuple[str, object], ...]:
    """A kernel's run-time scalars: the loop bounds, then the constants (typed as the kernel
    reads them)."""
    return (*((f"n{d}", np.int64(size)) for d, size in enumerate(shape)),
            *((f"v{n.id}", dtypes.to_numpy(n.dtype).type(n.attrs["value"].array.item()))
              for n in body.nodes if n.op == "constant"))


def generate(plan: KernelPlan | RowPlan, name: str, threads: int) -> CpuKernelCode:
    name = re.sub(r"\W", "_", name)  # region names such as XLA's "fused_computation.1"
    if isinstance(plan, RowPlan):
        return generate_rows(plan, name)
    body = plan.body
    check(NUMBA, body, {plan.reduce.id} if plan.reduce is not None else set())
    parallel = _parallel(body, plan.loop_shape)
    axes = set(plan.reduced_axes)
    partials = parallel and plan.reduce is not None and 0 in axes
    chunks = min(plan.loop_shape[0], 4 * threads) if partials else 0
    red: str | None = None
    identity: object = None
    if plan.reduce is not None:
        kind, acc, identity = accumulator(plan.reduce)
        red = "out" if not plan.epilogue and acc == plan.output.dtype else acc
    args = [f"in{k}" for k in range(len(body.params))] + (["red"] if red not in (None, "out") else [])
    args += (["partial"] if partials else []) + ["out"]
    # (`partial`'s rows, `chunks`, are its first dimension)
    rank = len(plan.loop_shape)
    scalars = _scalars(body, plan.loop_shape)
    args += [a for a, _ in scalars]
    w = Block(NUMBA)
    w(f"@njit(parallel={parallel}, error_model='numpy', cache=True)")
    w(f"def {KERNEL}({', '.join(args)}):")
    w.depth = 1

    def value(i: int, loop_vars: list[str], shape: tuple[int, ...]) -> str:
        n = body[i]
        if n.op == "parameter":
            acc_ = param_access(plan, n, shape)
        elif n.op == "broadcast_in_dim" and body[n.inputs[0]].op == "parameter":
            acc_ = broadcast_access(plan, n)
        elif readable(body, n):
            acc_ = read_access(plan, n, shape)
        else:
            return f"v{i}"
        return read(NUMBA, acc_, f"in{acc_.param}", loop_vars,
                    body[body.params[acc_.param]].shape, f"v{acc_.fill}")

    def emit(nodes: tuple[Node, ...], loop_vars: list[str], shape: tuple[int, ...]) -> None:
        emit_chain(NUMBA, w, body, nodes, lambda i: value(i, loop_vars, shape))

    # ---- phase A: the iteration space
    ivars = [f"i{d}" for d in range(rank)]
    suffix = rank
    while suffix > 0 and suffix - 1 in axes:
        suffix -= 1
    kept = [ivars[d] for d in range(rank) if d not in axes] or ["0"]
    target = "out" if red == "out" else "red"
    if partials:
        w("chunks = partial.shape[0]")
        w("for c in prange(chunks):")
        w.depth += 1
        w("lo = c * n0 // chunks")
        w("hi = (c + 1) * n0 // chunks")
    for d in range(rank):
        if plan.reduce is not None and d == suffix:
            w(f"acc = {scalar(identity, acc)}")
        if d == 0 and partials:
            w("for i0 in range(lo, hi):")
        else:
            w(f"for {ivars[d]} in {'prange' if d == 0 and parallel and not partials else 'range'}"
              f"(n{d}):")
        w.depth += 1
    if plan.reduce is not None and suffix == rank:
        w(f"acc = {scalar(identity, acc)}")
    emit(plan.prologue if plan.reduce is not None else plan.prologue + plan.epilogue, ivars,
         plan.loop_shape)
    if plan.reduce is None:
        w(f"out[{', '.join(ivars) or '0'}] = {value(plan.output.id, ivars, plan.loop_shape)}")
        w.depth -= rank
    else:
        v = value(plan.reduce.inputs[0], ivars, plan.loop_shape)
        w(fold(kind, acc, "acc", f"{np_type(acc)}({v})"))
        w.depth -= rank - suffix
        cell = f"partial[c, {', '.join(kept)}]" if partials else f"{target}[{', '.join(kept)}]"
        w(fold(kind, acc, cell, "acc"))
        w.depth -= suffix + (1 if partials else 0)
        if partials:  # indexed as phase B reads it: numba's parfor fusion does not see
            # through a reshaped alias, and once fused phase B with it (stale reads)
            kvars = [f"k{d}" for d in range(len(plan.out_shape))]
            for d in range(len(plan.out_shape)):
                w(f"for k{d} in {'prange' if d == 0 else 'range'}(out.shape[{d}]):")
                w.depth += 1
            at = ", ".join(kvars) or "0"
            w(f"a = partial[0, {at}]")
            w("for c in range(1, chunks):")
            w("    " + fold(kind, acc, "a", f"partial[c, {at}]"))
            w(f"{target}[{at}] = a")
            w.depth -= len(plan.out_shape)
    # ---- phase B: the epilogue, over the result's shape
    if plan.reduce is not None and red != "out":
        jvars = [f"j{d}" for d in range(len(plan.out_shape))]
        for d in range(len(plan.out_shape)):
            w(f"for j{d} in {'prange' if d == 0 and parallel else 'range'}(out.shape[{d}]):")
            w.depth += 1
        w(f"v{plan.reduce.id} = {np_type(plan.reduce.dtype)}(red[{', '.join(jvars) or '0'}])")
        emit(plan.epilogue, jvars, plan.out_shape)
        w(f"out[{', '.join(jvars) or '0'}] = {value(plan.output.id, jvars, plan.out_shape)}")
    source = "\n".join(w.lines) + "\n"
    return CpuKernelCode(name, source, parallel, red, identity, chunks, scalars)


class _Rows(RowEmitter):
    """A row kernel's sweeps as numba loops over the column dimensions of the point
    (i0, i1, ...), in the (parallel) loop over rows."""

    def __init__(self, plan: RowPlan, block: Block) -> None:
        super().__init__(plan, NUMBA, block)
        self.ivars = [f"i{d}" for d in range(len(plan.shape))]

    def read(self, a: Access) -> str:
        return f"in{a.param}[{', '.join(self.ivars[d] if d is not None else '0' for d in a.index) or '0'}]"

    def open_columns(self) -> int:
        for d in range(self.plan.rows, len(self.plan.shape)):
            self.b(f"for i{d} in range(n{d}):")
            self.b.depth += 1
        return len(self.plan.shape) - self.plan.rows

    def fold(self, kind: str, acc: str, into: str, value: str) -> None:
        self.b(fold(kind, acc, into, value))

    def stored(self) -> str:
        return f"out[{', '.join(self.ivars)}]"

    def store(self, value: str, per_row: bool) -> None:
        rows, out = self.plan.rows, self.plan.output
        at = self.ivars[:rows] + ["0"] * (len(out.shape) - rows) if per_row else self.ivars
        self.b(f"out[{', '.join(at) or '0'}] = {value}")

    def kept(self) -> int | None:
        # a per-point value that both the last fold pass and the output pass compute (a
        # softmax's exp) is kept in the output buffer between the two (it has the output's
        # type): the pass that writes the output reads it back instead of computing it again
        plan, cone, out = self.plan, self.plan.cone, self.plan.output
        final = cone([out.id]) if out.id not in plan.row_level else set()
        last = cone([r.inputs[0] for r in plan.passes[-1]])
        shared = [i for i in final & last if self.body[i].type == out.type]
        return max(shared, key=lambda i: (len(cone([i])), i), default=None)


def generate_rows(plan: RowPlan, name: str) -> CpuKernelCode:
    """A row kernel (kernel_plan.RowPlan): a (parallel) loop over rows; in each row, one pass
    over the columns per round of reductions, each folding into a scalar accumulator, then
    the pass (or, for a per-row result, the one store) that writes the output."""
    body, shape, rows = plan.body, plan.shape, plan.rows
    w = Block(NUMBA)
    emitter = _Rows(plan, w)
    parallel = rows > 0 and math.prod(shape[:rows]) > 1 and _parallel(body, shape)
    scalars = _scalars(body, shape)
    args = [f"in{k}" for k in range(len(body.params))] + ["out"] + [a for a, _ in scalars]
    w(f"@njit(parallel={parallel}, error_model='numpy', cache=True)")
    w(f"def {KERNEL}({', '.join(args)}):")
    w.depth = 1
    if rows == 1:
        w(f"for i0 in {'prange' if parallel else 'range'}(n0):")
        w.depth += 1
    elif rows > 1:  # the row dimensions as one (parallel) loop
        w(f"for r in {'prange' if parallel else 'range'}({' * '.join(f'n{d}' for d in range(rows))}):")
        w.depth += 1
        q = "r"  # (numba refuses a reassigned loop index, or a name copied from it)
        for d in reversed(range(rows)):
            w(f"i{d} = {q} % n{d}" if d else f"i0 = {q}")
            if d:
                w(f"q{d} = {q} // n{d}")
                q = f"q{d}"
    emitter.walk()
    source = "\n".join(w.lines) + "\n"
    return CpuKernelCode(name, source, parallel, None, None, 0, scalars)
