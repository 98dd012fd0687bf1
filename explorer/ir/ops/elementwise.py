"""Elementwise rows: one element of the result from the same element of each operand
(operands broadcast as lax does: rank-0 operands, and size-1 dimensions of operands of equal
rank). Arithmetic, comparisons, the math library, select_n, clamp, conversions and the bit ops
(shifts, population_count, bitcast_convert_type, which JAX's random numbers use).

Semantics follow `jax.lax` (which follows XLA): integer `div` truncates toward zero, `rem`
is C's fmod, `round` has a rounding method, `select_n` picks `cases[pred]`. Every row here
maps chunks to chunks (Split.MAP) and fuses pointwise; the code generators' scalar forms of
these ops are theirs (backends/cpu/numba_forms.py, backends/gpu/cuda_forms.py), checked
complete by the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import scipy.special as sp

from .. import dtypes
from ..graph import Attrs, TensorType
from ..traits import FusionRole, OpKind, Split
from .table import (
    Flops,
    Infer,
    OpDef,
    OpError,
    Ref,
    lax_fn,
    no_flops,
    per_element_flops,
    register,
    sample_array,
    tensor_type,
)


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


def _is_num(d: str) -> bool:
    return not dtypes.is_bool(d)


def _is_float(d: str) -> bool:
    return dtypes.is_float(d) or d in ("c64", "c128")


def _is_intlike(d: str) -> bool:
    return dtypes.is_int(d) or dtypes.is_bool(d)


def _unary_sample(dtype: str = "f32", low: float = -2.0, high: float = 2.0):
    return lambda rng: ([sample_array(rng, (3, 4), dtype, low, high)], {})


def _binary_sample(dtype: str = "f32", low: float = -2.0, high: float = 2.0):
    return lambda rng: ([sample_array(rng, (3, 4), dtype, low, high),
                         sample_array(rng, (3, 4), dtype, low, high)], {})


# ---------------------------------------------------------------- rows


def pointwise(name: str, arity: int | None, attrs: tuple[str, ...], infer: Infer, ref: Ref,
              flops: Flops, jax: Callable[..., Any], sample: Any, *,
              hlo: str | tuple[tuple[str, dict[str, Any]], ...] = (),
              optional: tuple[str, ...] = (), program: Any = None) -> None:
    """Register an elementwise row: it maps chunks to chunks and fuses pointwise. `hlo`: an
    opcode name, or (opcode, attrs) pairs. `program`: OpDef's."""
    register(OpDef(name, OpKind.ELEMENTWISE, arity, attrs, infer, ref, flops, jax, sample,
                   split=Split.MAP, fuse=FusionRole.POINTWISE,
                   hlo=((hlo, {}),) if isinstance(hlo, str) else hlo, optional=optional,
                   program=program))


def _unary(name: str, ref: Ref, cost: int = 1, lax_name: str | None = None,
           require: Callable[[str], bool] | None = _is_float, what: str = "floating-point",
           out: str | None = None, sample=None, **traits: Any) -> None:
    pointwise(name, 1, (), elementwise_infer(out, require, what), ref, per_element_flops(cost),
              lax_fn(lax_name or name), sample or _unary_sample(), **traits)


def _binary(name: str, ref: Ref, cost: int = 1, lax_name: str | None = None,
            require: Callable[[str], bool] | None = None, what: str = "",
            out: str | None = None, sample=None, **traits: Any) -> None:
    pointwise(name, 2, (), elementwise_infer(out, require, what), ref, per_element_flops(cost),
              lax_fn(lax_name or name), sample or _binary_sample(), **traits)


def _math(name: str, ref: Ref, cost: int = 4, **kw: Any) -> None:
    """A floating-point unary function (a transcendental unless `cost` says otherwise)."""
    _unary(name, ref, cost, **kw)


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












_unary("neg", np.negative, require=_is_num, what="numeric", hlo="negate")


