"""The CUDA C++ scalar form of every elementwise op, as the GPU kernel generator (codegen.py)
writes one element of it: op name -> form (backends/codegen/scalar_form.py says what a form
is), or FALLS_BACK where the generator leaves the op to the reference.

Helper names in the forms (`idiv`, `to_int`, `maximum`, ...) are the kernels' device
helpers, defined in cuda_dialect.PREAMBLE; the math functions are C's (CUDA's math library).
"""

from __future__ import annotations

from typing import Any

from ...ir import dtypes
from ..codegen.scalar_form import C_MATH, COMMON, FALLS_BACK, by_dtype, either, scalar_forms, select_chain


def _select(a: list[str], n: Any) -> str:
    pred, *cases = a
    return select_chain(cases, lambda k, case, rest: f"({pred} == {k} ? {case} : {rest})")


def _convert(a: list[str], n: Any) -> str:
    new = n.attrs["new_dtype"]
    if new == "pred":
        return f"({a[0]} != 0)"
    c = dtypes.C_TYPES.get(new, new)  # the CUDA generator rejects a type it lacks itself
    return f"to_int<{c}>({a[0]})" if dtypes.is_int(new) else f"(({c}){a[0]})"


def _bits(n: Any) -> int:
    return 8 * dtypes.itemsize(n.dtype)


def _in_width(a: list[str], n: Any) -> str:
    """Whether the shift amount a[1] is in range for the result's width."""
    return f"(0 <= {a[1]} && {a[1]} < {_bits(n)})"


def _shift_right_arithmetic(a: list[str], n: Any) -> str:
    signed = dtypes.C_TYPES["i" + n.dtype[1:]]
    return (f"(({dtypes.C_TYPES[n.dtype]})(({signed}){a[0]} >> "
            f"({_in_width(a, n)} ? {a[1]} : {_bits(n) - 1})))")


def _shift_right_logical(a: list[str], n: Any) -> str:
    c = dtypes.C_TYPES[n.dtype]
    u = c if c.startswith("unsigned") else f"unsigned {c.replace('signed ', '')}"
    return f"({_in_width(a, n)} ? ({c})(({u}){a[0]} >> {a[1]}) : ({c})0)"


def _popcount(a: list[str], n: Any) -> str:
    c = dtypes.C_TYPES[n.dtype]
    fn = "__popcll" if dtypes.itemsize(n.dtype) == 8 else "__popc"
    cast = "unsigned long long" if fn == "__popcll" else "unsigned int"
    mask = "" if dtypes.itemsize(n.dtype) >= 4 else f" & {(1 << _bits(n)) - 1}u"
    return f"(({c}){fn}(({cast})({a[0]}){mask}))"


FORMS = scalar_forms({
    **COMMON,
    **C_MATH,
    "abs": "({0} < 0 ? -{0} : {0})",
    "sign": "(({0} > 0) - ({0} < 0))",
    "logistic": "(1 / (1 + exp(-{0})))",
    "not": either(lambda n: n.dtype == "pred", "(!{0})", "(~{0})"),
    "round": either(lambda n: n.attrs.get("rounding_method", 0), "rint({0})", "round({0})"),
    "rem": by_dtype("irem({0}, {1})", "fmod({0}, {1})"),
    "select_n": _select,
    "convert_element_type": _convert,
    "shift_left": lambda a, n: f"({_in_width(a, n)} ? ({a[0]} << {a[1]}) : 0)",
    "shift_right_arithmetic": _shift_right_arithmetic,
    "shift_right_logical": _shift_right_logical,
    "population_count": _popcount,
    "bitcast_convert_type": FALLS_BACK,
})
