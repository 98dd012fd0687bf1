"""THE op table: every op is one row declaring its name, arity, attributes, shape/dtype rule,
NumPy reference, FLOP count and JAX lowering, and what the op *is* (ir/traits.py): its kind,
whether it is a view, the monoid it folds with, what the split and fuse passes may do with it,
each code generator's scalar form (or the explicit mark that it falls back) and the HLO
opcodes that import as it. Planners, passes, code generators and importers read these rows
rather than listing ops by name.

Semantics follow `jax.lax` (which follows XLA): integer `div` truncates toward zero, `rem`
is C's fmod, `round` has a rounding method, `select_n` picks `cases[pred]`. The table drives
the op tests (every row is checked against its `jax.lax` lowering on random inputs), the
reference interpreter, the verifier, the cost model and the JAX backend.

Region ops (`kernel`, `loop`) are in ir/region_ops.py, the rows of imported HLO (`opaque`,
`tuple`, `call`, `while`, `conditional`) in ir/hlo_rows.py, and the rows of what real models
emit in one module per family: ir/ops_indexing.py (gather, scatter), ops_conv.py, ops_window.py
(pooling and its gradients), ops_random.py (PRNG, bit ops), ops_linalg.py. This module imports
them all at its end, so OPS is complete whenever it is imported.

For the helper modules (ops_*.py, control_ops.py, region_ops.py, hlo_rows.py), the public names
they declare rows with (everything else here with a leading underscore is this module's own):

    register            add one OpDef row to OPS
    pointwise           register an elementwise row (split MAP, fuse POINTWISE, scalar forms)
    elementwise_infer   the shape/dtype rule of an elementwise op
    tensor_type         an operand's type as a TensorType, or OpError if it is a tuple
    per_element_flops   the FLOP rule "k per result element"
    no_flops            the FLOP rule of rows that only move data: 0
    sample_array        a random input array for a row's `sample` (the op tests)
    pad_reference       the NumPy reference of `pad`, which conv and window rows reuse
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import ml_dtypes
import numpy as np
import scipy.special as sp

from . import dtypes
from .graph import Attrs, Graph, Literal, Node, TensorType, TupleType, Type
from .traits import (
    DIALECTS,
    FALLS_BACK,
    MONOIDS,
    Emit,
    Fuse,
    Monoid,
    OpKind,
    ScalarExpr,
    Split,
    View,
    by_dtype,
    scalar_expr,
)

Ref = Callable[..., Any]
Infer = Callable[[Sequence[TensorType], Attrs], Type]
Flops = Callable[[Sequence[TensorType], Type, Attrs], int]
SplitAxes = Callable[[Sequence[TensorType], Type, Attrs], dict[int, tuple[int | None, ...]]]


class OpError(TypeError):
    """An op applied to inputs or attributes it does not accept."""


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: OpKind
    arity: int | None  # None: variadic
    attrs: tuple[str, ...]
    infer: Infer
    ref: Ref
    flops: Flops
    jax: Callable[..., Any] | None = None  # (*inputs, **attrs) -> jax value(s)
    sample: Callable[[np.random.Generator], tuple[list[np.ndarray], dict]] | None = None
    # Whether the result aliases the input's buffer (as the NumPy reference's result does).
    view: View = View.NONE
    # How partial results over a reduced axis merge: a reduction's fold, dot_general's
    # contraction (add), argmax/argmin's values (max/min; their indices follow).
    monoid: Monoid | None = None
    split: Split = Split.NONE  # what the split planner may do with it
    # For a MAP op whose axis rule the row states itself (gather, conv, windows): (input
    # types, result type, attrs) -> {result axis: per-operand axis (None: passed whole)}.
    split_axes: SplitAxes | None = None
    fuse: Fuse = Fuse.NONE  # what the fuse pass may do with it
    emit: Emit = Emit.CALL  # how the CPU program generator writes it
    # Its NumPy form as program text, where it beats calling `ref` (shapes are known when the
    # program is written, so a dot becomes the one matmul its ref would reach; `matmul` is
    # np.matmul, or a backend's function of the same semantics bound under that name):
    # (operand expressions, input types, result type, attrs) -> expression, or None where the
    # form declines (the program calls `ref` then). None: call `ref`.
    program: Callable[[list[str], Sequence[Type], Type, Attrs], str | None] | None = None
    # Per code-generator dialect (traits.DIALECTS): the scalar form, or FALLS_BACK. Every
    # elementwise row addresses every dialect.
    scalar: Mapping[str, ScalarExpr | Any] = field(default_factory=dict)
    # Whether the scalar forms hold for a node with these input types and attrs (None: for
    # every node the row takes). Where not, code generators fall back as for FALLS_BACK.
    scalar_takes: Callable[[Sequence[Type], Attrs], bool] | None = None
    # The HLO opcodes (with the attributes they imply) that import as this op, elementwise.
    hlo: tuple[tuple[str, dict[str, Any]], ...] = ()
    optional: tuple[str, ...] = ()  # attributes it lists that may be absent (lax's defaults)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", OpKind(self.kind))
        object.__setattr__(self, "scalar", MappingProxyType(
            {d: scalar_expr(f) for d, f in self.scalar.items()}))

    def check_arity(self, n: int) -> None:
        if self.arity is not None and n != self.arity:
            raise OpError(f"{self.name} takes {self.arity} inputs, got {n}")


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> None:
    """Add `op` to OPS; a helper module calls it once per row, at import. A name may be
    registered once, and an elementwise row must give every dialect a scalar form."""
    assert op.name not in OPS, op.name
    assert op.kind != OpKind.ELEMENTWISE or set(op.scalar) == set(DIALECTS), op.name
    OPS[op.name] = op


def scalar_form(g: Graph, n: Node, dialect: str) -> ScalarExpr | Any:
    """Node `n`'s scalar form in `dialect` (its inputs' types read from graph `g`), or
    FALLS_BACK where the row has none or says its forms do not hold for this node."""
    row = OPS[n.op]
    form = row.scalar.get(dialect, FALLS_BACK)
    if row.scalar_takes is not None and not row.scalar_takes([g[i].type for i in n.inputs],
                                                              n.attrs):
        return FALLS_BACK
    return form


def get(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise OpError(f"unknown op {name!r}") from None


# ---------------------------------------------------------------- shape/dtype rule helpers


def tensor_type(t: Type, what: str) -> TensorType:
    """`t` if it is a tensor, else OpError saying `what` must be one: shape rules call it on
    operands (or region outputs) that could be tuples."""
    if not isinstance(t, TensorType):
        raise OpError(f"{what} must be a tensor, got tuple {t}")
    return t


def _same(op: str, ts: Sequence[TensorType]) -> TensorType:
    """Elementwise ops: rank-0 operands broadcast, and (as lax does) so do size-1 dimensions
    of operands of equal rank."""
    shaped = [t for t in ts if t.shape != ()]
    shape: tuple[int, ...] = ()
    if shaped:
        rank = shaped[0].rank
        dims = []
        for k in range(rank):
            sizes = {t.shape[k] for t in shaped if t.rank == rank}
            if any(t.rank != rank for t in shaped) or len(sizes - {1}) > 1:
                raise OpError(f"{op}: operand shapes differ: {', '.join(str(t) for t in ts)}")
            dims.append(max(sizes - {1}, default=1))
        shape = tuple(dims)
    dts = {t.dtype for t in ts}
    if len(dts) != 1:
        raise OpError(f"{op}: operand element types differ: {', '.join(str(t) for t in ts)}")
    return TensorType(shape, ts[0].dtype)


def elementwise_infer(out_dtype: str | None = None, require: Callable[[str], bool] | None = None,
                      what: str = "") -> Infer:
    """The shape/dtype rule of an elementwise op: operands broadcast as lax does and share an
    element type, which must pass `require` (else OpError: "is not {what}"); the result has
    that shape and `out_dtype`, or the operands' element type."""

    def infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
        t = _same("elementwise op", [tensor_type(x, "operand") for x in ts])
        if require is not None and not require(t.dtype):
            raise OpError(f"operand element type {t.dtype} is not {what}")
        return TensorType(t.shape, out_dtype or t.dtype)

    return infer


def _axes(attrs: Attrs, rank: int, key: str = "axes") -> tuple[int, ...]:
    axes = tuple(attrs[key])
    for a in axes:
        if not 0 <= a < rank:
            raise OpError(f"{key} {axes} out of range for rank {rank}")
    if len(set(axes)) != len(axes):
        raise OpError(f"{key} {axes} repeats an axis")
    return axes


def _reduce_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    (t,) = ts
    axes = _axes(attrs, t.rank)
    return TensorType(tuple(d for i, d in enumerate(t.shape) if i not in axes), t.dtype)


def _is_num(d: str) -> bool:
    return not dtypes.is_bool(d)


def _is_float(d: str) -> bool:
    return dtypes.is_float(d) or d in ("c64", "c128")


