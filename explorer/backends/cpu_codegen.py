"""Generated CPU kernels: a fused kernel's plan (kernel_plan.py) -> Python source for numba.

Why numba: measured on the fusion goal, `mean(x**2*3 + y)` on 8192x8192 float32 with two
cores, a numba loop nest with `parallel=True` took 29 ms, `jax.jit` 39 ms, cache-blocked
NumPy (16K-element blocks, `out=` buffers) 90 ms on one thread and 122 ms on two, NumPy eager
164 ms (bench/RESULTS.md). Only the loop nest reads each input once and keeps nothing else.

The kernel is one function specialised to its shapes (the sizes are literals, as XLA
specialises). Phase A loops over the iteration space in memory order, computing each point's
prologue values in registers and folding the reduced value into a scalar accumulator; the
outermost loop is `prange` when the space is large. When the outermost dimension is itself
reduced, each parallel chunk folds into its own row of `partial`, and the rows are combined
afterwards. Phase B runs the epilogue over the (small) reduced result. Float sums and
products accumulate in float64. The kernel allocates nothing: every buffer it writes
(outputs, `red`, `partial`) is allocated by the launcher with NumPy, where tracemalloc sees it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..ir import dtypes
from ..ir.graph import Node
from .kernel_plan import REDUCE_COMBINE, KernelPlan, PlanError, broadcast_access, param_access

# Iteration spaces at least this large run in parallel: below it, waking threads costs more
# than it saves (and on a busy machine a descheduled thread stalls the whole kernel).
PARALLEL_MIN = 1 << 21
SUPPORTED = frozenset({"pred", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64"})


def np_type(d: str) -> str:
    """The NumPy scalar constructor for element type `d`, as generated code spells it."""
    if d not in SUPPORTED:
        raise PlanError(f"element type {d} has no numba kernel")
    return "np.bool_" if d == "pred" else f"np.{dtypes.to_numpy(d).name}"


def _f(name: str) -> Callable[[list[str], Node], str]:
    return lambda a, n: f"{name}({', '.join(a)})"


def _select(a: list[str], n: Node) -> str:
    pred, *cases = a
    if len(cases) == 2:
        return f"({cases[1]} if {pred} else {cases[0]})"
    expr = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        expr = f"({cases[k]} if {pred} == {k} else {expr})"
    return expr


def _int_or_float(int_form: str, float_form: str) -> Callable[[list[str], Node], str]:
    def expr(a: list[str], n: Node) -> str:
        return (int_form if dtypes.is_int(n.dtype) else float_form).format(*a)

    return expr


def _convert(a: list[str], n: Node) -> str:
    if dtypes.is_bool(n.attrs["new_dtype"]):
        return f"({a[0]} != 0)"
    return f"_to_int({a[0]})" if dtypes.is_int(n.attrs["new_dtype"]) else a[0]


def _integer_pow(a: list[str], n: Node) -> str:
    y = int(n.attrs["y"])
    prod = " * ".join([a[0]] * abs(y)) if y else "1"
    return f"(1 / ({prod}))" if y < 0 else f"({prod})"


def _round(a: list[str], n: Node) -> str:
    return f"np.rint({a[0]})" if n.attrs.get("rounding_method", 0) else f"_round_away({a[0]})"


# op -> scalar expression over operand expressions (the result is cast to the node's type).
EXPR: dict[str, Callable[[list[str], Node], str]] = {
    "neg": lambda a, n: f"(-{a[0]})", "abs": _f("np.abs"), "sign": _f("np.sign"),
    "exp": _f("np.exp"), "exp2": _f("np.exp2"), "log": _f("np.log"), "log1p": _f("np.log1p"),
    "expm1": _f("np.expm1"), "sqrt": _f("np.sqrt"), "rsqrt": lambda a, n: f"(1 / np.sqrt({a[0]}))",
    "cbrt": _f("np.cbrt"), "sin": _f("np.sin"), "cos": _f("np.cos"), "tan": _f("np.tan"),
    "asin": _f("np.arcsin"), "acos": _f("np.arccos"), "atan": _f("np.arctan"),
    "sinh": _f("np.sinh"), "cosh": _f("np.cosh"), "tanh": _f("np.tanh"),
    "asinh": _f("np.arcsinh"), "acosh": _f("np.arccosh"), "atanh": _f("np.arctanh"),
    "logistic": lambda a, n: f"(1 / (1 + np.exp(-{a[0]})))", "erf": _f("math.erf"),
    "erfc": _f("math.erfc"), "lgamma": _f("math.lgamma"), "floor": _f("np.floor"),
    "ceil": _f("np.ceil"), "is_finite": _f("np.isfinite"), "square": lambda a, n: f"({a[0]} * {a[0]})",
    "not": lambda a, n: f"(not {a[0]})" if n.dtype == "pred" else f"(~{a[0]})",
    "round": _round, "integer_pow": _integer_pow, "copy": lambda a, n: a[0],
    "add": lambda a, n: f"({a[0]} + {a[1]})", "add_any": lambda a, n: f"({a[0]} + {a[1]})",
    "sub": lambda a, n: f"({a[0]} - {a[1]})", "mul": lambda a, n: f"({a[0]} * {a[1]})",
    "div": _int_or_float("_idiv({0}, {1})", "({0} / {1})"),
    "rem": _int_or_float("_irem({0}, {1})", "np.fmod({0}, {1})"),
    "pow": _f("np.power"), "max": _f("_max"), "min": _f("_min"), "atan2": _f("np.arctan2"),
    "eq": lambda a, n: f"({a[0]} == {a[1]})", "ne": lambda a, n: f"({a[0]} != {a[1]})",
    "lt": lambda a, n: f"({a[0]} < {a[1]})", "le": lambda a, n: f"({a[0]} <= {a[1]})",
    "gt": lambda a, n: f"({a[0]} > {a[1]})", "ge": lambda a, n: f"({a[0]} >= {a[1]})",
    "and": lambda a, n: f"({a[0]} & {a[1]})", "or": lambda a, n: f"({a[0]} | {a[1]})",
    "xor": lambda a, n: f"({a[0]} ^ {a[1]})", "select_n": _select,
    "clamp": lambda a, n: f"_min(_max({a[1]}, {a[0]}), {a[2]})",
    "convert_element_type": _convert,
}


def accumulator(plan: KernelPlan) -> tuple[str, str, object]:
    """(combine op, accumulator element type, identity) of the plan's reduction."""
    assert plan.reduce is not None
    d = plan.reduce.dtype
    kind = REDUCE_COMBINE[plan.reduce.op]
    if d == "pred" and kind in ("max", "min"):
        kind = "or" if kind == "max" else "and"
    acc = d
    if kind in ("add", "mul") and dtypes.is_float(d):
        acc = "f64"
    elif kind in ("add", "mul") and dtypes.is_int(d):
        acc = "u64" if d.startswith("u") else "i64"
    npd = dtypes.to_numpy(acc)
    identity: object = {"add": 0, "mul": 1, "and": True, "or": False}.get(kind)
    if kind in ("max", "min"):
        big = np.inf if dtypes.is_float(d) else np.iinfo(npd).max
        low = -np.inf if dtypes.is_float(d) else np.iinfo(npd).min
        identity = low if kind == "max" else big
    return kind, acc, npd.type(identity)  # type: ignore[arg-type]


