"""Reductions in generated CUDA that no single block holds: two-stage grid reductions and
row kernels, as `cupy.RawModule` source.

A fused kernel whose reduction folds more than one block's worth of elements per result (a
full `mean(x**2*3+y)` over 8192^2, a row sum of 10^5 columns) becomes a grid reduction
(`generate_grid`). Stage one: each of `parts` blocks per result walks a grid-stride span of
the folded elements, computes the kernel's prologue at each (the same `__device__` map
function the small-reduction form uses), folds in a register, then across the block with
warp shuffles and one shared-memory round (`_block_reduce`). With one block per result it
writes the result (through the epilogue's post function) directly; otherwise the block's
partial, and stage two (`<name>_combine`, one block per result) folds the partials in a
fixed order and finishes. Partials are combined by a second pass rather than atomics, so a
result does not depend on block scheduling.

A row kernel (kernel_plan.RowPlan: softmax, log-softmax, layer norm, cross-entropy; several
reductions per row) becomes one block per row (`generate_rows`): per round of reductions the
block's threads stride over the row's columns folding their accumulators, reduce them across
the block (every thread receives the results), compute the per-row values that follow, and a
last strided pass writes the output.

Accumulators are those of every generated kernel (kernel_plan.accumulation: float sums in
double). Shapes are literals; inputs are C-contiguous device arrays, one per body parameter,
each read at an element offset computed from the iteration indices.

This module only writes text (no CuPy needed): tests/backends/cuda_host.py runs the kernels
on the host, threads as threads, with barriers standing in for `__syncthreads` and shuffles.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...ir import dtypes
from ...ir.graph import Graph
from ..codegen.dialect import COMBINE, Block
from ..codegen.kernel_emitter import RowEmitter, read
from ..codegen.kernel_plan import Access, KernelPlan, RowPlan, accumulation
from .codegen import GpuKernelCode, map_function, post_function, then_kernel
from .cuda_dialect import CUDA, PREAMBLE, c_type

THREADS = 256  # threads per block (a multiple of the warp's 32)
MAX_BLOCKS = 1024  # blocks of a grid reduction's first stage, over all results
PER_THREAD = 8  # elements a first-stage thread folds, at least, before more blocks are added
MAX_GRID_Y = 65535  # CUDA's limit on a grid's y dimension (results beyond it: grid-stride)
COLUMNS_MIN = 8  # the kept innermost extent from which a grid reduction reads by columns

# Folding across a block: each warp by shuffles, then warp 0 over the warps' results, which
# every thread then reads from shared memory. The leading barrier lets a later call reuse
# `part`.
BLOCK_REDUCE = "".join(
    f"struct _op_{k} {{ template <typename T> __device__ T operator()(T a, T b) const "
    f"{{ return {e}; }} }};\n"
    for k, e in ((k, e.format("a", "b")) for k, e in COMBINE.items())) + """\
