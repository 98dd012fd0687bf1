"""Scalar forms: how a kernel generator writes one element of an elementwise op.

A form is a function (operand expressions, node) -> expression text. Each generator keeps a
table of them, op name -> form (backends/cpu/numba_forms.py, backends/gpu/cuda_forms.py),
written with the shorthands `scalar_expr` reads: a string holding `{` is a format template over
the operands, any other string a function's name; FALLS_BACK marks an op the generator leaves
to the reference interpreter, as a visible choice. Every elementwise row of the op table has a
form or FALLS_BACK in every table (`missing_forms`; the tests check it).

`COMMON` holds the forms that Python and C spell alike (operators, and the runtime helpers
every dialect provides under one name: maximum, minimum, idiv); a
table starts from it. `C_MATH`: the ops that are a function of C's math library.
`scalar_form(g, n, forms)` is what a generator asks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ...ir import dtypes
from ...ir.graph import Attrs, Graph, Node, Type
from ...ir.ops import OPS
from ...ir.traits import OpKind

# A code generator's scalar form of an elementwise op: (operand expressions, node) -> expression.
ScalarExpr = Callable[[list[str], Any], str]


class _FallsBack:
    """The explicit mark that a code generator has no scalar form for an op: kernels holding
    it run on the reference interpreter, as a visible choice."""

    def __repr__(self) -> str:
        return "FALLS_BACK"


FALLS_BACK: Any = _FallsBack()


def call(fn: str) -> ScalarExpr:
    """`fn(a, b, ...)`."""
    return lambda a, n: f"{fn}({', '.join(a)})"


def fmt(template: str) -> ScalarExpr:
    """A format string over the operand expressions: fmt("({0} + {1})")."""
    return lambda a, n: template.format(*a)


def either(test: Callable[[Any], bool], form: str, other: str) -> ScalarExpr:
    """Template `form` for the nodes `test` holds for, `other` for the rest."""
    return lambda a, n: (form if test(n) else other).format(*a)


def by_dtype(int_form: str, float_form: str) -> ScalarExpr:
    """One template for integer results, another for the rest."""
    return either(lambda n: dtypes.is_int(n.dtype), int_form, float_form)


def select_chain(cases: list[str], case: Callable[[int, str, str], str]) -> str:
    """A select over k as nested conditionals: the last case, wrapped from the back in
    `case(k, cases[k], rest)` (the dialect's "cases[k] if the selector is k, else rest")."""
    expr = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        expr = case(k, cases[k], expr)
    return expr


def scalar_expr(form: ScalarExpr | str | Any) -> ScalarExpr | Any:
    """A shorthand as a ScalarExpr: a string holding `{` is a template (fmt), any other
    string a function name (call); callables and FALLS_BACK stay as they are."""
    if isinstance(form, str):
        return fmt(form) if "{" in form else call(form)
    return form


def scalar_forms(table: Mapping[str, ScalarExpr | str | Any]) -> Mapping[str, ScalarExpr | Any]:
    """A generator's table of forms (shorthands allowed), read-only, every form a ScalarExpr
    or FALLS_BACK."""
    return MappingProxyType({op: scalar_expr(f) for op, f in table.items()})


def _integer_pow(a: list[str], n: Any) -> str:
    y = int(n.attrs["y"])
    prod = " * ".join([a[0]] * abs(y)) if y else "1"
    return f"(1 / ({prod}))" if y < 0 else f"({prod})"


# The forms Python and C spell alike: operators, and the helpers both runtimes name alike.
COMMON: Mapping[str, Any] = {
    "neg": "(-{0})", "square": "({0} * {0})", "integer_pow": _integer_pow, "copy": "{0}",
    "add": "({0} + {1})", "add_any": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
    "eq": "({0} == {1})", "ne": "({0} != {1})", "lt": "({0} < {1})", "le": "({0} <= {1})",
    "gt": "({0} > {1})", "ge": "({0} >= {1})",
    "and": "({0} & {1})", "or": "({0} | {1})", "xor": "({0} ^ {1})",
    # the helpers every dialect's runtime provides under these names (codegen/dialect.py)
    "div": by_dtype("idiv({0}, {1})", "({0} / {1})"),
    "max": "maximum", "min": "minimum", "clamp": "minimum(maximum({1}, {0}), {2})",
    # what no code generator writes: kernels holding these run on the reference
    "digamma": FALLS_BACK, "reduce_precision": FALLS_BACK,
}

# The ops that are a C math library function (op -> the form calling it): CUDA's forms, and
# the functions libmvec (the CPU kernels' vector math) has under the same names.
C_MATH: Mapping[str, ScalarExpr] = scalar_forms({
    **{op: op for op in ("exp", "exp2", "log", "log1p", "expm1", "sqrt", "rsqrt", "cbrt", "sin",
                         "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
                         "atanh", "tanh", "erf", "erfc", "lgamma", "floor", "ceil", "pow",
                         "atan2", "nextafter")},
    "erf_inv": "erfinv", "is_finite": "isfinite",
})

# Where an op's forms hold for only some of its nodes: (input types, attrs) -> whether they
# hold for this node; where not, a generator falls back as for FALLS_BACK. A kernel loads a
# bool as `byte != 0`: the unsigned results of converting one take the reference.
TAKES: Mapping[str, Callable[[Sequence[Type], Attrs], bool]] = {
    "convert_element_type": lambda ts, a: not (ts[0].dtype == "pred"  # type: ignore[union-attr]
                                               and dtypes.is_unsigned(a["new_dtype"])),
}


def scalar_form(g: Graph, n: Node, forms: Mapping[str, ScalarExpr | Any]) -> ScalarExpr | Any:
    """Node `n`'s scalar form in the table `forms` (its inputs' types read from graph `g`),
    or FALLS_BACK where the table has none or the form does not hold for this node (TAKES)."""
    takes = TAKES.get(n.op)
    if takes is not None and not takes([g[i].type for i in n.inputs], n.attrs):
        return FALLS_BACK
    return forms.get(n.op, FALLS_BACK)


def missing_forms(forms: Mapping[str, Any]) -> list[str]:
    """The elementwise rows of the op table that `forms` gives neither a form nor FALLS_BACK."""
    return sorted(name for name, row in OPS.items()
                  if row.kind == OpKind.ELEMENTWISE and name not in forms)