def _is_intlike(d: str) -> bool:
    return dtypes.is_int(d) or dtypes.is_bool(d)


# ---------------------------------------------------------------- cost helpers


def per_element_flops(k: int) -> Flops:
    """The FLOP rule of a row that costs `k` per element of its result."""

    def flops(ins: Sequence[TensorType], out: Type, attrs: Attrs) -> int:
        return k * out.size  # type: ignore[union-attr]

    return flops


def no_flops(ins: Sequence[TensorType], out: Type, attrs: Attrs) -> int:
    """The FLOP rule of a row that only moves, selects or relabels data: 0."""
    return 0


def _reduce_flops(ins: Sequence[TensorType], out: Type, attrs: Attrs) -> int:
    return max(ins[0].size - out.size, 0)  # type: ignore[union-attr]


# ---------------------------------------------------------------- samples for the op tests


def sample_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "f32",
                 low: float = -2.0, high: float = 2.0) -> np.ndarray:
    """A random array for a row's `sample` (the op tests' inputs): floats uniform in
    [low, high), integers a little wider (non-negative if unsigned), pred coin flips."""
    npd = dtypes.to_numpy(dtype)
    if dtypes.is_bool(dtype):
        return rng.random(shape) < 0.5
    if dtypes.is_int(dtype):
        lo = 0 if dtype.startswith("u") else int(low) - 3
        return rng.integers(lo, int(high) + 4, size=shape).astype(npd)
    return rng.uniform(low, high, size=shape).astype(npd)


def _unary_sample(dtype: str = "f32", low: float = -2.0, high: float = 2.0):
    return lambda rng: ([sample_array(rng, (3, 4), dtype, low, high)], {})


def _binary_sample(dtype: str = "f32", low: float = -2.0, high: float = 2.0):
    return lambda rng: ([sample_array(rng, (3, 4), dtype, low, high),
                         sample_array(rng, (3, 4), dtype, low, high)], {})


# ---------------------------------------------------------------- elementwise rows


def _lax(name: str) -> Callable[..., Any]:
    def call(*xs: Any, **attrs: Any) -> Any:
        import jax.lax as lax

        return getattr(lax, name)(*xs, **attrs)

    return call


def pointwise(name: str, arity: int | None, attrs: tuple[str, ...], infer: Infer, ref: Ref,
              flops: Flops, jax: Callable[..., Any], sample: Any, *, expr: Any = None,
              hlo: str | tuple[tuple[str, dict[str, Any]], ...] = (),
              optional: tuple[str, ...] = (), scalar_takes: Any = None, program: Any = None,
              **dialects: Any) -> None:
    """Register an elementwise row: it maps chunks to chunks and fuses pointwise. Scalar forms, as
    traits.scalar_expr reads them: `expr` is shared by every dialect; a keyword named after a
    dialect (numba=..., cuda=...) gives that dialect's, and FALLS_BACK says it has none;
    `scalar_takes` (OpDef's) narrows them to some nodes. `hlo`: an opcode name, or (opcode,
    attrs) pairs. `program`: OpDef's."""
    assert set(dialects) <= set(DIALECTS), f"{name}: unknown dialects {set(dialects) - set(DIALECTS)}"
    forms = {d: dialects.get(d, expr) for d in DIALECTS}
    missing = [d for d, f in forms.items() if f is None]
    assert not missing, f"{name}: no scalar form for {missing} (give one, or FALLS_BACK)"
    register(OpDef(name, OpKind.ELEMENTWISE, arity, attrs, infer, ref, flops, jax, sample,
                   split=Split.MAP, fuse=Fuse.POINTWISE, scalar=forms,
                   hlo=((hlo, {}),) if isinstance(hlo, str) else hlo, optional=optional,
                   scalar_takes=scalar_takes, program=program))


def _unary(name: str, ref: Ref, cost: int = 1, lax_name: str | None = None,
           require: Callable[[str], bool] | None = _is_float, what: str = "floating-point",
           out: str | None = None, sample=None, **traits: Any) -> None:
    pointwise(name, 1, (), elementwise_infer(out, require, what), ref, per_element_flops(cost),
              _lax(lax_name or name), sample or _unary_sample(), **traits)


def _binary(name: str, ref: Ref, cost: int = 1, lax_name: str | None = None,
            require: Callable[[str], bool] | None = None, what: str = "",
            out: str | None = None, sample=None, **traits: Any) -> None:
    pointwise(name, 2, (), elementwise_infer(out, require, what), ref, per_element_flops(cost),
              _lax(lax_name or name), sample or _binary_sample(), **traits)


def _math(name: str, ref: Ref, cost: int = 4, np_name: str | None = None, c_name: str | None = None,
          **kw: Any) -> None:
    """A floating-point unary function: np.<np_name> under numba, C's <c_name> under CUDA."""
    _unary(name, ref, cost, numba=f"np.{np_name or name}", cuda=c_name or name, **kw)


def _round(x: np.ndarray, rounding_method: int = 0) -> np.ndarray:
    if rounding_method == 0:  # away from zero
        return np.sign(x) * np.floor(np.abs(x) + np.asarray(0.5, x.dtype))
    return np.round(x)


def _jax_round(x: Any, rounding_method: int = 0) -> Any:
    import jax.lax as lax

    return lax.round(x, lax.RoundingMethod(rounding_method))


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """lax.div: on integers it truncates toward zero, and x / 0 is -1 (all bits set), as XLA
    computes it."""
    if dtypes.is_int(dtypes.from_numpy(a.dtype)):  # (int4 too, not np.integer)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
            q = (np.sign(a) * np.sign(b) * q).astype(a.dtype)
            return np.where(b == 0, np.array(-1).astype(a.dtype), q)
    with np.errstate(divide="ignore", invalid="ignore"):
        return a / b


def _rem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's fmod; on integers x % 0 is x, as XLA computes it."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if dtypes.is_int(dtypes.from_numpy(a.dtype)):
            return np.where(b == 0, a, np.fmod(a, np.where(b == 0, 1, b)).astype(a.dtype))
        return np.fmod(a, b)


def _nonzero_sample(dtype: str):
    def sample(rng):
        a = sample_array(rng, (3, 4), dtype, -9, 9)
        magnitude = rng.integers(1, 6, size=(3, 4)) if dtypes.is_int(dtype) else rng.uniform(
            0.5, 5, size=(3, 4))
        b = (magnitude * np.where(rng.random((3, 4)) < 0.5, -1, 1)).astype(dtypes.to_numpy(dtype))
        return [a, b], {}

    return sample


def _lgamma(x: np.ndarray) -> np.ndarray:
    """lax.lgamma: scipy's gammaln, except lgamma(-inf) = inf, as XLA's (and C's)."""
    return np.where(x == -np.inf, np.inf, sp.gammaln(x))


def _digamma(x: np.ndarray) -> np.ndarray:
    """lax.digamma: scipy's, except at the pole 0 (either sign): NaN, as XLA's (as at the
    other poles, the negative integers)."""
    return np.where(x == 0, np.nan, sp.digamma(x))


def _not(a: list[str], n: Any) -> str:
    return f"(not {a[0]})" if n.dtype == "pred" else f"(~{a[0]})"


def _c_not(a: list[str], n: Any) -> str:
    return f"(!{a[0]})" if n.dtype == "pred" else f"(~{a[0]})"


def _integer_pow_expr(a: list[str], n: Any) -> str:
    y = int(n.attrs["y"])
    prod = " * ".join([a[0]] * abs(y)) if y else "1"
    return f"(1 / ({prod}))" if y < 0 else f"({prod})"


def _numba_round(a: list[str], n: Any) -> str:
    return f"np.rint({a[0]})" if n.attrs.get("rounding_method", 0) else f"round_away({a[0]})"


def _c_round(a: list[str], n: Any) -> str:
    return f"rint({a[0]})" if n.attrs.get("rounding_method", 0) else f"round({a[0]})"


_unary("neg", np.negative, require=_is_num, what="numeric", expr="(-{0})", hlo="negate")
def _f32_or(f32_form: str, other: str) -> Any:
    """A numba scalar form for float32 results (a vectorizable helper of the CPU kernels:
    backends/cpu/kernel_codegen.py) and another for the rest."""
    return lambda a, n: (f32_form if n.dtype == "f32" else other).format(*a)


# numba: float32 exp and tanh through vectorizable helpers (XLA's own tanh approximation)
_unary("exp", np.exp, 4, hlo="exponential", cuda="exp", numba=_f32_or("exp32({0})", "np.exp({0})"))
_math("exp2", np.exp2)
_math("log", np.log, sample=_unary_sample(low=0.1, high=3.0), hlo="log")
_math("log1p", np.log1p, sample=_unary_sample(low=-0.5, high=3.0), hlo="log-plus-one")
_math("expm1", np.expm1, hlo="exponential-minus-one")
_math("sqrt", np.sqrt, 2, sample=_unary_sample(low=0.1, high=3.0), hlo="sqrt")
_unary("rsqrt", lambda x: 1 / np.sqrt(x), 2, sample=_unary_sample(low=0.1, high=3.0),
       numba="(1 / np.sqrt({0}))", cuda="rsqrt", hlo="rsqrt")