COMBINE = {"add": "{0} + {1}", "mul": "{0} * {1}", "max": "_max({0}, {1})",
           "min": "_min({0}, {1})", "and": "{0} & {1}", "or": "{0} | {1}"}


@dataclass(frozen=True)
class CpuKernelCode:
    name: str
    source: str
    parallel: bool
    red: str | None  # None: no reduction; "out": it folds into the output; else its dtype
    identity: object
    chunks: int  # rows of `partial` (0: none)


def scalar(v: object, d: str) -> str:
    """A typed scalar literal: np.float32(3.0), np.float64(-np.inf), np.bool_(True)."""
    v = np.asarray(v).item()
    if isinstance(v, float) and not math.isfinite(v):
        text = "np.nan" if v != v else ("np.inf" if v > 0 else "-np.inf")
    else:
        text = repr(v)
    return f"{np_type(d)}({text})"


def literal(n: Node) -> str:
    return scalar(n.attrs["value"].array, n.dtype)


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)


def generate(plan: KernelPlan, name: str, threads: int) -> CpuKernelCode:
    name = re.sub(r"\W", "_", name)  # region names such as XLA's "fused_computation.1"
    body = plan.body
    for n in body.nodes:
        np_type(n.dtype)
        if n.op not in EXPR and n.op not in ("parameter", "constant", "broadcast_in_dim") \
                and n is not plan.reduce:
            raise PlanError(f"{n.op} has no scalar form in the CPU code generator")
    size = math.prod(plan.loop_shape)
    parallel = size >= PARALLEL_MIN and len(plan.loop_shape) > 0
    axes = set(plan.reduced_axes)
    partials = parallel and plan.reduce is not None and 0 in axes
    chunks = min(plan.loop_shape[0], 4 * threads) if partials else 0
    red: str | None = None
    identity: object = None
    if plan.reduce is not None:
        kind, acc, identity = accumulator(plan)
        red = "out" if not plan.epilogue and acc == plan.output.dtype else acc
    args = [f"in{k}" for k in range(len(body.params))] + (["red"] if red not in (None, "out") else [])
    args += (["partial"] if partials else []) + ["out"]
    w = _Writer()
    w.depth = 0
    w(f"@njit(parallel={parallel}, fastmath={{'reassoc', 'contract'}}, error_model='numpy', cache=True)")
    w(f"def {name}({', '.join(args)}):")
    w.depth = 1
    for n in body.nodes:
        if n.op == "constant":
            w(f"v{n.id} = {literal(n)}")

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
            w(f"v{n.id} = {np_type(n.dtype)}({EXPR[n.op](operands, n)})")

    # ---- phase A: the iteration space
    rank = len(plan.loop_shape)
    ivars = [f"i{d}" for d in range(rank)]
    suffix = rank
    while suffix > 0 and suffix - 1 in axes:
        suffix -= 1
    kept = [ivars[d] for d in range(rank) if d not in axes] or ["0"]
    target = "out" if red == "out" else "red"
    if partials:
        w(f"for c in prange({chunks}):")
        w.depth += 1
        w(f"lo = c * {plan.loop_shape[0]} // {chunks}")
        w(f"hi = (c + 1) * {plan.loop_shape[0]} // {chunks}")
    for d in range(rank):
        if plan.reduce is not None and d == suffix:
            w(f"acc = {scalar(identity, acc)}")
        if d == 0 and partials:
            w("for i0 in range(lo, hi):")
        else:
            w(f"for {ivars[d]} in {'prange' if d == 0 and parallel and not partials else 'range'}"
              f"({plan.loop_shape[d]}):")
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
        w("acc = " + COMBINE[kind].format("acc", f"{np_type(acc)}({v})"))
        w.depth -= rank - suffix
        cell = f"partial[c, {', '.join(kept)}]" if partials else f"{target}[{', '.join(kept)}]"
        w(f"{cell} = " + COMBINE[kind].format(cell, "acc"))
        w.depth -= suffix + (1 if partials else 0)
        if partials:
            flat = max(1, math.prod(plan.out_shape))
            w(f"pf = partial.reshape(({chunks}, {flat}))")
            w(f"rf = {target}.reshape({flat})")
            w(f"for k in prange({flat}):")
            w("    a = pf[0, k]")
            w(f"    for c in range(1, {chunks}):")
            w("        a = " + COMBINE[kind].format("a", "pf[c, k]"))
            w("    rf[k] = a")
    # ---- phase B: the epilogue, over the result's shape
    if plan.reduce is not None and red != "out":
        jvars = [f"j{d}" for d in range(len(plan.out_shape))]
        for d, n in enumerate(plan.out_shape):
            w(f"for j{d} in {'prange' if d == 0 and parallel else 'range'}({n}):")
            w.depth += 1
        w(f"v{plan.reduce.id} = {np_type(plan.reduce.dtype)}(red[{', '.join(jvars) or '0'}])")
        emit(plan.epilogue, jvars, plan.out_shape)
        w(f"out[{', '.join(jvars) or '0'}] = {value(plan.output.id, jvars, plan.out_shape)}")
    source = "\n".join(w.lines) + "\n"
    return CpuKernelCode(name, source, parallel, red, identity, chunks)


