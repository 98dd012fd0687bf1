"""Generated CUDA kernels: a fused kernel's plan (kernel_plan.py) -> CuPy kernel definitions.

A kernel without a reduction becomes a `cupy.ElementwiseKernel`: one thread per output
element computes the whole chain in registers. A kernel with a reduction becomes a
`cupy.ReductionKernel` whose map expression calls a generated `__device__` function holding
the prologue; an epilogue that reads only the reduced value (and constants), like mean's
division, becomes its post-map expression, and any other epilogue a second, small
ElementwiseKernel over the reduced result. Each way a kernel reads an input (an `Access`)
is its own argument, passed as a broadcast view, so CuPy's indexing does the broadcasting.

This module only writes text (no CuPy needed): tests check the text, gpu.py compiles it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..ir import dtypes
from ..ir.graph import Node
from .kernel_plan import (
    REDUCE_COMBINE,
    Access,
    KernelPlan,
    PlanError,
    broadcast_access,
    param_access,
)

C_TYPES = {"pred": "bool", "i8": "signed char", "i16": "short", "i32": "int", "i64": "long long",
           "u8": "unsigned char", "u16": "unsigned short", "u32": "unsigned int",
           "u64": "unsigned long long", "f32": "float", "f64": "double"}

# Device helpers every kernel may call (NaN-propagating max/min as np.maximum; lax's integer
# division and remainder, which truncate and give 0 for a zero divisor).
PREAMBLE = """template <typename T> __device__ T _max(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> __device__ T _min(T a, T b) { return (a < b || a != a) ? a : b; }
template <typename T> __device__ T _idiv(T a, T b) { return b == 0 ? T(0) : a / b; }
template <typename T> __device__ T _irem(T a, T b) { return b == 0 ? T(0) : a % b; }
template <typename T, typename F> __device__ T _to_int(F x) { return x != x ? T(0) : T(x); }
__device__ inline double _inf() { return __longlong_as_double(0x7ff0000000000000LL); }
__device__ inline double _nan() { return __longlong_as_double(0x7ff8000000000000LL); }
"""


def c_type(d: str) -> str:
    if d not in C_TYPES:
        raise PlanError(f"element type {d} has no CUDA kernel here")
    return C_TYPES[d]


def cupy_type(d: str) -> str:
    """The dtype name a CuPy parameter list uses ('float32 a0')."""
    c_type(d)
    return "bool" if d == "pred" else dtypes.to_numpy(d).name


def _f(name: str) -> Callable[[list[str], Node], str]:
    return lambda a, n: f"{name}({', '.join(a)})"


def _bin(op: str) -> Callable[[list[str], Node], str]:
    return lambda a, n: f"({a[0]} {op} {a[1]})"


def _select(a: list[str], n: Node) -> str:
    pred, *cases = a
    expr = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        expr = f"({pred} == {k} ? {cases[k]} : {expr})"
    return expr


def _convert(a: list[str], n: Node) -> str:
    new = n.attrs["new_dtype"]
    if new == "pred":
        return f"({a[0]} != 0)"
    if dtypes.is_int(new):
        return f"_to_int<{c_type(new)}>({a[0]})"
    return f"(({c_type(new)}){a[0]})"


def _integer_pow(a: list[str], n: Node) -> str:
    y = int(n.attrs["y"])
    prod = " * ".join([a[0]] * abs(y)) if y else "1"
    return f"(1 / ({prod}))" if y < 0 else f"({prod})"


def _by_kind(int_form: str, float_form: str) -> Callable[[list[str], Node], str]:
    return lambda a, n: (int_form if dtypes.is_int(n.dtype) else float_form).format(*a)


EXPR: dict[str, Callable[[list[str], Node], str]] = {
    "neg": lambda a, n: f"(-{a[0]})", "abs": lambda a, n: f"({a[0]} < 0 ? -{a[0]} : {a[0]})",
    "sign": lambda a, n: f"(({a[0]} > 0) - ({a[0]} < 0))",
    **{op: _f(op) for op in ("exp", "exp2", "log", "log1p", "expm1", "sqrt", "rsqrt", "cbrt",
                             "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
                             "asinh", "acosh", "atanh", "erf", "erfc", "lgamma", "floor", "ceil",
                             "atan2", "pow", "nextafter")},
    "erf_inv": _f("erfinv"), "is_finite": _f("isfinite"),
    "logistic": lambda a, n: f"(1 / (1 + exp(-{a[0]})))",
    "square": lambda a, n: f"({a[0]} * {a[0]})",
    "not": lambda a, n: f"(!{a[0]})" if n.dtype == "pred" else f"(~{a[0]})",
    "round": lambda a, n: f"rint({a[0]})" if n.attrs.get("rounding_method", 0) else f"round({a[0]})",
    "integer_pow": _integer_pow, "copy": lambda a, n: a[0],
    "add": _bin("+"), "add_any": _bin("+"), "sub": _bin("-"), "mul": _bin("*"),
    "div": _by_kind("_idiv({0}, {1})", "({0} / {1})"),
    "rem": _by_kind("_irem({0}, {1})", "fmod({0}, {1})"),
    "max": _f("_max"), "min": _f("_min"),
    "eq": _bin("=="), "ne": _bin("!="), "lt": _bin("<"), "le": _bin("<="), "gt": _bin(">"),
    "ge": _bin(">="), "and": _bin("&"), "or": _bin("|"), "xor": _bin("^"),
    "select_n": _select, "clamp": lambda a, n: f"_min(_max({a[1]}, {a[0]}), {a[2]})",
    "convert_element_type": _convert,
}

REDUCE_EXPR = {"add": "a + b", "mul": "a * b", "max": "_max(a, b)", "min": "_min(a, b)",
               "and": "a & b", "or": "a | b"}


def identity(kind: str, d: str) -> str:
    if kind in ("max", "min") and d != "pred":
        if dtypes.is_float(d):
            return "-_inf()" if kind == "max" else "_inf()"
        info = np.iinfo(dtypes.to_numpy(d))
        return str(info.min if kind == "max" else info.max)
    return {"add": "0", "mul": "1", "and": "true", "or": "false", "max": "false",
            "min": "true"}[kind]


def literal(n: Node) -> str:
    v = n.attrs["value"].array.item()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v != v:
        return f"(({c_type(n.dtype)})_nan())"
    if isinstance(v, float) and abs(v) == float("inf"):
        return f"(({c_type(n.dtype)}){'-' if v < 0 else ''}_inf())"
    return f"(({c_type(n.dtype)}){v!r})"


@dataclass
class GpuKernelCode:
    """One CuPy kernel definition; `accesses` are its input arguments in order."""

    kind: str  # "elementwise" | "reduction"
    name: str
    in_params: str
    out_params: str
    operation: str = ""  # elementwise: the per-element statements
    map_expr: str = ""  # reduction
    reduce_expr: str = ""
    post_map_expr: str = ""
    identity: str = ""
    reduce_type: str = ""
    axes: tuple[int, ...] = ()
    preamble: str = PREAMBLE
    accesses: list[Access] = field(default_factory=list)
    shape: tuple[int, ...] = ()  # the shape its arguments are broadcast to
    then: GpuKernelCode | None = None  # a separate epilogue kernel, reading this one's result

    @property
    def source(self) -> str:
        if self.kind == "elementwise":
            text = (f"cupy.ElementwiseKernel(\n  in_params={self.in_params!r},\n  out_params="
                    f"{self.out_params!r},\n  name={self.name!r},\n  operation='''\n"
                    f"{self.operation}''')")
        else:
            text = (f"cupy.ReductionKernel(\n  in_params={self.in_params!r},\n  out_params="
                    f"{self.out_params!r},\n  map_expr={self.map_expr!r},\n  reduce_expr="
                    f"{self.reduce_expr!r},\n  post_map_expr={self.post_map_expr!r},\n  identity="
                    f"{self.identity!r},\n  reduce_type={self.reduce_type!r},\n  name="
                    f"{self.name!r})  # called with axis={self.axes}")
        text = "// preamble\n" + self.preamble + "\n" + text
        return text + ("\n\n// then\n" + self.then.source if self.then else "")


class _Values:
    """Names the C expression of each body value at a point of one phase's shape."""

    def __init__(self, plan: KernelPlan, shape: tuple[int, ...]) -> None:
        self.plan, self.shape = plan, shape
        self.accesses: list[Access] = []
        self.lines: list[str] = []

    def arg(self, a: Access) -> str:
        if a not in self.accesses:
            self.accesses.append(a)
        return f"a{self.accesses.index(a)}"

    def of(self, i: int) -> str:
        n = self.plan.body[i]
        if n.op == "parameter":
            return self.arg(param_access(self.plan, n, self.shape))
        if n.op == "broadcast_in_dim" and self.plan.body[n.inputs[0]].op == "parameter":
            return self.arg(broadcast_access(self.plan, n))
        if n.op == "broadcast_in_dim":
            return self.of(n.inputs[0])
        return f"v{i}"

    def emit(self, nodes: tuple[Node, ...], skip: Node | None = None) -> None:
        for n in nodes:
            if n is skip or n.op == "broadcast_in_dim":
                continue
            if n.op == "constant":
                self.lines.append(f"const {c_type(n.dtype)} v{n.id} = {literal(n)};")
                continue
            if n.op not in EXPR:
                raise PlanError(f"{n.op} has no CUDA form in the GPU code generator")
            expr = EXPR[n.op]([self.of(i) for i in n.inputs], n)
            self.lines.append(f"const {c_type(n.dtype)} v{n.id} = ({c_type(n.dtype)}){expr};")

    def params(self) -> str:
        body = self.plan.body
        return ", ".join(f"{cupy_type(body[body.params[a.param]].dtype)} a{k}"
                         for k, a in enumerate(self.accesses))


def generate(plan: KernelPlan, name: str) -> GpuKernelCode:
    out_t = plan.output.dtype
    if plan.reduce is None:
        vals = _Values(plan, plan.out_shape)
        vals.emit(plan.prologue + plan.epilogue)
        vals.lines.append(f"out0 = {vals.of(plan.output.id)};")
        return GpuKernelCode("elementwise", name, vals.params(), f"{cupy_type(out_t)} out0",
                             operation="\n".join(vals.lines) + "\n", accesses=vals.accesses,
                             shape=plan.out_shape)
    red = plan.reduce
    kind = REDUCE_COMBINE[red.op]
    pro = _Values(plan, plan.loop_shape)
    pro.emit(plan.prologue)
    args = [f"a{k}" for k in range(len(pro.accesses))]
    signature = ", ".join(f"{c_type(plan.body[plan.body.params[a.param]].dtype)} a{k}"
                          for k, a in enumerate(pro.accesses))
    rt = c_type(red.dtype)
    func = (f"__device__ {rt} {name}_map({signature}) {{\n  " + "\n  ".join(pro.lines)
            + f"\n  return {pro.of(red.inputs[0])};\n}}\n")
    code = GpuKernelCode("reduction", name, pro.params(), f"{cupy_type(out_t)} out0",
                         map_expr=f"{name}_map({', '.join(args)})", reduce_expr=REDUCE_EXPR[kind],
                         identity=identity(kind, red.dtype), reduce_type=rt,
                         axes=plan.reduced_axes, preamble=PREAMBLE + func,
                         accesses=pro.accesses, shape=plan.loop_shape)
    epi = _Values(plan, plan.out_shape)
    epi.lines.append(f"const {rt} v{red.id} = r;")
    epi.emit(plan.epilogue)
    if not epi.accesses:  # reads only the reduced value and constants: the post-map
        epi.lines[0] = f"const {rt} v{red.id} = r;"
        ot = c_type(out_t)
        code.preamble += (f"__device__ {ot} {name}_post({rt} r) {{\n  " + "\n  ".join(epi.lines)
                          + f"\n  return {epi.of(plan.output.id)};\n}}\n")
        code.post_map_expr = f"out0 = {name}_post(a)"
        return code
    code.out_params = f"{cupy_type(red.dtype)} out0"
    code.post_map_expr = "out0 = a"
    then = _Values(plan, plan.out_shape)
    then.lines.append(f"const {rt} v{red.id} = r;")
    then.emit(plan.epilogue)
    then.lines.append(f"out0 = {then.of(plan.output.id)};")
    code.then = GpuKernelCode("elementwise", f"{name}_epilogue",
                              f"{cupy_type(red.dtype)} r" + (", " + then.params() if then.params() else ""),
                              f"{cupy_type(out_t)} out0", operation="\n".join(then.lines) + "\n",
                              accesses=then.accesses, shape=plan.out_shape)
    return code