_math("cbrt", np.cbrt, hlo="cbrt")
_unary("abs", np.abs, require=_is_num, what="numeric", numba="np.abs",
       cuda="({0} < 0 ? -{0} : {0})", hlo="abs")
_unary("sign", np.sign, require=_is_num, what="numeric", numba="np.sign",
       cuda="(({0} > 0) - ({0} < 0))", hlo="sign")
_math("sin", np.sin, hlo="sine")
_math("cos", np.cos, hlo="cosine")
_math("tan", np.tan, sample=_unary_sample(low=-1.2, high=1.2), hlo="tan")
_math("asin", np.arcsin, np_name="arcsin", sample=_unary_sample(low=-0.9, high=0.9))
_math("acos", np.arccos, np_name="arccos", sample=_unary_sample(low=-0.9, high=0.9))
_math("atan", np.arctan, np_name="arctan")
_math("sinh", np.sinh)
_math("cosh", np.cosh)
_math("asinh", np.arcsinh, np_name="arcsinh")
_math("acosh", np.arccosh, np_name="arccosh", sample=_unary_sample(low=1.1, high=3.0))
_math("atanh", np.arctanh, np_name="arctanh", sample=_unary_sample(low=-0.9, high=0.9))
_unary("tanh", np.tanh, 4, hlo="tanh", cuda="tanh", numba=_f32_or("tanh32({0})", "np.tanh({0})"))
_unary("logistic", sp.expit, 4, cuda="(1 / (1 + exp(-{0})))", hlo="logistic",
       numba=_f32_or("(1 / (1 + exp32(-{0})))", "(1 / (1 + np.exp(-{0})))"))
_unary("erf", sp.erf, 8, numba="math.erf", cuda="erf", hlo="erf")
_unary("erfc", sp.erfc, 8, numba="math.erfc", cuda="erfc")
_unary("erf_inv", sp.erfinv, 8, sample=_unary_sample(low=-0.9, high=0.9), numba="erfinv",
       cuda="erfinv")
_unary("lgamma", _lgamma, 8, sample=_unary_sample(low=0.1, high=3.0), numba="math.lgamma",
       cuda="lgamma")
_unary("digamma", _digamma, 8, sample=_unary_sample(low=0.1, high=3.0), expr=FALLS_BACK)
_math("floor", np.floor, 1, hlo="floor")
_math("ceil", np.ceil, 1, hlo="ceil")
_unary("is_finite", np.isfinite, out="pred", numba="np.isfinite", cuda="isfinite",
       hlo="is-finite")
_unary("not", np.invert, lax_name="bitwise_not", require=_is_intlike, what="integer or pred",
       sample=_unary_sample("i32"), numba=_not, cuda=_c_not, hlo="not")
_unary("square", np.square, require=_is_num, what="numeric", expr="({0} * {0})")
pointwise("round", 1, ("rounding_method",), elementwise_infer(None, _is_float, "floating-point"),
          _round, per_element_flops(1), _jax_round,
          lambda rng: ([sample_array(rng, (3, 4), low=-4, high=4)], {"rounding_method": 1}),
          numba=_numba_round, cuda=_c_round, optional=("rounding_method",),
          hlo=(("round-nearest-afz", {"rounding_method": 0}),
               ("round-nearest-even", {"rounding_method": 1})))
pointwise("integer_pow", 1, ("y",), elementwise_infer(None, _is_num, "numeric"),
          lambda x, y: np.power(x, y) if y >= 0 else 1 / np.power(x, -y),
          lambda ins, out, attrs: out.size * max(1, abs(int(attrs["y"]))),
          _lax("integer_pow"), lambda rng: ([sample_array(rng, (3, 4))], {"y": 3}),
          expr=_integer_pow_expr)

_binary("add", np.add, expr="({0} + {1})", hlo="add")
_binary("add_any", np.add, lax_name="add", expr="({0} + {1})")
_binary("sub", np.subtract, expr="({0} - {1})", hlo="subtract")
_binary("mul", np.multiply, expr="({0} * {1})", hlo="multiply")
_binary("div", _int_div, sample=_nonzero_sample("f32"), expr=by_dtype("idiv({0}, {1})", "({0} / {1})"),
        hlo="divide", program=lambda x, ts, out, a: (  # (programs run with errors ignored)
            f"({x[0]} / {x[1]})" if _is_float(out.dtype) else None))
_binary("rem", _rem, sample=_nonzero_sample("i32"), numba=by_dtype("irem({0}, {1})", "np.fmod({0}, {1})"),
        cuda=by_dtype("irem({0}, {1})", "fmod({0}, {1})"), hlo="remainder")
def _pow_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """lax.pow: a float base to a float exponent of its type, or to any integer exponent (an
    optax step count)."""
    x, y = ts
    if dtypes.is_int(y.dtype):
        y = TensorType(y.shape, x.dtype)
    t = _same("pow", [x, y])
    if not _is_float(t.dtype):
        raise OpError(f"pow: operand element type {t.dtype} is not floating-point")
    return t


def _pow_ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if np.issubdtype(y.dtype, np.integer):  # repeated squaring, as lax.pow does: exact powers
        return np.power(x, y.astype(np.float64)).astype(x.dtype)
    return np.power(x, y)


def _pow_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    base = sample_array(rng, (3, 4), low=0.1, high=3)
    if rng.integers(2):
        return [base, rng.integers(-4, 6, size=(3, 4)).astype(np.int32)], {}
    return [base, sample_array(rng, (3, 4))], {}


pointwise("pow", 2, (), _pow_infer, _pow_ref, per_element_flops(8), _lax("pow"), _pow_sample,
          numba="np.power", cuda="pow", hlo="power")
_binary("max", np.maximum, expr="maximum", hlo="maximum")
_binary("min", np.minimum, expr="minimum", hlo="minimum")
_binary("atan2", np.arctan2, 8, require=_is_float, what="floating-point", numba="np.arctan2",
        cuda="atan2", hlo="atan2")
_binary("nextafter", np.nextafter, require=_is_float, what="floating-point", numba=FALLS_BACK,
        cuda="nextafter")
for _cmp, _fn, _sym in (("eq", np.equal, "=="), ("ne", np.not_equal, "!="), ("lt", np.less, "<"),
                        ("le", np.less_equal, "<="), ("gt", np.greater, ">"),
                        ("ge", np.greater_equal, ">=")):
    _binary(_cmp, _fn, out="pred", sample=_binary_sample("i32"), expr=f"({{0}} {_sym} {{1}})")
_binary("and", np.bitwise_and, lax_name="bitwise_and", require=_is_intlike,
        what="integer or pred", sample=_binary_sample("pred"), expr="({0} & {1})", hlo="and")
_binary("or", np.bitwise_or, lax_name="bitwise_or", require=_is_intlike,
        what="integer or pred", sample=_binary_sample("pred"), expr="({0} | {1})", hlo="or")
_binary("xor", np.bitwise_xor, lax_name="bitwise_xor", require=_is_intlike,
        what="integer or pred", sample=_binary_sample("i32"), expr="({0} ^ {1})", hlo="xor")


def _jax_copy(x: Any) -> Any:
    import jax.numpy as jnp

    return jnp.array(x, copy=True)


pointwise("copy", 1, (), elementwise_infer(), np.copy, no_flops, _jax_copy, _unary_sample(),
          expr="{0}", hlo="copy")


def _select_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    pred, *cases = ts
    if not cases:
        raise OpError("select_n needs at least one case")
    t = _same("select_n", cases)
    if pred.dtype not in ("pred", "i32"):
        raise OpError(f"select_n: the selector must be pred or i32, got {pred.dtype}")
    if pred.shape not in ((), t.shape):
        raise OpError(f"select_n: selector shape {pred.shape} does not match cases {t.shape}")
    return t


def _select_ref(pred: np.ndarray, *cases: np.ndarray) -> np.ndarray:
    if len(cases) == 2 and pred.dtype == np.bool_:
        return np.where(pred, cases[1], cases[0])
    return np.choose(np.asarray(pred, np.int64), cases)


def _numba_select(a: list[str], n: Any) -> str:
    pred, *cases = a
    if len(cases) == 2:
        return f"({cases[1]} if {pred} else {cases[0]})"
    expr = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        expr = f"({cases[k]} if {pred} == {k} else {expr})"
    return expr


def _c_select(a: list[str], n: Any) -> str:
    pred, *cases = a
    expr = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        expr = f"({pred} == {k} ? {cases[k]} : {expr})"
    return expr