_unary("exp", np.exp, 4, hlo="exponential")
_math("exp2", np.exp2)
_math("log", np.log, sample=_unary_sample(low=0.1, high=3.0), hlo="log")
_math("log1p", np.log1p, sample=_unary_sample(low=-0.5, high=3.0), hlo="log-plus-one")
_math("expm1", np.expm1, hlo="exponential-minus-one")
_math("sqrt", np.sqrt, 2, sample=_unary_sample(low=0.1, high=3.0), hlo="sqrt")
_unary("rsqrt", lambda x: 1 / np.sqrt(x), 2, sample=_unary_sample(low=0.1, high=3.0), hlo="rsqrt")
_math("cbrt", np.cbrt, hlo="cbrt")
_unary("abs", np.abs, require=_is_num, what="numeric", hlo="abs")
_unary("sign", np.sign, require=_is_num, what="numeric", hlo="sign")
_math("sin", np.sin, hlo="sine")
_math("cos", np.cos, hlo="cosine")
_math("tan", np.tan, sample=_unary_sample(low=-1.2, high=1.2), hlo="tan")
_math("asin", np.arcsin, sample=_unary_sample(low=-0.9, high=0.9))
_math("acos", np.arccos, sample=_unary_sample(low=-0.9, high=0.9))
_math("atan", np.arctan)
_math("sinh", np.sinh)
_math("cosh", np.cosh)
_math("asinh", np.arcsinh)
_math("acosh", np.arccosh, sample=_unary_sample(low=1.1, high=3.0))
_math("atanh", np.arctanh, sample=_unary_sample(low=-0.9, high=0.9))
_unary("tanh", np.tanh, 4, hlo="tanh")
_unary("logistic", sp.expit, 4, hlo="logistic")
_unary("erf", sp.erf, 8, hlo="erf")
_unary("erfc", sp.erfc, 8)
_unary("erf_inv", sp.erfinv, 8, sample=_unary_sample(low=-0.9, high=0.9))
_unary("lgamma", _lgamma, 8, sample=_unary_sample(low=0.1, high=3.0))
_unary("digamma", _digamma, 8, sample=_unary_sample(low=0.1, high=3.0))
_math("floor", np.floor, 1, hlo="floor")
_math("ceil", np.ceil, 1, hlo="ceil")
_unary("is_finite", np.isfinite, out="pred", hlo="is-finite")
_unary("not", np.invert, lax_name="bitwise_not", require=_is_intlike, what="integer or pred",
       sample=_unary_sample("i32"), hlo="not")
_unary("square", np.square, require=_is_num, what="numeric")
pointwise("round", 1, ("rounding_method",), elementwise_infer(None, _is_float, "floating-point"),
          _round, per_element_flops(1), _jax_round,
          lambda rng: ([sample_array(rng, (3, 4), low=-4, high=4)], {"rounding_method": 1}),
          optional=("rounding_method",),
          hlo=(("round-nearest-afz", {"rounding_method": 0}),
               ("round-nearest-even", {"rounding_method": 1})))
pointwise("integer_pow", 1, ("y",), elementwise_infer(None, _is_num, "numeric"),
          lambda x, y: np.power(x, y) if y >= 0 else 1 / np.power(x, -y),
          lambda ins, out, attrs: out.size * max(1, abs(int(attrs["y"]))),
          lax_fn("integer_pow"), lambda rng: ([sample_array(rng, (3, 4))], {"y": 3}))

_binary("add", np.add, hlo="add")
_binary("add_any", np.add, lax_name="add")
_binary("sub", np.subtract, hlo="subtract")
_binary("mul", np.multiply, hlo="multiply")
_binary("div", _int_div, sample=_nonzero_sample("f32"), hlo="divide",
        program=lambda x, ts, out, a: (  # (programs run with errors ignored)
            f"({x[0]} / {x[1]})" if _is_float(out.dtype) else None))
_binary("rem", _rem, sample=_nonzero_sample("i32"), hlo="remainder")


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


pointwise("pow", 2, (), _pow_infer, _pow_ref, per_element_flops(8), lax_fn("pow"), _pow_sample,
          hlo="power")
_binary("max", np.maximum, hlo="maximum")
_binary("min", np.minimum, hlo="minimum")
_binary("atan2", np.arctan2, 8, require=_is_float, what="floating-point", hlo="atan2")
_binary("nextafter", np.nextafter, require=_is_float, what="floating-point")
for _cmp, _fn in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                  ("gt", np.greater), ("ge", np.greater_equal)):
    _binary(_cmp, _fn, out="pred", sample=_binary_sample("i32"))
_binary("and", np.bitwise_and, lax_name="bitwise_and", require=_is_intlike,
        what="integer or pred", sample=_binary_sample("pred"), hlo="and")
_binary("or", np.bitwise_or, lax_name="bitwise_or", require=_is_intlike,
        what="integer or pred", sample=_binary_sample("pred"), hlo="or")
_binary("xor", np.bitwise_xor, lax_name="bitwise_xor", require=_is_intlike,
        what="integer or pred", sample=_binary_sample("i32"), hlo="xor")


def _jax_copy(x: Any) -> Any:
    import jax.numpy as jnp

    return jnp.array(x, copy=True)


pointwise("copy", 1, (), elementwise_infer(), np.copy, no_flops, _jax_copy, _unary_sample(),
          hlo="copy")


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






pointwise("select_n", None, (), _select_infer, _select_ref, per_element_flops(1), lax_fn("select_n"),
          lambda rng: ([sample_array(rng, (3, 4), "pred"), sample_array(rng, (3, 4)),
                        sample_array(rng, (3, 4))], {})
          if rng.integers(2) else ([rng.integers(0, 3, size=(3, 4)).astype(np.int32),
                                    *(sample_array(rng, (3, 4)) for _ in range(3))], {}))


def _clamp_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    lo, x, hi = ts
    for b in (lo, hi):
        if b.dtype != x.dtype or b.shape not in ((), x.shape):
            raise OpError(f"clamp: bound {b} does not fit operand {x}")
    return x


pointwise("clamp", 3, (), _clamp_infer, lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi),
          per_element_flops(2), lax_fn("clamp"),
          lambda rng: ([np.float32(-0.5), sample_array(rng, (3, 4)), np.float32(0.7)], {}),
          hlo="clamp")


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






