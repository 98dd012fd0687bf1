"""The numba (Python) scalar form of every elementwise op, as the CPU kernel generator
(kernel_codegen.py) writes one element of it: op name -> form (backends/codegen/scalar_form.py
says what a form is), or FALLS_BACK where the generator leaves the op to the reference.

Helper names in the forms (`exp32`, `idiv`, `to_int`, ...) are the kernels' runtime
helpers, public in cpu/scalar_helpers.py and imported by numba_dialect.PRELUDE.
"""

from __future__ import annotations

from typing import Any

from ...ir import dtypes
from ..codegen.scalar_form import COMMON, FALLS_BACK, by_dtype, either, scalar_forms, select_chain


def _f32_or(f32_form: str, other: str) -> Any:
    """A form for float32 results (a vectorizable helper of the CPU kernels) and another for
    the rest."""
    return either(lambda n: n.dtype == "f32", f32_form, other)


def _select(a: list[str], n: Any) -> str:
    pred, *cases = a
    if len(cases) == 2:
        return f"({cases[1]} if {pred} else {cases[0]})"
    return select_chain(cases, lambda k, case, rest: f"({case} if {pred} == {k} else {rest})")


def _convert(a: list[str], n: Any) -> str:
    new = n.attrs["new_dtype"]
    if dtypes.is_bool(new):
        return f"({a[0]} != 0)"
    if not dtypes.is_int(new):
        return a[0]
    info = dtypes.iinfo(new)  # to_int saturates a float at these, wraps an int
    return f"to_int({a[0]}, {info.min}, {info.max}, np.{dtypes.to_numpy(new).name})"


def _bits(n: Any) -> int:
    return 8 * dtypes.itemsize(n.dtype)


def _in_width(a: list[str], n: Any) -> str:
    """Whether the shift amount a[1] is in range for the result's width."""
    return f"(0 <= {a[1]} < {_bits(n)})"


def _np(dtype: str) -> str:
    return f"np.{dtypes.to_numpy(dtype).name}"


def _shift_left(a: list[str], n: Any) -> str:
    # (a typed zero: numba unifies uint64 with an int literal as float64)
    return f"(({a[0]} << {a[1]}) if {_in_width(a, n)} else {_np(n.dtype)}(0))"


def _shift_right_arithmetic(a: list[str], n: Any) -> str:
    return (f"{_np(n.dtype)}(np.int{_bits(n)}({a[0]}) >> "
            f"({a[1]} if {_in_width(a, n)} else {_bits(n) - 1}))")


def _shift_right_logical(a: list[str], n: Any) -> str:
    t, u = _np(n.dtype), f"np.uint{_bits(n)}"
    return f"({t}({u}({a[0]}) >> {u}({a[1]})) if {_in_width(a, n)} else {t}(0))"


# Ops whose form calls a NumPy function: op -> the function's name in NumPy.
_NUMPY = {"exp2": "exp2", "log": "log", "log1p": "log1p", "expm1": "expm1", "sqrt": "sqrt",
          "cbrt": "cbrt", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "arcsin",
          "acos": "arccos", "atan": "arctan", "sinh": "sinh", "cosh": "cosh",
          "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh", "floor": "floor",
          "ceil": "ceil", "abs": "abs", "sign": "sign", "is_finite": "isfinite", "pow": "power",
          "atan2": "arctan2"}

FORMS = scalar_forms({
    **COMMON,
    **{op: f"np.{fn}" for op, fn in _NUMPY.items()},
    # float32 exp and tanh through vectorizable helpers (XLA's own tanh approximation)
    "exp": _f32_or("exp32({0})", "np.exp({0})"),
    "tanh": _f32_or("tanh32({0})", "np.tanh({0})"),
    "logistic": _f32_or("(1 / (1 + exp32(-{0})))", "(1 / (1 + np.exp(-{0})))"),
    "rsqrt": "(1 / np.sqrt({0}))",
    "erf": "math.erf", "erfc": "math.erfc", "erf_inv": "erfinv", "lgamma": "math.lgamma",
    "not": either(lambda n: n.dtype == "pred", "(not {0})", "(~{0})"),
    "round": either(lambda n: n.attrs.get("rounding_method", 0), "np.rint({0})", "round_away({0})"),
    "rem": by_dtype("irem({0}, {1})", "np.fmod({0}, {1})"),
    "nextafter": FALLS_BACK,
    "select_n": _select,
    "convert_element_type": _convert,
    "shift_left": _shift_left,
    "shift_right_arithmetic": _shift_right_arithmetic,
    "shift_right_logical": _shift_right_logical,
    "population_count": FALLS_BACK,
    "bitcast_convert_type": lambda a, n: f"bitcast({a[0]}, {_np(n.attrs['new_dtype'])})",
})