# ---------------------------------------------------------------- helpers the kernels call

PRELUDE = '''import math

import numpy as np
from numba import njit, prange

from explorer.backends.cpu_codegen import _idiv, _irem, _max, _min, _round_away, _to_int
'''


def _helpers() -> dict[str, object]:
    from numba import njit

    @njit(inline="always")
    def _max(a, b):  # np.maximum: NaN wins
        return a if (a > b or a != a) else b

    @njit(inline="always")
    def _min(a, b):
        return a if (a < b or a != a) else b

    @njit(inline="always")
    def _idiv(a, b):  # lax.div on integers: truncates toward zero; x / 0 -> 0
        if b == 0:
            return a * 0
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q

    @njit(inline="always")
    def _irem(a, b):  # C's fmod on integers; x % 0 -> 0
        if b == 0:
            return a * 0
        r = abs(a) % abs(b)
        return -r if a < 0 else r

    @njit(inline="always")
    def _round_away(x):
        return np.sign(x) * np.floor(np.abs(x) + 0.5)

    @njit(inline="always")
    def _to_int(x):  # float -> int as the reference does: NaN -> 0, else truncate
        return 0 if x != x else x

    return {"_max": _max, "_min": _min, "_idiv": _idiv, "_irem": _irem,
            "_round_away": _round_away, "_to_int": _to_int}


def __getattr__(name: str) -> object:
    """The helpers compile on first use, so importing this module does not need numba."""
    helpers = _helpers()
    globals().update(helpers)
    if name in helpers:
        return helpers[name]
    raise AttributeError(name)