template <typename T, typename Op> __device__ T _warp_reduce(T v, Op op) {
  for (int d = 16; d > 0; d >>= 1) v = op(v, (T)__shfl_down_sync(0xffffffffu, v, d));
  return v;
}
template <typename T, typename Op> __device__ T _block_reduce(T v, Op op, T ident) {
  __shared__ T part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = _warp_reduce(v, op);
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (int)(blockDim.x >> 5) ? part[lane] : ident;
    v = _warp_reduce(v, op);
    if (lane == 0) part[0] = v;
  }
  __syncthreads();
  return part[0];
}
"""


@dataclass(frozen=True)
class GpuGridCode:
    """A grid reduction: kernel `name` (grid `parts` x results) and, when `parts` > 1,
    `name`_combine (one block per result). Arguments: the body's parameters, C-contiguous,
    in order, then the partials (`parts` per result, of `acc_type`) and the output (of
    `out_type`, the reduced value's when `then` runs the epilogue after)."""

    name: str
    source: str
    results: int
    size: int  # elements folded into each result
    parts: int
    acc_type: str  # element types (ir/dtypes)
    out_type: str
    out_shape: tuple[int, ...]
    then: GpuKernelCode | None = None
    kind: str = "grid"


@dataclass(frozen=True)
class GpuRowCode:
    """A row kernel: kernel `name`, one block per row (grid-stride over `rows`); arguments:
    the body's parameters, C-contiguous, in order, then the output."""

    name: str
    source: str
    rows: int
    out_type: str
    out_shape: tuple[int, ...]
    kind: str = "rows"


def blocks_per_result(results: int, size: int) -> int:
    """Blocks that share each result's elements: enough that every thread folds about
    PER_THREAD or more, and at most MAX_BLOCKS over all results."""
    return max(1, min(math.ceil(size / (THREADS * PER_THREAD)), MAX_BLOCKS // max(results, 1)))


def is_grid(plan: KernelPlan) -> bool:
    """Whether a one-reduction kernel folds more than one block's worth per result."""
    return plan.reduce is not None and \
        math.prod(plan.loop_shape[a] for a in plan.reduced_axes) > THREADS


def _unflatten(flat: str, dims: Sequence[int], shape: Sequence[int]) -> list[str]:
    """`const long i<d> = ...;` for iteration dimensions `dims`, from their C-order flat
    index `flat`."""
    lines = []
    for k, d in enumerate(dims):
        after = math.prod(shape[e] for e in dims[k + 1:])
        expr = flat if after == 1 else f"({flat} / {after}L)"
        if k:
            expr = f"{expr} % {shape[d]}L"
        lines.append(f"const long i{d} = {expr};")
    return lines


def _coefficients(a: Access, param_shape: Sequence[int]) -> dict[int, int]:
    """Per iteration dimension, how far access `a`'s element offset moves per step."""
    out: dict[int, int] = {}
    for k, d in enumerate(a.index):
        if d is not None and param_shape[k] != 1:
            out[d] = out.get(d, 0) + math.prod(param_shape[k + 1:])
    return out


def _offset(coef: dict[int, int], dims: Sequence[int], shape: Sequence[int], flat: str) -> str:
    """The part of an offset that dimensions `dims` contribute: `flat * c` when it is a
    multiple of their C-order flat index, else a sum over their index variables."""
    used = [d for d in dims if coef.get(d, 0)]
    if not used:
        return "0"
    ratios = {coef.get(d, 0) / math.prod(shape[e] for e in dims[k + 1:]) for k, d in enumerate(dims)}
    if len(ratios) == 1:
        (c,) = ratios
        if c == int(c):
            return flat if c == 1 else f"{flat} * {int(c)}L"
    return " + ".join(f"i{d}" if coef[d] == 1 else f"i{d} * {coef[d]}L" for d in used)


def _reads(plan: KernelPlan, accesses: Sequence[Access], kept: Sequence[int],
           reduced: Sequence[int]) -> tuple[list[str], list[str]]:
    """A grid reduction's reads of its inputs (the map function's arguments) at the point
    (i0, i1, ...), and the per-result offsets they start from: an input read through a
    slice or pad is indexed by the shared emitter (kernel_emitter.read), the padding value
    a select away."""
    body, shape = plan.body, plan.loop_shape
    reads, bases = [], []
    for k, a in enumerate(accesses):
        param_shape = body[body.params[a.param]].shape
        if a.window is not None or a.pad is not None:
            fill = CUDA.constant(body[a.fill]) if a.fill is not None else ""
            reads.append(read(CUDA, a, f"in{a.param}", [f"i{d}" for d in range(len(shape))],
                              param_shape, fill))
            continue
        coef = _coefficients(a, param_shape)
        bases.append(f"const long b{k} = {_offset(coef, kept, shape, 'o')};")
        reads.append(f"in{a.param}[b{k} + {_offset(coef, reduced, shape, 'r')}]")
    return reads, bases


def _params(body: Graph) -> list[str]:
    """The kernel's input parameters: one C-contiguous array per body parameter."""
    return [f"const {c_type(body[p].dtype)}* __restrict__ in{k}" for k, p in enumerate(body.params)]


def is_columns(plan: KernelPlan) -> bool:
    """Whether a grid reduction keeps the loop's innermost dimension (sums over axis 0 of a
    (10^6, 64) array): then `generate_columns`' layout reads coalesced."""
    shape = plan.loop_shape
    return bool(shape) and len(shape) - 1 not in plan.reduced_axes and shape[-1] >= COLUMNS_MIN


def generate_grid(plan: KernelPlan, name: str) -> GpuGridCode:
    if is_columns(plan):
        return generate_columns(plan, name)
    red = plan.reduce
    assert red is not None
    body, shape = plan.body, plan.loop_shape
    reduced = list(plan.reduced_axes)
    kept = [d for d in range(len(shape)) if d not in reduced]
    results, size = math.prod(shape[d] for d in kept), math.prod(shape[d] for d in reduced)
    parts = blocks_per_result(results, size)
    kind, acc = accumulation(red)
    at, ident = c_type(acc), CUDA.identity(kind, acc)
    func, pro = map_function(plan, name)
    post = post_function(plan, name)
    then = None if post is not None else then_kernel(plan, name)
    out_type = plan.output.dtype if post is not None else red.dtype
    finish = (f"{name}_post(({c_type(red.dtype)}){{}})" if post is not None
              else f"({c_type(red.dtype)}){{}}")
    reads, bases = _reads(plan, pro.accesses, kept, reduced)
    op = f"_op_{kind}()"
    ins = _params(body)
    lines = [PREAMBLE + BLOCK_REDUCE + func + (post or ""),
             f'extern "C" __global__ void {name}({", ".join(ins)}, {at}* __restrict__ part, '
             f"{c_type(out_type)}* __restrict__ out) {{",
             f"  for (long o = blockIdx.y; o < {results}L; o += gridDim.y) {{",
             *("    " + x for x in _unflatten("o", kept, shape)),
             *("    " + x for x in bases),
             f"    {at} acc = {ident};",
             f"    for (long r = (long)blockIdx.x * blockDim.x + threadIdx.x; r < {size}L; "
             f"r += (long){parts} * blockDim.x) {{",
             *("      " + x for x in _unflatten("r", reduced, shape)),
             f"      acc = {op}(acc, ({at}){name}_map({', '.join(reads)}));",
             "    }",
             f"    acc = _block_reduce(acc, {op}, ({at}){ident});",
             "    if (threadIdx.x == 0) "
             + (f"out[o] = {finish.format('acc')};" if parts == 1
                else f"part[o * {parts} + blockIdx.x] = acc;"),
             "  }", "}"]
    if parts > 1:
        lines += [f'extern "C" __global__ void {name}_combine(const {at}* __restrict__ part, '
                  f"{c_type(out_type)}* __restrict__ out) {{",
                  f"  for (long o = blockIdx.x; o < {results}L; o += gridDim.x) {{",
                  f"    {at} acc = {ident};",
                  f"    for (int p = threadIdx.x; p < {parts}; p += blockDim.x) "
                  f"acc = {op}(acc, part[o * {parts} + p]);",
                  f"    acc = _block_reduce(acc, {op}, ({at}){ident});",
                  f"    if (threadIdx.x == 0) out[o] = {finish.format('acc')};",
                  "  }", "}"]
    return GpuGridCode(name, "\n".join(lines) + "\n", results, size, parts, acc, out_type,
                       plan.out_shape, then)


def generate_columns(plan: KernelPlan, name: str) -> GpuGridCode:
    """A grid reduction that keeps the innermost dimension, with the threads across the
    kept results: a warp's 32 lanes take 32 consecutive results (consecutive addresses of
    each input row, one coalesced load per warp and row), the block's warps and the grid's
    `parts` rows of blocks stride over the folded rows; the warps' accumulators fold in a
    fixed order through shared memory, and with more than one part, `<name>_combine` folds
    each result's partials in order (one thread per result, coalesced too). The layout a
    block takes: grid (ceil(results / 32), parts), any multiple of 32 threads."""
    red = plan.reduce
    assert red is not None
    body, shape = plan.body, plan.loop_shape
    reduced = list(plan.reduced_axes)
    kept = [d for d in range(len(shape)) if d not in reduced]
    results, size = math.prod(shape[d] for d in kept), math.prod(shape[d] for d in reduced)
    lanes = math.ceil(results / 32)
    parts = max(1, min(math.ceil(size / (THREADS // 32 * PER_THREAD)), MAX_BLOCKS // lanes,
                       MAX_GRID_Y))
    kind, acc = accumulation(red)
    at, ident = c_type(acc), CUDA.identity(kind, acc)
    func, pro = map_function(plan, name)
    post = post_function(plan, name)
    then = None if post is not None else then_kernel(plan, name)
    out_type = plan.output.dtype if post is not None else red.dtype
    finish = (f"{name}_post(({c_type(red.dtype)}){{}})" if post is not None
              else f"({c_type(red.dtype)}){{}}")
    reads, bases = _reads(plan, pro.accesses, kept, reduced)
    op = f"_op_{kind}()"
    store = (f"out[o] = {finish.format('v')};" if parts == 1
             else f"part[(long)blockIdx.y * {results}L + o] = v;")
    lines = [PREAMBLE + BLOCK_REDUCE + func + (post or ""),
             f'extern "C" __global__ void {name}({", ".join(_params(body))}, '
             f"{at}* __restrict__ part, {c_type(out_type)}* __restrict__ out) {{",
             f"  __shared__ {at} folded[32][32];",
             "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, "
             "warps = blockDim.x >> 5;",
             "  const long o = (long)blockIdx.x * 32 + lane;",
             f"  {at} acc = {ident};",
             f"  if (o < {results}L) {{",
             *("    " + x for x in _unflatten("o", kept, shape)),
             *("    " + x for x in bases),
             f"    for (long r = (long)blockIdx.y * warps + warp; r < {size}L; "
             "r += (long)gridDim.y * warps) {",
             *("      " + x for x in _unflatten("r", reduced, shape)),
             f"      acc = {op}(acc, ({at}){name}_map({', '.join(reads)}));",
             "    }", "  }",
             "  folded[warp][lane] = acc;",
             "  __syncthreads();",
             f"  if (warp == 0 && o < {results}L) {{",
             f"    {at} v = folded[0][lane];",
             f"    for (int w = 1; w < warps; ++w) v = {op}(v, folded[w][lane]);",
             f"    {store}", "  }", "}"]
    if parts > 1:
        lines += [f'extern "C" __global__ void {name}_combine(const {at}* __restrict__ part, '
                  f"{c_type(out_type)}* __restrict__ out) {{",
                  f"  for (long o = (long)blockIdx.x * blockDim.x + threadIdx.x; o < {results}L; "
                  "o += (long)gridDim.x * blockDim.x) {",
                  f"    {at} v = part[o];",
                  f"    for (int p = 1; p < {parts}; ++p) v = {op}(v, part[(long)p * {results}L + o]);",
                  f"    out[o] = {finish.format('v')};", "  }", "}"]
    return GpuGridCode(name, "\n".join(lines) + "\n", results, size, parts, acc, out_type,
                       plan.out_shape, then, kind="columns")


class _Rows(RowEmitter):
    """A row kernel's sweeps as the block's threads striding over the row's columns (their
    flat index c), the accumulators combined across the block after each."""

    def __init__(self, plan: RowPlan, block: Block) -> None:
        super().__init__(plan, CUDA, block)
        rank = len(plan.shape)
        self.row_dims, self.col_dims = list(range(plan.rows)), list(range(plan.rows, rank))
        self.ncols = math.prod(plan.shape[plan.rows:])

    def read(self, a: Access) -> str:
        shape = self.plan.shape
        coef = _coefficients(a, self.body[self.body.params[a.param]].shape)
        row = _offset(coef, self.row_dims, shape, "o")
        col = _offset(coef, self.col_dims, shape, "c")
        return f"in{a.param}[{' + '.join(x for x in (row, col) if x != '0') or '0'}]"

    def open_columns(self) -> int:
        self.b(f"for (long c = threadIdx.x; c < {self.ncols}L; c += blockDim.x) {{")
        self.b.depth += 1
        self.b(*_unflatten("c", self.col_dims, self.plan.shape))
        return 1

    def fold(self, kind: str, acc: str, into: str, value: str) -> None:
        self.b(f"{into} = _op_{kind}()({into}, {value});")

    def combine(self, kind: str, acc: str, into: str) -> None:
        self.b(f"{into} = _block_reduce({into}, _op_{kind}(), ({c_type(acc)}){CUDA.identity(kind, acc)});")

    def store(self, value: str, per_row: bool) -> None:
        self.b(f"if (threadIdx.x == 0) out[o] = {value};" if per_row
               else f"out[o * {self.ncols}L + c] = {value};")


def generate_rows(plan: RowPlan, name: str) -> GpuRowCode:
    """One block per row (grid-stride over the rows): the shared row walk
    (codegen/kernel_emitter.RowEmitter) with the block's threads sweeping the columns."""
    body, shape, out = plan.body, plan.shape, plan.output
    nrows = math.prod(shape[:plan.rows])
    b = Block(CUDA)
    emitter = _Rows(plan, b)
    b(f'extern "C" __global__ void {name}({", ".join(_params(body))}, '
      f"{c_type(out.dtype)}* __restrict__ out) {{")
    b.depth = 1
    with b.block(f"for (long o = blockIdx.x; o < {nrows}L; o += gridDim.x) {{"):
        b(*_unflatten("o", list(range(plan.rows)), shape))
        emitter.walk()
    b.depth = 0
    b("}")
    return GpuRowCode(name, PREAMBLE + BLOCK_REDUCE + "\n".join(b.lines) + "\n", nrows, out.dtype,
                      out.shape)


def launch(code: GpuGridCode | GpuRowCode, ins: Sequence[Any], xp: Any,
           call: Callable[[str, tuple[int, ...], list[Any]], None]) -> Any:
    """Run `code` on inputs `ins` (the body's parameters, C-contiguous arrays of module
    `xp`): `call(kernel name, grid, arguments)` launches one kernel of THREADS-thread
    blocks (CuPy's RawModule on a GPU; tests/backends/cuda_host.py on the host). Returns the
    output (the reduced value, for a grid reduction whose epilogue runs after as `then`)."""
    out = xp.empty(code.out_shape, dtypes.to_numpy(code.out_type))
    if isinstance(code, GpuRowCode):
        if code.rows:
            call(code.name, (min(code.rows, MAX_GRID_Y),), [*ins, out])
        return out
    if not code.results:
        return out
    part = xp.empty(code.results * code.parts if code.parts > 1 else 1,
                    dtypes.to_numpy(code.acc_type))
    if code.kind == "columns":
        call(code.name, (math.ceil(code.results / 32), code.parts), [*ins, part, out])
        if code.parts > 1:
            call(f"{code.name}_combine", (min(math.ceil(code.results / THREADS), MAX_GRID_Y),),
                 [part, out])
        return out
    call(code.name, (code.parts, min(code.results, MAX_GRID_Y)), [*ins, part, out])
    if code.parts > 1:
        call(f"{code.name}_combine", (min(code.results, MAX_GRID_Y),), [part, out])
    return out


def listing(code: GpuGridCode | GpuRowCode) -> str:
    """The source as the kernels tab lists it: how it launches, then the CUDA."""
    if isinstance(code, GpuRowCode):
        head = (f"// cupy.RawModule: {code.name}<<<min({code.rows}, {MAX_GRID_Y}), {THREADS}>>>, "
                f"one block per row of {code.rows}\n")
    elif code.kind == "columns":
        head = (f"// cupy.RawModule: {code.name}<<<({math.ceil(code.results / 32)}, "
                f"{code.parts}), {THREADS}>>>: column reduction, coalesced: a warp's lanes take "
                f"32 consecutive of the {code.results} results, the warps and {code.parts} "
                f"row(s) of blocks stride over the {code.size} folded rows")
        head += (f"; then {code.name}_combine<<<{math.ceil(code.results / THREADS)}, "
                 f"{THREADS}>>> folds the {code.parts} partials of each result\n"
                 if code.parts > 1 else "\n")
    else:
        head = (f"// cupy.RawModule: {code.name}<<<({code.parts}, min({code.results}, "
                f"{MAX_GRID_Y})), {THREADS}>>>: {code.parts} block(s) per result, each folding "
                f"a grid-stride span of its {code.size} elements")
        head += (f"; then {code.name}_combine<<<min({code.results}, {MAX_GRID_Y}), {THREADS}>>> "
                 f"folds the {code.parts} partials of each result\n" if code.parts > 1 else "\n")
    text = head + code.source
    if isinstance(code, GpuGridCode) and code.then is not None:
        text += "\n// then\n" + code.then.source
    return text

