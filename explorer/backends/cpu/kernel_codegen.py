"""Generated CPU kernels: a fused kernel's plan (kernel_plan.py) -> Python source for numba.

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

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.graph import Graph, Node, TensorType
from ...ir.ops import OPS
from ...ir.traits import MONOIDS
from ..codegen.scalar_form import FALLS_BACK, ScalarExpr, scalar_form
from ..kernel_plan import (
    KernelPlan,
    PlanError,
    RowPlan,
    accumulation,
    broadcast_access,
    param_access,
    row_access,
)
from .numba_forms import FORMS

# Iteration spaces at least this large run in parallel: below it, waking threads costs more
# than it saves (and on a busy machine a descheduled thread stalls the whole kernel). A kernel
# that computes transcendentals (ops the table counts 4 FLOPs an element or more) is 8x
# costlier an element, so it runs in parallel from PARALLEL_MIN / 8 (a GPT block's gelu).
PARALLEL_MIN = 1 << 21
SUPPORTED = frozenset({"pred", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64"})


def numba_takes(dtype: Any) -> bool:
    """Whether numba code reads and writes arrays of this NumPy element type (not float16,
    ml_dtypes' bfloat16 and 4-bit integers, complex or object): the loops outside generated
    kernels (sorting, indexing, pooling, im2col) keep the reference for the others."""
    try:
        return dtypes.from_numpy(dtype) in SUPPORTED
    except ValueError:
        return False


def np_type(d: str) -> str:
    """The NumPy scalar constructor for element type `d`, as generated code spells it."""
    if d not in SUPPORTED:
        raise PlanError(f"element type {d} has no numba kernel")
    return "np.bool_" if d == "pred" else f"np.{dtypes.to_numpy(d).name}"


def _expr(g: Graph, n: Node) -> ScalarExpr:
    """The numba form of `n` (a node of graph `g`); an op that falls back raises PlanError."""
    form = scalar_form(g, n, FORMS)
    if form is FALLS_BACK:
        raise PlanError(f"{n.describe()}: {n.op} has no scalar form in the CPU code generator here")
    return form


def accumulator(reduce: Node) -> tuple[str, str, object]:
    """(combine op, accumulator element type, identity) of a kernel's reduction."""
    kind, acc = accumulation(reduce)
    return kind, acc, dtypes.to_numpy(acc).type(MONOIDS[kind].identity_value(acc))


# Sums and products fold through _radd/_rmul, the only operations allowed to reassociate (see
# _helpers): that lets LLVM vectorize the accumulation, while every other operation keeps
# IEEE semantics.
COMBINE = {"add": "_radd({0}, {1})", "mul": "_rmul({0}, {1})", "max": "_max({0}, {1})",
           "min": "_min({0}, {1})", "and": "{0} & {1}", "or": "{0} | {1}"}


def fold(kind: str, acc: str, into: str, value: str) -> str:
    """The statement folding `value` into accumulator `into` of element type `acc`. A float
    max or min folds through LLVM's maximum/minimum (NaN wins, as np.maximum), which vectorize
    where a compare-and-select does not (a row's max: 42 -> 8 us for 64K floats)."""
    if kind in ("max", "min") and acc in ("f32", "f64"):
        return f"{into} = _f{kind}({into}, {value})"
    return f"{into} = " + COMBINE[kind].format(into, value)


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


def scalar(v: object, d: str) -> str:
    """A typed scalar literal: np.float32(3.0), np.float64(-np.inf), np.bool_(True)."""
    v = np.asarray(v).item()
    if isinstance(v, float) and not math.isfinite(v):
        text = "np.nan" if v != v else ("np.inf" if v > 0 else "-np.inf")
    else:
        text = repr(v)
    return f"{np_type(d)}({text})"


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)