pointwise("select_n", None, (), _select_infer, _select_ref, per_element_flops(1), _lax("select_n"),
          lambda rng: ([sample_array(rng, (3, 4), "pred"), sample_array(rng, (3, 4)),
                        sample_array(rng, (3, 4))], {})
          if rng.integers(2) else ([rng.integers(0, 3, size=(3, 4)).astype(np.int32),
                                    *(sample_array(rng, (3, 4)) for _ in range(3))], {}),
          numba=_numba_select, cuda=_c_select)


def _clamp_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    lo, x, hi = ts
    for b in (lo, hi):
        if b.dtype != x.dtype or b.shape not in ((), x.shape):
            raise OpError(f"clamp: bound {b} does not fit operand {x}")
    return x


pointwise("clamp", 3, (), _clamp_infer, lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi),
          per_element_flops(2), _lax("clamp"),
          lambda rng: ([np.float32(-0.5), sample_array(rng, (3, 4)), np.float32(0.7)], {}),
          expr="minimum(maximum({1}, {0}), {2})", hlo="clamp")


def _convert_ref(x: np.ndarray, new_dtype: str) -> np.ndarray:
    """As XLA converts: complex to real keeps the real part; float to integer truncates toward
    zero and saturates (NaN -> 0, +inf and anything too large -> the type's max, -inf and
    anything too small -> its min); integer to a narrower integer wraps; to pred is `!= 0`.
    From pred, XLA reads the stored byte (a bool viewed from other bytes may hold 122, say):
    an unsigned result is that byte sign-extended (122 -> 122, 255 -> 0xFF..FF), any other
    result is `byte != 0` (1)."""
    target, x = dtypes.to_numpy(new_dtype), np.asarray(x)
    if x.dtype == np.bool_ and target != np.bool_:
        if dtypes.is_unsigned(new_dtype):
            return x.view(np.int8).astype(target)
        x = x != 0  # (ml_dtypes' bfloat16 would take the byte itself: 122.0)
    if np.iscomplexobj(x) and not np.issubdtype(target, np.complexfloating):
        x = x.real
    if target == np.bool_:
        return np.asarray(x != 0)
    if dtypes.is_int(new_dtype) and dtypes.is_float(dtypes.from_numpy(x.dtype)):
        info = dtypes.iinfo(new_dtype)  # (int4 too, which np.iinfo does not know)
        # the bounds as floats: min and max + 1 are powers of two (or 0), exact in float64,
        # where max itself may not be (2**63 - 1 rounds up to 2**63)
        lo, hi = float(info.min), float(info.max) + 1.0
        out = np.zeros(x.shape, target)  # NaN stays 0; masks, no float temporaries
        with np.errstate(over="ignore"):  # a bound beyond a narrow float is inf there: fine
            np.copyto(out, x, casting="unsafe", where=(x > lo) & (x < hi))  # truncates to 0
            np.copyto(out, info.max, where=x >= hi)
            np.copyto(out, info.min, where=x <= lo)
        return out
    if {dtypes.from_numpy(x.dtype), new_dtype} == {"i4", "u4"}:  # ml_dtypes has no such cast
        x = x.astype(np.int8)  # (then it wraps, as XLA's does)
    return x.astype(target)


def _jax_convert(x: Any, new_dtype: str) -> Any:
    import jax.lax as lax

    return lax.convert_element_type(x, dtypes.to_numpy(new_dtype))


def _numba_convert(a: list[str], n: Any) -> str:
    new = n.attrs["new_dtype"]
    if dtypes.is_bool(new):
        return f"({a[0]} != 0)"
    if not dtypes.is_int(new):
        return a[0]
    info = dtypes.iinfo(new)  # to_int saturates a float at these, wraps an int
    return f"to_int({a[0]}, {info.min}, {info.max}, np.{dtypes.to_numpy(new).name})"


def _c_convert(a: list[str], n: Any) -> str:
    new = n.attrs["new_dtype"]
    if new == "pred":
        return f"({a[0]} != 0)"
    c = dtypes.C_TYPES.get(new, new)  # the CUDA generator rejects a type it lacks itself
    return f"to_int<{c}>({a[0]})" if dtypes.is_int(new) else f"(({c}){a[0]})"


pointwise("convert_element_type", 1, ("new_dtype",),
          lambda ts, a: TensorType(ts[0].shape, dtypes.to_numpy(a["new_dtype"]) and a["new_dtype"]),
          _convert_ref, per_element_flops(1), _jax_convert,
          lambda rng: ([sample_array(rng, (3, 4), low=-5, high=5)], {"new_dtype": "i32"}),
          numba=_numba_convert, cuda=_c_convert,
          # a kernel loads a bool as `byte != 0`: the unsigned results of one take the reference
          scalar_takes=lambda ts, a: not (ts[0].dtype == "pred" and dtypes.is_unsigned(a["new_dtype"])))


def _reduce_precision_ref(x: np.ndarray, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """lax.reduce_precision as XLA computes it (EmitReducePrecisionIR), on the bits: the
    mantissa rounds to nearest even by adding a bias and masking the dropped bits; with
    fewer exponent bits than the type's, what overflows becomes a signed inf and an exponent
    at or below the reduced minimum (subnormals included) a signed zero; a NaN comes back
    as it was (XLA's CPU emitter selects the input for NaNs, mantissa_bits 0 included).
    bfloat16 runs in float32 and converts back, as XLA's CPU backend runs it (so a NaN's
    payload becomes the canonical quiet NaN), unless the float32 op would be the identity,
    which XLA removes."""
    x = np.asarray(x)
    if x.dtype == dtypes.to_numpy("bf16"):
        if exponent_bits >= 8 and mantissa_bits >= 23:
            return x.copy()
        return _reduce_precision_ref(x.astype(np.float32), exponent_bits,
                                     mantissa_bits).astype(x.dtype)
    info = ml_dtypes.finfo(x.dtype)
    nbits, src_m, src_e = 8 * x.dtype.itemsize, int(info.nmant), int(info.nexp)
    if mantissa_bits >= src_m and exponent_bits >= src_e:
        return x.copy()
    u = np.dtype(f"u{x.dtype.itemsize}").type
    flat = np.ascontiguousarray(x).reshape(-1)  # (1-d: ufuncs on 0-d arrays give scalars)
    bits = flat.view(u)
    sign, exp_mask = u(1 << (nbits - 1)), u(((1 << src_e) - 1) << src_m)
    is_nan = (bits & ~sign) > exp_mask
    if mantissa_bits < src_m:  # (in place on one new array: few temporaries)
        shift = src_m - mantissa_bits
        last = 1 << shift  # the last mantissa bit kept
        rounded = bits >> u(shift)
        rounded &= u(1)
        rounded += u((last >> 1) - 1)  # the bias: 0111..., +1 where the last bit kept is 1
        rounded += bits
        rounded &= u(~(last - 1) & ((1 << nbits) - 1))  # (a carry may reach the exponent)
        bits = rounded
    else:
        bits = bits.copy()
    if exponent_bits < src_e:
        src_bias, reduced_bias = (1 << (src_e - 1)) - 1, (1 << (exponent_bits - 1)) - 1
        exponent = bits & exp_mask
        over = exponent > u((src_bias + reduced_bias) << src_m)
        under = exponent <= u((src_bias - reduced_bias) << src_m)  # (never both)
        del exponent
        signed = bits & sign
        np.copyto(bits, signed, where=under)  # a signed zero
        signed |= exp_mask
        np.copyto(bits, signed, where=over)  # a signed inf
    out = bits.view(x.dtype)
    np.copyto(out, flat, where=is_nan)
    return out.reshape(x.shape)


def _reduce_precision_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    t = elementwise_infer(None, dtypes.is_float, "floating-point")(ts, a)
    if int(a["exponent_bits"]) < 1 or int(a["mantissa_bits"]) < 0:
        raise OpError(f"reduce_precision: exponent_bits {a['exponent_bits']} must be at least 1 "
                      f"and mantissa_bits {a['mantissa_bits']} at least 0")
    return t


def _reduce_precision_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    e, m = ((5, 2), (5, 10), (8, 7), (4, 3))[int(rng.integers(4))]
    x = (rng.standard_normal((3, 4)) * np.exp(rng.uniform(-12, 12, (3, 4)))).astype(np.float32)
    return [x], {"exponent_bits": e, "mantissa_bits": m}


pointwise("reduce_precision", 1, ("exponent_bits", "mantissa_bits"), _reduce_precision_infer,
          _reduce_precision_ref, per_element_flops(1), _lax("reduce_precision"),
          _reduce_precision_sample, expr=FALLS_BACK)


# ---------------------------------------------------------------- sources


def _constant_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    value = attrs["value"]
    if not isinstance(value, Literal):
        raise OpError("constant: value must be a Literal")
    return value.type


def _bound(*args: Any, **attrs: Any) -> Any:
    raise OpError("parameters are bound to arguments, not computed")


# A parameter's type is declared, not inferred: the verifier checks it against `params`.
register(OpDef("parameter", OpKind.SOURCE, 0, ("index",), _bound, _bound, no_flops,
               optional=("index",)))
register(OpDef("constant", OpKind.SOURCE, 0, ("value",), _constant_infer,
               lambda value: value.array, no_flops, lambda value: value.array))


def _iota_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    shape = tuple(a["shape"])
    if not 0 <= a["dimension"] < len(shape):
        raise OpError(f"iota: dimension {a['dimension']} out of range for shape {shape}")
    return TensorType(shape, a["dtype"])


def _iota_ref(dtype: str, shape: tuple[int, ...], dimension: int) -> np.ndarray:
    ar = np.arange(shape[dimension], dtype=dtypes.to_numpy(dtype))
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return np.broadcast_to(ar.reshape(view), shape)


def _jax_iota(dtype: str, shape: tuple[int, ...], dimension: int) -> Any:
    import jax.lax as lax

    return lax.broadcasted_iota(dtypes.to_numpy(dtype), shape, dimension)


register(OpDef("iota", OpKind.SOURCE, 0, ("dtype", "shape", "dimension"), _iota_infer, _iota_ref,
               no_flops, _jax_iota, lambda rng: ([], {"dtype": "i32", "shape": (3, 4), "dimension": 1})))


# ---------------------------------------------------------------- shape ops


def _broadcast_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    shape, bdims = tuple(a["shape"]), tuple(a["broadcast_dimensions"])
    if len(bdims) != t.rank:
        raise OpError(f"broadcast_in_dim: {len(bdims)} broadcast_dimensions for rank {t.rank}")
    for src, dst in enumerate(bdims):
        if not 0 <= dst < len(shape) or t.shape[src] not in (1, shape[dst]):
            raise OpError(f"broadcast_in_dim: cannot broadcast {t} to {shape} via {bdims}")
    if list(bdims) != sorted(set(bdims)):
        raise OpError(f"broadcast_in_dim: broadcast_dimensions {bdims} must be increasing")
    return TensorType(shape, t.dtype)


def _broadcast_ref(x: np.ndarray, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]):
    view = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        view[dst] = x.shape[src]
    return np.broadcast_to(x.reshape(view), shape)