pointwise("convert_element_type", 1, ("new_dtype",),
          lambda ts, a: TensorType(ts[0].shape, dtypes.to_numpy(a["new_dtype"]) and a["new_dtype"]),
          _convert_ref, per_element_flops(1), _jax_convert,
          lambda rng: ([sample_array(rng, (3, 4), low=-5, high=5)], {"new_dtype": "i32"}))


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
          _reduce_precision_ref, per_element_flops(1), lax_fn("reduce_precision"),
          _reduce_precision_sample)


# ---------------------------------------------------------------- bit ops


def _shift_ok(y: np.ndarray, width: int) -> np.ndarray:
    signed = dtypes.from_numpy(y.dtype).startswith("i")  # (int4 too, not np.signedinteger)
    return (y >= 0) & (y < width) if signed else y < width


def _shl(x, y):
    ok = _shift_ok(y, 8 * x.dtype.itemsize)
    return np.where(ok, np.left_shift(x, np.where(ok, y, 0).astype(x.dtype)), 0).astype(x.dtype)


def _sra(x, y):
    """Sign-extending, on the bits: an unsigned value shifts as its signed twin."""
    if dtypes.bits(dtypes.from_numpy(x.dtype)) == 4:  # (ml_dtypes keeps a 4-bit value in the
        # low nibble of its byte, not sign-extended: shift its signed value as an int8)
        s = x.astype(np.int8)
        if dtypes.from_numpy(x.dtype) == "u4":
            s = np.where(s >= 8, s - 16, s).astype(np.int8)
        return np.right_shift(s, np.where(_shift_ok(y, 4), y, 3).astype(np.int8)).astype(x.dtype)
    w = 8 * x.dtype.itemsize
    signed = x.view(f"i{x.dtype.itemsize}")
    return np.right_shift(signed, np.where(_shift_ok(y, w), y, w - 1).astype(signed.dtype)).view(
        x.dtype)


def _srl(x, y):
    w = 8 * x.dtype.itemsize
    u = x.view(f"u{x.dtype.itemsize}")
    ok = _shift_ok(y, w)
    out = np.where(ok, np.right_shift(u, np.where(ok, y, 0).astype(u.dtype)), 0).astype(u.dtype)
    return out.view(x.dtype)


def _shift_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    dtype = ("i32", "u32", "u8")[int(rng.integers(3))]
    x = rng.integers(0, 2**32, size=(3, 4), dtype=np.uint64).astype(np.uint32).view(np.int32)
    y = rng.integers(-2, 40, size=(3, 4))
    npd = dtypes.to_numpy(dtype)
    return [x.astype(npd), y.astype(npd)], {}


_SHIFT = elementwise_infer(None, dtypes.is_int, "an integer")
pointwise("shift_left", 2, (), _SHIFT, _shl, per_element_flops(1), lax_fn("shift_left"),
          _shift_sample, hlo="shift-left")
pointwise("shift_right_arithmetic", 2, (), _SHIFT, _sra, per_element_flops(1),
          lax_fn("shift_right_arithmetic"), _shift_sample, hlo="shift-right-arithmetic")
pointwise("shift_right_logical", 2, (), _SHIFT, _srl, per_element_flops(1),
          lax_fn("shift_right_logical"), _shift_sample, hlo="shift-right-logical")


def _popcount(x: np.ndarray) -> np.ndarray:
    u = x.view(f"u{x.dtype.itemsize}")
    return np.bitwise_count(u).astype(x.dtype)


pointwise("population_count", 1, (), elementwise_infer(None, dtypes.is_int, "an integer"), _popcount,
          per_element_flops(1), lax_fn("population_count"),
          lambda rng: ([rng.integers(-2**31, 2**31, size=(3, 4)).astype(
              dtypes.to_numpy(("i32", "u8", "u16")[int(rng.integers(3))]))], {}),
          hlo="popcnt")


def _bitcast_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    new = a["new_dtype"]
    if dtypes.bits(new) != dtypes.bits(t.dtype) or "pred" in (new, t.dtype):
        raise OpError(f"bitcast_convert_type: {t} to {new} changes the element size; only "
                      f"same-width bitcasts are first-class")
    return TensorType(t.shape, new)


def _jax_bitcast(x, new_dtype):
    import jax.lax as lax

    return lax.bitcast_convert_type(x, dtypes.to_numpy(new_dtype))


def _bitcast_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    bits = rng.integers(0, 2**32, size=(3, 4), dtype=np.uint64).astype(np.uint32)
    if rng.integers(2):  # random bits to floats in [1, 2), as jax.random.uniform does
        return [(bits >> np.uint32(9)) | np.uint32(0x3F800000)], {"new_dtype": "f32"}
    return [bits.view(np.float32)], {"new_dtype": "i32"}


pointwise("bitcast_convert_type", 1, ("new_dtype",), _bitcast_infer,
          # np.asarray, not ascontiguousarray, which makes a 0-d array 1-d
          lambda x, new_dtype: np.asarray(x, order="C").view(dtypes.to_numpy(new_dtype)),
          no_flops, _jax_bitcast, _bitcast_sample)