def _check(body: Graph, reductions: set[int]) -> None:
    """PlanError unless every element type and op of `body` has a numba form."""
    for n in body.nodes:
        np_type(n.dtype)
        if n.op not in ("parameter", "constant", "broadcast_in_dim") and n.id not in reductions:
            _expr(body, n)


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
    _check(body, {plan.reduce.id} if plan.reduce is not None else set())
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
    w = _Writer()
    w.depth = 0
    w(f"@njit(parallel={parallel}, error_model='numpy', cache=True)")
    w(f"def {KERNEL}({', '.join(args)}):")
    w.depth = 1

    def value(i: int, loop_vars: list[str], shape: tuple[int, ...]) -> str:
        n = body[i]
        if n.op == "parameter":
            acc_ = param_access(plan, n, shape)
        elif n.op == "broadcast_in_dim" and body[n.inputs[0]].op == "parameter":
            acc_ = broadcast_access(plan, n)
        else:
            return f"v{i}"
        index = [loop_vars[d] if d is not None else "0" for d in acc_.index] or ["0"]
        return f"in{acc_.param}[{', '.join(index)}]"

    def emit(nodes: tuple[Node, ...], loop_vars: list[str], shape: tuple[int, ...]) -> None:
        for n in nodes:
            if n.op == "constant":
                continue
            if n.op == "broadcast_in_dim":
                if body[n.inputs[0]].op != "parameter":
                    w(f"v{n.id} = v{n.inputs[0]}")
                continue
            operands = [value(i, loop_vars, shape) for i in n.inputs]
            w(f"v{n.id} = {np_type(n.dtype)}({_expr(body, n)(operands, n)})")

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


def generate_rows(plan: RowPlan, name: str) -> CpuKernelCode:
    """A row kernel (kernel_plan.RowPlan): a (parallel) loop over rows; in each row, one pass
    over the columns per round of reductions, each folding into a scalar accumulator, then
    the pass (or, for a per-row result, the one store) that writes the output."""
    body, shape, rows = plan.body, plan.shape, plan.rows
    reductions = {r.id for r in plan.reductions}
    _check(body, reductions)
    rank = len(shape)
    parallel = rows > 0 and math.prod(shape[:rows]) > 1 and _parallel(body, shape)
    scalars = _scalars(body, shape)
    args = [f"in{k}" for k in range(len(body.params))] + ["out"] + [a for a, _ in scalars]
    ivars = [f"i{d}" for d in range(rank)]
    w = _Writer()
    w.depth = 0
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

    def value(i: int) -> str:
        n = body[i]
        if n.op == "parameter":
            a = row_access(n, shape, rows, body.params.index(i))
        elif n.op == "broadcast_in_dim" and body[n.inputs[0]].op == "parameter":
            src = body[n.inputs[0]]
            a = row_access(src, shape, rows, body.params.index(src.id),
                           tuple(n.attrs["broadcast_dimensions"]))
        else:
            return f"v{i}"
        return f"in{a.param}[{', '.join(ivars[d] if d is not None else '0' for d in a.index) or '0'}]"

    def emit(n: Node) -> None:
        if n.op in ("constant", "parameter"):
            return
        if n.op == "broadcast_in_dim":
            if body[n.inputs[0]].op != "parameter":
                w(f"v{n.id} = v{n.inputs[0]}")
            return
        w(f"v{n.id} = {np_type(n.dtype)}({_expr(body, n)([value(i) for i in n.inputs], n)})")

    cone = plan.cone

    def columns(need: set[int], given: int | None = None) -> None:
        """Open the loops over the columns and compute the per-point values `need`, reading
        `given` back from the output, where the last pass left it."""
        for d in range(rows, rank):
            w(f"for i{d} in range(n{d}):")
            w.depth += 1
        for n in body.nodes:
            if n.id == given:
                w(f"v{n.id} = out[{', '.join(ivars)}]")
            elif n.id in need:
                emit(n)

    # A per-point value that both the last fold pass and the output pass compute (a
    # softmax's exp) is kept in the output buffer between the two (it has the output's type):
    # the pass that writes the output reads it back instead of computing it again.
    out = plan.output
    final = cone([out.id]) if out.id not in plan.row_level else set()
    last = cone([r.inputs[0] for r in plan.passes[-1]])
    shared = [i for i in final & last if body[i].type == out.type]
    keep = max(shared, key=lambda i: (len(cone([i])), i), default=None)

    done: set[int] = set()

    def row_values() -> None:
        """The per-row values whose inputs are all ready."""
        for n in body.nodes:
            if n.id in plan.row_level and n.id not in done and n.id not in reductions \
                    and all(i in done or body[i].op == "parameter" for i in n.inputs):
                emit(n)
                done.add(n.id)

    row_values()
    for this_pass in plan.passes:
        folds = [(r, *accumulator(r)) for r in this_pass]
        given = None
        if keep is not None and this_pass is plan.passes[-1]:
            # the kept value first, in a loop of its own (elementwise: it vectorizes), then
            # the folds over it read back from the output: in one loop with a float64 fold,
            # a softmax's exp ran 30% slower
            columns(cone([keep]))
            w(f"out[{', '.join(ivars)}] = v{keep}")
            w.depth -= rank - rows
            given = keep
        for r, _, acc, identity in folds:
            w(f"a{r.id} = {scalar(identity, acc)}")
        columns(cone([r.inputs[0] for r in this_pass], given), given)
        for r, kind, acc, _ in folds:
            w(fold(kind, acc, f"a{r.id}", f"{np_type(acc)}({value(r.inputs[0])})"))
        w.depth -= rank - rows
        for r, *_ in folds:
            w(f"v{r.id} = {np_type(r.dtype)}(a{r.id})")
            done.add(r.id)
        row_values()
    if out.id in plan.row_level:
        at = ivars[:rows] + ["0"] * (len(out.shape) - rows)
        w(f"out[{', '.join(at) or '0'}] = {value(out.id)}")
    else:
        columns(cone([out.id], keep), keep)
        w(f"out[{', '.join(ivars)}] = {value(out.id)}")
    source = "\n".join(w.lines) + "\n"
    return CpuKernelCode(name, source, parallel, None, None, 0, scalars)