def _jax_broadcast(x: Any, shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]) -> Any:
    import jax.lax as lax

    return lax.broadcast_in_dim(x, shape, broadcast_dimensions)


def _broadcast_program(x: list[str], ts: Sequence[Type], out: Type, a: Attrs) -> str:
    (t,) = ts
    view = [1] * len(a["shape"])
    for src, dst in enumerate(a["broadcast_dimensions"]):
        view[dst] = t.shape[src]  # type: ignore[union-attr]
    source = x[0] if tuple(view) == t.shape else f"{x[0]}.reshape({tuple(view)})"  # type: ignore[union-attr]
    if tuple(view) == tuple(a["shape"]):  # (only new unit axes: the reshape is all of it)
        return source
    return f"np.broadcast_to({source}, {tuple(a['shape'])})"


register(OpDef("broadcast_in_dim", OpKind.SHAPE, 1, ("shape", "broadcast_dimensions"), _broadcast_infer,
               _broadcast_ref, no_flops, _jax_broadcast,
               lambda rng: ([sample_array(rng, (4,))], {"shape": (3, 4), "broadcast_dimensions": (1,)}),
               view=View.STRIDED, split=Split.MAP, fuse=Fuse.POINTWISE, program=_broadcast_program))


def _reshape_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    new = tuple(a["new_sizes"])
    if math.prod(new) != t.size:
        raise OpError(f"reshape: cannot reshape {t} ({t.size} elements) to {list(new)}")
    return TensorType(new, t.dtype)


register(OpDef("reshape", OpKind.SHAPE, 1, ("new_sizes",), _reshape_infer,
               lambda x, new_sizes: np.reshape(x, new_sizes), no_flops,
               lambda x, new_sizes: _lax("reshape")(x, tuple(new_sizes)),
               lambda rng: ([sample_array(rng, (3, 4))], {"new_sizes": (2, 6)}), view=View.RESHAPE,
               split=Split.MAP, program=lambda x, ts, out, a: f"{x[0]}.reshape({tuple(a['new_sizes'])})"))


def _transpose_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    perm = tuple(a["permutation"])
    if sorted(perm) != list(range(t.rank)):
        raise OpError(f"transpose: {perm} is not a permutation of rank {t.rank}")
    return TensorType(tuple(t.shape[p] for p in perm), t.dtype)


register(OpDef("transpose", OpKind.SHAPE, 1, ("permutation",), _transpose_infer,
               lambda x, permutation: np.transpose(x, permutation), no_flops, _lax("transpose"),
               lambda rng: ([sample_array(rng, (2, 3, 4))], {"permutation": (2, 0, 1)}), view=View.STRIDED,
               split=Split.MAP,
               program=lambda x, ts, out, a: f"{x[0]}.transpose({tuple(a['permutation'])})"))


def _squeeze_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    dims = _axes(a, t.rank, "dimensions")
    for d in dims:
        if t.shape[d] != 1:
            raise OpError(f"squeeze: dimension {d} of {t} is not 1")
    return TensorType(tuple(s for i, s in enumerate(t.shape) if i not in dims), t.dtype)


register(OpDef("squeeze", OpKind.SHAPE, 1, ("dimensions",), _squeeze_infer,
               lambda x, dimensions: np.squeeze(x, tuple(dimensions)), no_flops, _lax("squeeze"),
               lambda rng: ([sample_array(rng, (3, 1, 4))], {"dimensions": (1,)}), view=View.RESHAPE,
               split=Split.MAP))


def _expand_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    dims = tuple(a["dimensions"])
    rank = t.rank + len(dims)
    if any(not 0 <= d < rank for d in dims) or len(set(dims)) != len(dims):
        raise OpError(f"expand_dims: bad dimensions {dims} for {t}")
    it = iter(t.shape)
    return TensorType(tuple(1 if i in dims else next(it) for i in range(rank)), t.dtype)


register(OpDef("expand_dims", OpKind.SHAPE, 1, ("dimensions",), _expand_infer,
               lambda x, dimensions: np.expand_dims(x, tuple(dimensions)), no_flops,
               _lax("expand_dims"), lambda rng: ([sample_array(rng, (3, 4))], {"dimensions": (0, 2)}),
               view=View.RESHAPE, split=Split.MAP))

register(OpDef("rev", OpKind.SHAPE, 1, ("dimensions",),
               lambda ts, a: (_axes(a, ts[0].rank, "dimensions"), ts[0])[1],
               lambda x, dimensions: np.flip(x, tuple(dimensions)) if dimensions else x,
               no_flops, _lax("rev"), lambda rng: ([sample_array(rng, (3, 4))], {"dimensions": (1,)}),
               view=View.STRIDED, split=Split.MAP))


