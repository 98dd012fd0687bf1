"""The CUDA C++ dialect: how generated GPU kernels spell types, literals and statements, and
the device helpers (`PREAMBLE`) every kernel source starts with."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...ir import dtypes
from ...ir.graph import Node
from ...ir.traits import MONOIDS
from ..codegen.dialect import Dialect
from ..codegen.kernel_plan import PlanError
from .cuda_forms import FORMS

# How NVRTC compiles every generated kernel. No fused multiply-add contraction: x*x - y must
# round twice, as the reference and JAX do (CuPy's own -ftz=true still flushes subnormals;
# options cannot undo it). A RawModule's options (grid reductions, row kernels, map-reduce
# kernels, routines) add C++14: CuPy adds none.
NVRTC_OPTIONS = ("--fmad=false",)
RAW_MODULE_OPTIONS = ("--std=c++14", *NVRTC_OPTIONS)

# Device helpers every kernel may call (NaN-propagating maximum/minimum as np.maximum; lax's
# integer division and remainder, which truncate and give 0 for a zero divisor; conversion to
# an integer type T as XLA converts: a float truncates, NaN gives 0 and out-of-range values
# saturate at T's bounds, compared in F where the max may round up to a power of two; an
# integer or bool operand, for which F(1.5) == F(1), wraps).
# top_k_key: lax.top_k's total order as a double (ir/ops.top_k_key): +NaN, +inf, ..., -inf, -NaN
PREAMBLE = """template <typename T> __device__ T maximum(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> __device__ T minimum(T a, T b) { return (a < b || a != a) ? a : b; }
template <typename T> __device__ T idiv(T a, T b) { return b == 0 ? T(-1) : a / b; }
template <typename T> __device__ T irem(T a, T b) { return b == 0 ? a : a % b; }
template <typename T, typename F> __device__ T to_int(F x) {
  if (F(1.5) == F(1)) return T(x);
  const bool sig = T(-1) < T(0);
  const T hi = sig ? T(~0ULL >> (65 - 8 * sizeof(T))) : T(~0ULL);
  const T lo = sig ? T(-hi - 1) : T(0);
  return x != x ? T(0) : x >= F(hi) ? hi : x <= F(lo) ? lo : T(x);
}
__device__ inline double _inf() { return __longlong_as_double(0x7ff0000000000000LL); }
__device__ inline double _nan() { return __longlong_as_double(0x7ff8000000000000LL); }
template <typename T> __device__ double top_k_key(T x) {
  const double v = (double)x;
  if (v != v) return signbit(v) ? -_inf() : _inf();
  if (v == 0.0 && signbit(v)) return -4.9406564584124654e-324;
  return v == _inf() ? 1.7976931348623157e308 : v == -_inf() ? -1.7976931348623157e308 : v;
}
"""


def c_type(d: str) -> str:
    if d not in dtypes.C_TYPES:
        raise PlanError(f"element type {d} has no CUDA kernel here")
    return dtypes.C_TYPES[d]


def cupy_type(d: str) -> str:
    """The dtype name a CuPy parameter list uses ('float32 a0')."""
    c_type(d)
    return "bool" if d == "pred" else dtypes.to_numpy(d).name


def c_int(v: int, d: str) -> str:
    """An integer literal of element type `d` that C reads at that width (the i64 minimum and
    unsigned 64-bit values need their suffixes)."""
    if d in ("i64", "u64") or abs(v) >= 2**31:
        if v == -(2**63):
            return "(-9223372036854775807LL - 1)"
        return f"{v}{'ULL' if d.startswith('u') else 'LL'}"
    return str(v)


class CudaDialect(Dialect):
    name = "cuda"
    forms = FORMS
    indent = "  "
    helpers = PREAMBLE

    def type_name(self, d: str) -> str:
        return c_type(d)

    def literal(self, v: object, d: str) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float) and v != v:
            return f"(({c_type(d)})_nan())"
        if isinstance(v, float) and math.isinf(v):
            return f"(({c_type(d)}){'-' if v < 0 else ''}_inf())"
        if isinstance(v, int):
            return c_int(v, d)
        return f"(({c_type(d)}){v!r})"

    def identity(self, kind: str, d: str) -> str:
        v = MONOIDS[kind].identity_value(d)  # (a float's infinity without a cast)
        return ("-_inf()" if v < 0 else "_inf()") if isinstance(v, float) and math.isinf(v) \
            else self.literal(v, d)

    def cast(self, expr: str, d: str) -> str:
        return f"({c_type(d)})({expr})"

    def exp64(self, x: str) -> str:
        return f"exp({x})"


    def index(self, array: str, index: Sequence[str], shape: Sequence[int]) -> str:
        terms = [v if math.prod(shape[k + 1:]) == 1 else f"{v} * {math.prod(shape[k + 1:])}"
                 for k, v in enumerate(index) if v != "0"]
        return f"{array}[{' + '.join(terms) or '0'}]"

    DEFINE, DECLARE, ASSIGN = "const {1} {0} = {2};", "{1} {0} = {2};", "{0} = {1};"
    IF, ELIF, ELSE, WHILE, END = "if ({0}) {{", "}} else if ({0}) {{", "} else {", "while ({0}) {{", "}"
    BREAK, TRUE, NOT, AND, OR, SELECT = "break;", "true", "!({0})", " && ", " || ", "{0} ? {1} : {2}"

    FLOORDIV = "({0} / {1})"

    def for_range(self, var: str, start: str, stop: str, step: str = "1") -> str:
        step = f"++{var}" if step == "1" else f"{var} += {step}"
        return f"for (long {var} = {start}; {var} < {stop}; {step}) {{"

    def constant(self, n: Node) -> str:
        """The literal of a constant node."""
        v = n.attrs["value"].array.item()
        return self.literal(v, n.dtype) if isinstance(v, (bool, float)) else f"(({c_type(n.dtype)}){v!r})"


CUDA = CudaDialect()