# ---------------------------------------------------------------- helpers the kernels call

# numba's disk cache checks a kernel module's own file, not the helpers it inlines: the
# prelude names this file's hash, so that changed helpers make new modules (kernels.load keys
# them by their text) instead of reusing machine code built from the old ones.
_HELPERS_VERSION = hashlib.sha1(Path(__file__).read_bytes()).hexdigest()[:12]

PRELUDE = f'''import math

import numpy as np
from numba import njit, prange

from explorer.backends.cpu.kernel_codegen import (_idiv, _irem, _max, _min, _radd, _rmul, _round_away,
                                                _bitcast, _erfinv, _exp32, _fmax, _fmin, _tanh32,
                                                _tk_key, _to_int)
# helpers {_HELPERS_VERSION}
'''


def _helpers() -> dict[str, object]:
    from numba import njit, types
    from numba.extending import intrinsic, overload

    @njit(inline="always")
    def _max(a, b):  # np.maximum: NaN wins
        return a if (a > b or a != a) else b

    @njit(inline="always")
    def _min(a, b):
        return a if (a < b or a != a) else b

    @njit(inline="always")
    def _tk_key(x):  # lax.top_k's total order (ir/ops.top_k_key): +NaN, +inf, ..., -inf, -NaN
        if x != x:
            return np.inf if math.copysign(1.0, x) > 0 else -np.inf
        if x == np.inf:
            return 1.7976931348623157e308
        if x == -np.inf:
            return -1.7976931348623157e308
        if x == 0 and math.copysign(1.0, x) < 0:
            return -5e-324  # -0.0 just below +0.0
        return np.float64(x)

    @njit(inline="always")
    def _idiv(a, b):  # lax.div on integers: truncates toward zero; x / 0 -> -1, as XLA's
        if b == 0:  # all bits set, in a's type (`a * 0 - 1` is garbage for unsigned types)
            return ~(a ^ a)
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q

    @njit(inline="always")
    def _irem(a, b):  # C's fmod on integers; x % 0 -> x, as XLA's
        if b == 0:
            return a
        r = abs(a) % abs(b)
        return -r if a < 0 else r

    # Kernels carry no fast-math flags: 'reassoc' lets LLVM fold log(exp(x)) to x (100 instead
    # of inf) and 'contract' turns x*y+z into an fma (-inf instead of inf-inf = nan), results
    # the reference and JAX agree on. Only a reduction's accumulator may reassociate, so that
    # the loop vectorizes (3x on mean(x**2*3+y)): these are separate, not numba-inlined
    # functions, so the flag stays on their one instruction when LLVM inlines them.
    @njit(fastmath={"reassoc"})
    def _radd(a, b):
        return a + b

    @njit(fastmath={"reassoc"})
    def _rmul(a, b):
        return a * b

    def _ieee(name: str) -> Any:  # LLVM's maximum/minimum: NaN wins, and loops vectorize
        @intrinsic
        def fn(typingctx, a, b):
            from llvmlite import ir

            if not (isinstance(a, types.Float) and a == b):
                return None

            def codegen(context, builder, sig, args):
                t = args[0].type
                f = builder.module.declare_intrinsic(name, [t], ir.FunctionType(t, [t, t]))
                return builder.call(f, args)
            return a(a, b), codegen
        return fn

    _fmax, _fmin = _ieee("llvm.maximum"), _ieee("llvm.minimum")

    # float32 tanh as XLA's CPU backend computes it (EmitFastTanh): x itself below 4e-4,
    # else an odd 13/6 rational minimax on x clamped to [-9, 9], where tanh rounds to +-1.
    # Only multiplies, adds and one divide, so the loop vectorizes; libm's tanhf does not
    # (a GPT block's gelu: 19 ns an element through tanhf).
    @njit(inline="always")
    def _tanh32(x):
        c = min(max(x, np.float32(-9.0)), np.float32(9.0))
        c2 = c * c
        p = c2 * np.float32(-2.76076847742355e-16) + np.float32(2.00018790482477e-13)
        p = c2 * p + np.float32(-8.60467152213735e-11)
        p = c2 * p + np.float32(5.12229709037114e-08)
        p = c2 * p + np.float32(1.48572235717979e-05)
        p = c2 * p + np.float32(6.37261928875436e-04)
        p = c2 * p + np.float32(4.89352455891786e-03)
        q = c2 * np.float32(1.19825839466702e-06) + np.float32(1.18534705686654e-04)
        q = c2 * q + np.float32(2.26843463243900e-03)
        q = c2 * q + np.float32(4.89352518554385e-03)
        r = c * p / q
        return x if abs(x) < np.float32(0.0004) else r  # a select, so the loop vectorizes

    @intrinsic
    def _bits_as_f32(typingctx, bits):  # an int32's bits as a float32 (C's memcpy idiom)
        from llvmlite import ir

        if bits != types.int32:
            return None
        return types.float32(types.int32), \
            lambda context, builder, sig, args: builder.bitcast(args[0], ir.FloatType())

    # float32 exp without libm, so the loop vectorizes (libm's expf does not: a softmax's
    # exp ran at 2.8 ns an element): x = n ln2 + r with n = round(x log2 e), Cephes'
    # degree-6 polynomial for e^r, and 2^n as two powers of two made from exponent bits (each
    # in the normal range, so the one rounding of the last product gives libm's subnormals
    # and overflow); NaN stays NaN. Within 3 ulp of the correctly rounded result.
    @njit(inline="always")
    def _exp32(x):
        # far below the subnormal range the result is 0: compute on 0 there instead, as
        # arithmetic on subnormals is 100x slower (a causal mask's exp(-1e9) at every other
        # element of an attention row)
        c = min(x if x > np.float32(-104.0) else np.float32(0.0), np.float32(89.0))
        n = np.floor(c * np.float32(1.44269504) + np.float32(0.5))
        r = c - n * np.float32(0.693359375) - n * np.float32(-2.12194440e-4)
        z = r * r
        p = np.float32(1.9875691500e-4) * r + np.float32(1.3981999507e-3)
        p = p * r + np.float32(8.3334519073e-3)
        p = p * r + np.float32(4.1665795894e-2)
        p = p * r + np.float32(1.6666665459e-1)
        p = p * r + np.float32(5.0000001201e-1)
        k = np.int32(n)  # in int32 throughout (as int64, 30% slower: AVX2 has no
        half = np.int32(k >> np.int32(1))  # vector float -> int64 conversion)
        y = (p * z + r + np.float32(1.0)) * _bits_as_f32(np.int32((half + np.int32(127)) << np.int32(23)))
        y = y * _bits_as_f32(np.int32((k - half + np.int32(127)) << np.int32(23)))
        y = np.float32(np.inf) if x > np.float32(89.0) else y
        y = np.float32(0.0) if x <= np.float32(-104.0) else y
        return x if x != x else y

    @intrinsic
    def _bitcast(typingctx, x, to):  # x's bits as number type `to` of the same width
        target = getattr(to, "instance_type", None)
        if not (isinstance(x, types.Number) and isinstance(target, types.Number)
                and x.bitwidth == target.bitwidth):
            return None

        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], context.get_value_type(target))
        return target(x, to), codegen

    # lax.erf_inv: Giles' single-precision polynomial (XLA's own for float32), then two
    # Newton steps on erf in float64, so float64 results are as good as SciPy's too
    @njit(inline="always")
    def _erfinv(x):
        y = np.float64(x)
        if not abs(y) < 1.0:  # +-1 -> +-inf; NaN and |x| > 1 -> NaN
            return math.copysign(np.inf, y) if abs(y) == 1.0 else np.nan
        w = -math.log1p(-y * y)
        if w < 5.0:
            w = w - 2.5
            p = 2.81022636e-08
            p = 3.43273939e-07 + p * w
            p = -3.5233877e-06 + p * w
            p = -4.39150654e-06 + p * w
            p = 0.00021858087 + p * w
            p = -0.00125372503 + p * w
            p = -0.00417768164 + p * w
            p = 0.246640727 + p * w
            p = 1.50140941 + p * w
        else:
            w = math.sqrt(w) - 3.0
            p = -0.000200214257
            p = 0.000100950558 + p * w
            p = 0.00134934322 + p * w
            p = -0.00367342844 + p * w
            p = 0.00573950773 + p * w
            p = -0.0076224613 + p * w
            p = 0.00943887047 + p * w
            p = 1.00167406 + p * w
            p = 2.83297682 + p * w
        r = p * y
        for _ in range(2):
            r = r - (math.erf(r) - y) / (1.1283791670955126 * math.exp(-r * r))
        return r

    @njit(inline="always")
    def _round_away(x):
        return np.sign(x) * np.floor(np.abs(x) + 0.5)

    def _to_int(x, lo, hi, t):  # x as integer type t, whose bounds are lo and hi
        raise TypeError("_to_int is called from numba kernels only")

    @overload(_to_int, inline="always")
    def _to_int_numba(x, lo, hi, t):
        if not isinstance(x, types.Float):
            return lambda x, lo, hi, t: t(x)  # an integer wraps, as NumPy and XLA do

        def saturate(x, lo, hi, t):  # as XLA: truncate; NaN -> 0; out of range -> lo or hi
            if x != x:
                return t(0)
            if x >= hi:  # compared in float64, where hi may round up (2**63 - 1 -> 2**63)
                return t(hi)
            if x <= lo:
                return t(lo)
            return t(x)
        return saturate

    return {"_max": _max, "_min": _min, "_tk_key": _tk_key, "_idiv": _idiv, "_irem": _irem,
            "_radd": _radd, "_rmul": _rmul, "_round_away": _round_away, "_to_int": _to_int,
            "_tanh32": _tanh32, "_exp32": _exp32, "_fmax": _fmax, "_fmin": _fmin,
            "_bitcast": _bitcast, "_erfinv": _erfinv}


def __getattr__(name: str) -> object:
    """The helpers compile on first use, so importing this module does not need numba."""
    helpers = _helpers()
    globals().update(helpers)
    if name in helpers:
        return helpers[name]
    raise AttributeError(name)