def _slice_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    start, limit = tuple(a["start_indices"]), tuple(a["limit_indices"])
    strides = tuple(a.get("strides") or (1,) * t.rank)
    if not len(start) == len(limit) == len(strides) == t.rank:
        raise OpError(f"slice: index lists do not match rank {t.rank}")
    shape = []
    for s, l, st, d in zip(start, limit, strides, t.shape):
        if not (0 <= s <= l <= d) or st < 1:
            raise OpError(f"slice: [{s}:{l}:{st}] out of bounds for dimension of size {d}")
        shape.append(max(0, -(-(l - s) // st)))
    return TensorType(tuple(shape), t.dtype)


def _slice_ref(x, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, strides))]


register(OpDef("slice", OpKind.SHAPE, 1, ("start_indices", "limit_indices", "strides"), _slice_infer,
               _slice_ref, no_flops, _lax("slice"),
               lambda rng: ([sample_array(rng, (5, 6))], {"start_indices": (1, 0), "limit_indices": (4, 6),
                                                          "strides": (1, 2)}),
               view=View.STRIDED, split=Split.MAP, optional=("strides",)))


def _dyn_slice_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    t, *idx = ts
    sizes = tuple(a["slice_sizes"])
    if len(idx) != t.rank or len(sizes) != t.rank:
        raise OpError(f"dynamic_slice: needs {t.rank} start indices and slice sizes")
    if any(i.shape != () or not dtypes.is_int(i.dtype) for i in idx):
        raise OpError("dynamic_slice: start indices must be integer scalars")
    if any(not 0 <= s <= d for s, d in zip(sizes, t.shape)):
        raise OpError(f"dynamic_slice: slice_sizes {sizes} do not fit {t}")
    return TensorType(sizes, t.dtype)


def _clamped_starts(shape, sizes, idx) -> list[int]:
    return [int(min(max(int(i), 0), d - s)) for i, d, s in zip(idx, shape, sizes)]


def _dyn_slice_ref(x, *idx, slice_sizes):
    starts = _clamped_starts(x.shape, slice_sizes, idx)
    return x[tuple(slice(s, s + n) for s, n in zip(starts, slice_sizes))]


def _jax_dyn_slice(x, *idx, slice_sizes):
    import jax.lax as lax

    return lax.dynamic_slice(x, idx, slice_sizes)


register(OpDef("dynamic_slice", OpKind.SHAPE, None, ("slice_sizes",), _dyn_slice_infer, _dyn_slice_ref,
               no_flops, _jax_dyn_slice,
               lambda rng: ([sample_array(rng, (5, 6)), np.int32(2), np.int32(5)], {"slice_sizes": (2, 3)})))


def _dyn_update_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    t, upd, *idx = ts
    if upd.rank != t.rank or upd.dtype != t.dtype or any(u > d for u, d in zip(upd.shape, t.shape)):
        raise OpError(f"dynamic_update_slice: update {upd} does not fit {t}")
    if len(idx) != t.rank:
        raise OpError(f"dynamic_update_slice: needs {t.rank} start indices")
    return t


def _dyn_update_ref(x, upd, *idx):
    starts = _clamped_starts(x.shape, upd.shape, idx)
    out = np.array(x, copy=True)
    out[tuple(slice(s, s + n) for s, n in zip(starts, upd.shape))] = upd
    return out


def _jax_dyn_update(x, upd, *idx):
    import jax.lax as lax

    return lax.dynamic_update_slice(x, upd, idx)


register(OpDef("dynamic_update_slice", OpKind.SHAPE, None, (), _dyn_update_infer, _dyn_update_ref,
               no_flops, _jax_dyn_update,
               lambda rng: ([sample_array(rng, (5, 6)), sample_array(rng, (2, 2)), np.int32(1),
                             np.int32(9)], {})))


def _concat_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    if not ts:
        raise OpError("concatenate needs at least one operand")
    d = a["dimension"]
    first = ts[0]
    if not 0 <= d < first.rank:
        raise OpError(f"concatenate: dimension {d} out of range for {first}")
    for t in ts:
        if t.dtype != first.dtype or t.rank != first.rank or any(
            x != y for i, (x, y) in enumerate(zip(t.shape, first.shape)) if i != d
        ):
            raise OpError(f"concatenate: {t} does not fit {first} along dimension {d}")
    shape = list(first.shape)
    shape[d] = sum(t.shape[d] for t in ts)
    return TensorType(tuple(shape), first.dtype)


def _jax_concat(*xs, dimension):
    import jax.lax as lax

    return lax.concatenate(xs, dimension)


register(OpDef("concatenate", OpKind.SHAPE, None, ("dimension",), _concat_infer,
               lambda *xs, dimension: np.concatenate(xs, axis=dimension), no_flops, _jax_concat,
               lambda rng: ([sample_array(rng, (2, 3)), sample_array(rng, (4, 3))], {"dimension": 0}),
               split=Split.MAP))


def _split_infer(ts: Sequence[TensorType], a: Attrs) -> TupleType:
    (t,) = ts
    axis, sizes = a["axis"], tuple(a["sizes"])
    if not 0 <= axis < t.rank or sum(sizes) != t.shape[axis]:
        raise OpError(f"split: sizes {sizes} along axis {axis} do not add up to {t}")
    return TupleType(tuple(
        TensorType(tuple(s if i == axis else d for i, d in enumerate(t.shape)), t.dtype)
        for s in sizes))


def _split_bounds(sizes: Sequence[int]) -> list[tuple[int, int]]:
    """Each piece's [start, stop) along the axis. The pieces are basic-index views, as
    np.split gives, without its ~25 us of Python (a GPT block's qkv split was 4% of its
    gradient's call at the zoo's sizes)."""
    ends = np.cumsum((0, *sizes)).tolist()
    return list(zip(ends, ends[1:]))


def _split_ref(x, sizes, axis):
    x = np.asarray(x)
    return tuple(x[(slice(None),) * axis + (slice(lo, hi),)] for lo, hi in _split_bounds(sizes))


def _split_program(x: list[str], ts: Sequence[Type], out: Type, a: Attrs) -> str:
    lead = ":, " * a["axis"]
    return "(" + "".join(f"{x[0]}[{lead}{lo}:{hi}], " for lo, hi in _split_bounds(a["sizes"])) + ")"


register(OpDef("split", OpKind.SHAPE, 1, ("sizes", "axis"), _split_infer, _split_ref, no_flops,
               lambda x, sizes, axis: tuple(_lax("split")(x, tuple(sizes), axis)),
               lambda rng: ([sample_array(rng, (5, 4))], {"sizes": (2, 3), "axis": 0}),
               program=_split_program))


def _pad_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    t, pv = ts
    cfg = tuple(tuple(c) for c in a["padding_config"])
    if pv.shape != () or pv.dtype != t.dtype or len(cfg) != t.rank:
        raise OpError(f"pad: padding value {pv} or config {cfg} does not fit {t}")
    shape = []
    for d, (lo, hi, interior) in zip(t.shape, cfg):
        n = lo + hi + d + max(d - 1, 0) * interior
        if interior < 0 or n < 0:
            raise OpError(f"pad: bad padding {(lo, hi, interior)} for dimension {d}")
        shape.append(n)
    return TensorType(tuple(shape), t.dtype)


def pad_reference(x, value, padding_config):
    """The NumPy reference of `pad` (per dimension (low, high, interior); negative low/high
    crop); conv and window rows reuse it to pad and dilate their operands."""
    cfg = [tuple(c) for c in padding_config]
    grown = [d + max(d - 1, 0) * i + max(lo, 0) + max(hi, 0) for d, (lo, hi, i) in zip(x.shape, cfg)]
    out = np.full(grown, value, dtype=x.dtype)
    out[tuple(slice(max(lo, 0), max(lo, 0) + (d - 1) * (i + 1) + 1 if d else max(lo, 0), i + 1)
              for d, (lo, hi, i) in zip(x.shape, cfg))] = x
    crop = tuple(slice(-min(lo, 0), g + min(hi, 0)) for g, (lo, hi, _) in zip(grown, cfg))
    return out[crop]


def _jax_pad(x, value, padding_config):
    import jax.lax as lax

    return lax.pad(x, value, [tuple(c) for c in padding_config])


register(OpDef("pad", OpKind.SHAPE, 2, ("padding_config",), _pad_infer, pad_reference, no_flops, _jax_pad,
               lambda rng: ([sample_array(rng, (3, 4)), np.float32(0.5)],
                            {"padding_config": ((1, 2, 1), (-1, 0, 0))})))


def _tile_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    reps = tuple(a["reps"])
    if len(reps) != t.rank or any(r < 0 for r in reps):
        raise OpError(f"tile: reps {reps} do not fit {t}")
    return TensorType(tuple(d * r for d, r in zip(t.shape, reps)), t.dtype)


register(OpDef("tile", OpKind.SHAPE, 1, ("reps",), _tile_infer, lambda x, reps: np.tile(x, reps),
               no_flops, lambda x, reps: _lax("tile")(x, tuple(reps)),
               lambda rng: ([sample_array(rng, (2, 3))], {"reps": (2, 1)})))


def _stack_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    if not ts or any(t != ts[0] for t in ts):
        raise OpError(f"stack: operands must have equal types, got {', '.join(map(str, ts))}")
    axis = a["axis"]
    if not 0 <= axis <= ts[0].rank:
        raise OpError(f"stack: axis {axis} out of range for {ts[0]}")
    shape = list(ts[0].shape)
    shape.insert(axis, len(ts))
    return TensorType(tuple(shape), ts[0].dtype)


def _jax_stack(*xs, axis):
    import jax.numpy as jnp

    return jnp.stack(xs, axis)


register(OpDef("stack", OpKind.SHAPE, None, ("axis",), _stack_infer,
               lambda *xs, axis: np.stack(xs, axis), no_flops, _jax_stack,
               lambda rng: ([sample_array(rng, (2, 3)), sample_array(rng, (2, 3))], {"axis": 1})))


# ---------------------------------------------------------------- dot_general


def dot_dims(attrs: Attrs) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(lhs_contracting, rhs_contracting, lhs_batch, rhs_batch) of a dot_general."""
    (lc, rc), (lb, rb) = attrs["dimension_numbers"]
    return tuple(lc), tuple(rc), tuple(lb), tuple(rb)


def _dot_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    lhs, rhs = ts
    lc, rc, lb, rb = dot_dims(a)
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise OpError(f"dot_general: unpaired dimension numbers {a['dimension_numbers']}")
    for dims, t in ((lc + lb, lhs), (rc + rb, rhs)):
        if len(set(dims)) != len(dims) or any(not 0 <= d < t.rank for d in dims):
            raise OpError(f"dot_general: bad dimension numbers {a['dimension_numbers']} for {t}")
    for l, r in zip(lc + lb, rc + rb):
        if lhs.shape[l] != rhs.shape[r]:
            raise OpError(f"dot_general: dimension {l} of {lhs} does not match dimension {r} of {rhs}")
    if lhs.dtype != rhs.dtype:
        raise OpError(f"dot_general: element types differ: {lhs} and {rhs}")
    shape = [lhs.shape[d] for d in lb]
    shape += [d for i, d in enumerate(lhs.shape) if i not in lc + lb]
    shape += [d for i, d in enumerate(rhs.shape) if i not in rc + rb]
    pet = a.get("preferred_element_type") or lhs.dtype
    if not _widens(lhs.dtype, pet):
        raise OpError(f"dot_general: preferred_element_type {pet} for {lhs.dtype} operands is "
                      f"not a widening the row computes exactly (XLA then multiplies in "
                      f"{lhs.dtype} and converts the result)")
    return TensorType(tuple(shape), pet)


def _widens(src: str, dst: str) -> bool:
    """Whether a dot of `src` operands accumulating in `dst` is the product of the operands
    converted to `dst` (as XLA computes it): the same type, an integer to a float or to an
    integer at least as wide, or a float to a float that holds it exactly."""
    if src == dst:
        return True
    if dtypes.is_int(src):
        return dtypes.is_float(dst) or (dtypes.is_int(dst) and dtypes.bits(dst) >= dtypes.bits(src))
    return (src, dst) in {("bf16", "f32"), ("bf16", "f64"), ("f16", "f32"), ("f16", "f64"),
                          ("f32", "f64")}


def _dot_ref(lhs, rhs, dimension_numbers, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    lf = [i for i in range(lhs.ndim) if i not in (*lc, *lb)]
    rf = [i for i in range(rhs.ndim) if i not in (*rc, *rb)]
    shape_b = [lhs.shape[i] for i in lb]
    m = math.prod(lhs.shape[i] for i in lf)
    n = math.prod(rhs.shape[i] for i in rf)
    k = math.prod(lhs.shape[i] for i in lc)
    bsz = math.prod(shape_b)
    a = np.transpose(lhs, (*lb, *lf, *lc)).reshape(bsz, m, k)
    b = np.transpose(rhs, (*rb, *rc, *rf)).reshape(bsz, k, n)
    if preferred_element_type:
        a = a.astype(dtypes.to_numpy(preferred_element_type), copy=False)
        b = b.astype(dtypes.to_numpy(preferred_element_type), copy=False)
    out = np.matmul(a, b)
    return out.reshape((*shape_b, *[lhs.shape[i] for i in lf], *[rhs.shape[i] for i in rf]))


def _dot_program(x: list[str], ts: Sequence[Type], out: Type, a: Attrs) -> str:
    """The np.matmul `_dot_ref` reaches, written for these shapes (as `matmul`: see
    OpDef.program): operands as (*batch, m, k) and (*batch, k, n), transposed and reshaped
    only where they are not already."""
    (lc, rc), (lb, rb) = a["dimension_numbers"]
    lhs, rhs = ts
    pet = a.get("preferred_element_type")

    def operand(e: str, t: Any, batch: Sequence[int], first: Sequence[int],
                second: Sequence[int], vector: bool) -> str:
        perm = (*batch, *first, *second)
        if perm != tuple(range(t.rank)):
            e = f"{e}.transpose({perm})"
        shape = (*(t.shape[i] for i in batch), math.prod(t.shape[i] for i in first),
                 math.prod(t.shape[i] for i in second))
        if vector:  # no free dimensions and no batch: a vector, as np.matmul takes one
            shape = (math.prod(t.shape),)
        if shape != tuple(t.shape[i] for i in perm):
            e = f"{e}.reshape({shape})"
        return f"{e}.astype({dtypes.to_numpy(pet).name!r})" if pet and pet != t.dtype else e

    lf = [i for i in range(lhs.rank) if i not in (*lc, *lb)]  # type: ignore[union-attr]
    rf = [i for i in range(rhs.rank) if i not in (*rc, *rb)]  # type: ignore[union-attr]
    vl, vr = not lb and not lf, not rb and not rf
    expr = (f"matmul({operand(x[0], lhs, lb, lf, lc, vl)}, "
            f"{operand(x[1], rhs, rb, rc, rf, vr)})")
    made = (*(lhs.shape[i] for i in lb),  # type: ignore[union-attr]
            *(() if vl else (math.prod(lhs.shape[i] for i in lf),)),  # type: ignore[union-attr]
            *(() if vr else (math.prod(rhs.shape[i] for i in rf),)))  # type: ignore[union-attr]
    return expr if made == out.shape else f"{expr}.reshape({out.shape})"  # type: ignore[union-attr]


def _dot_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    lc = dot_dims(a)[0]
    k = math.prod(ins[0].shape[d] for d in lc)
    return 2 * out.size * k  # type: ignore[union-attr]


def _jax_dot(lhs, rhs, dimension_numbers, preferred_element_type=None):
    import jax.lax as lax

    pet = dtypes.to_numpy(preferred_element_type) if preferred_element_type else None
    return lax.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=pet)


def _dot_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    dims = {"dimension_numbers": (((2,), (2,)), ((0,), (0,)))}
    kind = int(rng.integers(3))
    if kind == 0:
        return [sample_array(rng, (2, 3, 4)), sample_array(rng, (2, 5, 4))], dims
    src, pet = (("bf16", "f32"), ("i8", "i32"))[kind - 1]  # mixed precision, int8 products
    return [sample_array(rng, (2, 3, 4), src, -100, 100), sample_array(rng, (2, 5, 4), src, -100, 100)], \
        {**dims, "preferred_element_type": pet}


register(OpDef("dot_general", OpKind.DOT, 2, ("dimension_numbers", "preferred_element_type"),
               _dot_infer, _dot_ref, _dot_flops, _jax_dot, _dot_sample,
               monoid=MONOIDS["add"], split=Split.ACCUMULATE, program=_dot_program,
               optional=("preferred_element_type",)))


# ---------------------------------------------------------------- reductions


def _reducer(name: str, fn: Ref, monoid: str, sample_dtype: str = "f32") -> None:
    def ref(x, axes):
        x = np.asarray(x)
        if x.size == 0 and fn in (np.max, np.min):  # XLA folds from the monoid's identity
            identity = MONOIDS[monoid].identity_value(dtypes.from_numpy(x.dtype))
            return fn(x, axis=tuple(axes), initial=x.dtype.type(identity))
        return fn(x, axis=tuple(axes))

    def jax_fn(x, axes):
        import jax.lax as lax

        return getattr(lax, name)(x, tuple(axes))

    method = {np.sum: "sum", np.prod: "prod", np.max: "max", np.min: "min"}.get(fn)

    def program(x: list[str], ts: Sequence[Type], out: Type, a: Attrs) -> str | None:
        # ref's reduction as the array's method (np.sum's wrappers cost 1.5 us more; CuPy
        # arrays have the methods too), where no identity is needed
        if ts[0].size == 0:  # type: ignore[union-attr]
            return None
        return f"{x[0]}.{method}(axis={tuple(a['axes'])})"

    register(OpDef(name, OpKind.REDUCE, 1, ("axes",), _reduce_infer, ref, _reduce_flops, jax_fn,
                   lambda rng: ([sample_array(rng, (3, 4, 5), sample_dtype)], {"axes": (0, 2)}),
                   monoid=MONOIDS[monoid], split=Split.ACCUMULATE, fuse=Fuse.REDUCTION,
                   program=program if method is not None else None))


_reducer("reduce_sum", np.sum, "add")
_reducer("reduce_max", np.max, "max")
_reducer("reduce_min", np.min, "min")
_reducer("reduce_prod", np.prod, "mul")


def _bitwise_reduce(ufunc: np.ufunc) -> Ref:
    """lax.reduce_and/reduce_or: logical on pred, bitwise on integers (an empty axis gives the
    identity: all bits set for `and`)."""
    return lambda x, axis: ufunc.reduce(x, axis=axis).astype(x.dtype, copy=False)


_reducer("reduce_and", _bitwise_reduce(np.bitwise_and), "and", "pred")
_reducer("reduce_or", _bitwise_reduce(np.bitwise_or), "or", "pred")

# Monoid name -> the reduction that folds with it (what a loop, an HLO reduce computation or
# an argmax's value merge becomes).
MONOID_REDUCTIONS: dict[str, str] = {row.monoid.name: name for name, row in OPS.items()
                                     if row.kind == OpKind.REDUCE and row.split == Split.ACCUMULATE
                                     and row.monoid is not None}


def _arg_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    axes = _axes(a, t.rank)
    if len(axes) != 1:
        raise OpError("argmax/argmin reduce exactly one axis")
    return TensorType(tuple(d for i, d in enumerate(t.shape) if i not in axes), a["index_dtype"])


def _arg(name: str, fn: Ref, monoid: str) -> None:
    def jax_fn(x, axes, index_dtype):
        import jax.lax as lax

        return getattr(lax, name)(x, axes[0], dtypes.to_numpy(index_dtype))

    def ref(x, axes, index_dtype):
        x = np.asarray(x)
        if x.shape[axes[0]] == 0:  # XLA's fold starts from index 0
            return np.zeros(np.delete(x.shape, axes[0]), dtypes.to_numpy(index_dtype))
        return fn(x, axis=axes[0])

    register(OpDef(name, OpKind.REDUCE, 1, ("axes", "index_dtype"), _arg_infer,
                   ref, _reduce_flops, jax_fn,
                   lambda rng: ([sample_array(rng, (3, 4))], {"axes": (1,), "index_dtype": "i32"}),
                   monoid=MONOIDS[monoid], split=Split.ARG))


_arg("argmax", np.argmax, "max")
_arg("argmin", np.argmin, "min")


def _cumulative(name: str, fn: Ref) -> None:
    def ref(x, axis, reverse=False):
        if reverse:
            return np.flip(fn(np.flip(x, axis), axis=axis), axis)
        return fn(x, axis=axis)

    def jax_fn(x, axis, reverse=False):
        import jax.lax as lax

        return getattr(lax, name)(x, axis, reverse)

    register(OpDef(name, OpKind.OTHER, 1, ("axis", "reverse"),
                   lambda ts, a: ts[0] if 0 <= a["axis"] < ts[0].rank else (_ for _ in ()).throw(
                       OpError(f"{name}: axis {a['axis']} out of range for {ts[0]}")),
                   ref, per_element_flops(1), jax_fn,
                   lambda rng: ([sample_array(rng, (3, 4), low=0.5, high=1.5)], {"axis": 1, "reverse": True}),
                   split=Split.MAP, optional=("reverse",)))


_cumulative("cumsum", np.cumsum)
_cumulative("cumprod", np.cumprod)
_cumulative("cummax", np.maximum.accumulate)
_cumulative("cummin", np.minimum.accumulate)
_cumulative("cumlogsumexp", np.logaddexp.accumulate)


# ---------------------------------------------------------------- sort / top_k


def _sort_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    first = ts[0]
    if any(t.shape != first.shape for t in ts):
        raise OpError("sort: operands must have the same shape")
    if not 0 <= a["dimension"] < first.rank:
        raise OpError(f"sort: dimension {a['dimension']} out of range for {first}")
    return first if len(ts) == 1 else TupleType(tuple(ts))


def _sort_key(k: np.ndarray) -> np.ndarray:
    """A key NumPy sorts as lax.sort does (NaNs last): ml_dtypes' floats (bfloat16, float8)
    compare NaNs as unordered in argsort, so they sort as float32 (exact)."""
    if k.dtype.kind == "V":  # ml_dtypes' element types, all exact in float32
        return k.astype(np.float32)
    return k


def _sort_ref(*xs, dimension, is_stable=True, num_keys=1):
    keys = [_sort_key(np.moveaxis(k, dimension, -1)) for k in xs[:num_keys]]
    perm = np.lexsort(keys[::-1], axis=-1) if num_keys > 1 else np.argsort(keys[0], axis=-1,
                                                                          kind="stable")
    out = tuple(np.moveaxis(np.take_along_axis(np.moveaxis(x, dimension, -1), perm, -1), -1,
                            dimension) for x in xs)
    return out[0] if len(xs) == 1 else out


def _jax_sort(*xs, dimension, is_stable=True, num_keys=1):
    import jax.lax as lax

    out = lax.sort(xs, dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    return out[0] if len(xs) == 1 else tuple(out)


def _sort_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    n = ins[0].shape[a["dimension"]]
    return int(ins[0].size * max(1.0, math.log2(max(n, 1))))


register(OpDef("sort", OpKind.OTHER, None, ("dimension", "is_stable", "num_keys"), _sort_infer, _sort_ref,
               _sort_flops, _jax_sort,
               lambda rng: ([sample_array(rng, (3, 5)), sample_array(rng, (3, 5), "i32")],
                            {"dimension": 1, "is_stable": True, "num_keys": 1}),
               split=Split.MAP, optional=("is_stable", "num_keys")))


def _topk_infer(ts: Sequence[TensorType], a: Attrs) -> TupleType:
    (t,) = ts
    axis = a.get("axis", t.rank - 1)
    if t.rank == 0 or not 0 <= axis < t.rank or not 0 <= a["k"] <= t.shape[axis]:
        raise OpError(f"top_k: k={a['k']} does not fit {t} along axis {axis}")
    shape = tuple(a["k"] if i == axis else d for i, d in enumerate(t.shape))
    return TupleType((TensorType(shape, t.dtype), TensorType(shape, "i32")))


def top_k_key(xp: Any, x: Any) -> Any:
    """A float64 key whose stable ascending sort is lax.top_k's order: XLA's total order,
    descending, so +NaN first, then +inf, the finite values (+0.0 above -0.0), -inf, and -NaN
    last (the NaN that sqrt or log of a negative number gives on x86 has its sign bit set)."""
    if x.dtype == ml_dtypes.bfloat16:  # (not an xp.floating: as float32, exactly, NaN signs kept)
        x = x.astype(np.float32)
    key = xp.negative(x.astype(xp.float64))  # exact for every integer type up to 2**53
    if xp.issubdtype(x.dtype, xp.floating):
        big, nan, neg = xp.finfo(xp.float64).max, xp.isnan(x), xp.signbit(x)
        key[xp.isposinf(x)], key[xp.isneginf(x)] = -big, big
        key[nan & ~neg], key[nan & neg] = -xp.inf, xp.inf
        key[(x == 0) & neg] = 5e-324  # -0.0 ranks just below +0.0, as in XLA's total order
    return key


def _topk_ref(x, k, axis=-1):
    moved = np.moveaxis(x, axis, -1)
    key = top_k_key(np, moved)
    idx = np.argsort(key, axis=-1, kind="stable")[..., :k]
    vals = np.take_along_axis(moved, idx, -1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx.astype(np.int32), -1, axis)


def _jax_topk(x, k, axis=-1):
    import jax.lax as lax

    if axis in (-1, x.ndim - 1):
        return tuple(lax.top_k(x, k))
    import jax.numpy as jnp

    v, i = lax.top_k(jnp.moveaxis(x, axis, -1), k)
    return jnp.moveaxis(v, -1, axis), jnp.moveaxis(i, -1, axis)


def _topk_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    return int(ins[0].size * max(1.0, math.log2(max(a["k"], 2))))


register(OpDef("top_k", OpKind.OTHER, 1, ("k", "axis"), _topk_infer, _topk_ref, _topk_flops, _jax_topk,
               lambda rng: ([sample_array(rng, (3, 6))], {"k": 2, "axis": 1}), split=Split.TOP_K,
               optional=("axis",)))


def _gte_infer(ts: Sequence[Type], a: Attrs) -> TensorType:
    (t,) = ts
    if not isinstance(t, TupleType) or not 0 <= a["index"] < len(t.elements):
        raise OpError(f"get_tuple_element: index {a['index']} does not fit {t}")
    return t.elements[a["index"]]


register(OpDef("get_tuple_element", OpKind.SHAPE, 1, ("index",), _gte_infer,  # type: ignore[arg-type]
               lambda x, index: x[index], no_flops, lambda x, index: x[index], view=View.RESHAPE,
               split=Split.MAP))


def infer_type(op: str, input_types: Sequence[Type], attrs: Attrs) -> Type:
    """The result type of `op` on inputs of these types; raises OpError naming the problem."""
    d = get(op)
    d.check_arity(len(input_types))
    missing = [k for k in d.attrs if k not in attrs and k not in d.optional]
    if missing:
        raise OpError(f"{op}: missing attribute(s) {', '.join(missing)}")
    if op != "get_tuple_element" and op not in TUPLE_OPERANDS:
        for t in input_types:
            tensor_type(t, f"{op} operand")
    return d.infer(input_types, attrs)  # type: ignore[arg-type]


# The rows of region ops and of imported HLO, registered by their modules (which read the
# helpers above), and the names other modules import from here.
from .control_ops import CONTROL_FLOW  # noqa: E402, I001
from .hlo_rows import TUPLE_OPERANDS, type_from_text  # noqa: E402
from .region_ops import (  # noqa: E402
    LOOP_ACCUMULATE,
    loop_param_types,
    region_flops,
    region_result,
)

# First-class rows of what real models emit, one module per family.
from . import ops_conv, ops_indexing, ops_linalg, ops_random, ops_window  # noqa: E402, F401, I001

__all__ = [
    "CONTROL_FLOW", "LOOP_ACCUMULATE", "MONOID_REDUCTIONS", "OPS", "TUPLE_OPERANDS", "OpDef",
    "OpError",
    "dot_dims", "get", "infer_type", "loop_param_types", "region_flops", "region_result",
    "type_from_text",
    # for the helper modules (see the module docstring)
    "elementwise_infer", "no_flops", "pad_reference", "per_element_flops", "pointwise", "register",
    "sample_array", "tensor_type",
]
