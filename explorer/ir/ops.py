"""THE op table: every op is one row declaring its name, arity, attributes, shape/dtype rule,
NumPy reference, FLOP count and JAX lowering.

Semantics follow `jax.lax` (which follows XLA): integer `div` truncates toward zero, `rem`
is C's fmod, `round` has a rounding method, `select_n` picks `cases[pred]`. The table drives
the op tests (every row is checked against its `jax.lax` lowering on random inputs), the
reference interpreter, the verifier, the cost model and the JAX backend.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.special as sp

from . import dtypes
from .graph import Attrs, Literal, TensorType, TupleType, Type

Ref = Callable[..., Any]
Infer = Callable[[Sequence[TensorType], Attrs], Type]
Flops = Callable[[Sequence[TensorType], Type, Attrs], int]


class OpError(TypeError):
    """An op applied to inputs or attributes it does not accept."""


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: str  # elementwise | reduce | shape | dot | source | other
    arity: int | None  # None: variadic
    attrs: tuple[str, ...]
    infer: Infer
    ref: Ref
    flops: Flops
    jax: Callable[..., Any] | None = None  # (*inputs, **attrs) -> jax value(s)
    sample: Callable[[np.random.Generator], tuple[list[np.ndarray], dict]] | None = None

    def check_arity(self, n: int) -> None:
        if self.arity is not None and n != self.arity:
            raise OpError(f"{self.name} takes {self.arity} inputs, got {n}")


OPS: dict[str, OpDef] = {}


def _add(op: OpDef) -> None:
    assert op.name not in OPS, op.name
    OPS[op.name] = op


def get(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise OpError(f"unknown op {name!r}") from None


# ---------------------------------------------------------------- shape/dtype rule helpers


def _tensor(t: Type, what: str) -> TensorType:
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


def _elementwise(out_dtype: str | None = None, require: Callable[[str], bool] | None = None,
                 what: str = "") -> Infer:
    def infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
        t = _same("elementwise op", [_tensor(x, "operand") for x in ts])
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


def _per_element(k: int) -> Flops:
    def flops(ins: Sequence[TensorType], out: Type, attrs: Attrs) -> int:
        return k * out.size  # type: ignore[union-attr]

    return flops


def _no_flops(ins: Sequence[TensorType], out: Type, attrs: Attrs) -> int:
    return 0


def _reduce_flops(ins: Sequence[TensorType], out: Type, attrs: Attrs) -> int:
    return max(ins[0].size - out.size, 0)  # type: ignore[union-attr]


# ---------------------------------------------------------------- samples for the op tests


def _rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "f32",
          low: float = -2.0, high: float = 2.0) -> np.ndarray:
    npd = dtypes.to_numpy(dtype)
    if dtypes.is_bool(dtype):
        return rng.random(shape) < 0.5
    if dtypes.is_int(dtype):
        lo = 0 if dtype.startswith("u") else int(low) - 3
        return rng.integers(lo, int(high) + 4, size=shape).astype(npd)
    return rng.uniform(low, high, size=shape).astype(npd)


def _unary_sample(dtype: str = "f32", low: float = -2.0, high: float = 2.0):
    return lambda rng: ([_rand(rng, (3, 4), dtype, low, high)], {})


def _binary_sample(dtype: str = "f32", low: float = -2.0, high: float = 2.0):
    return lambda rng: ([_rand(rng, (3, 4), dtype, low, high), _rand(rng, (3, 4), dtype, low, high)], {})


# ---------------------------------------------------------------- elementwise rows


def _lax(name: str) -> Callable[..., Any]:
    def call(*xs: Any, **attrs: Any) -> Any:
        import jax.lax as lax

        return getattr(lax, name)(*xs, **attrs)

    return call


def _unary(name: str, ref: Ref, cost: int = 1, lax_name: str | None = None,
           require: Callable[[str], bool] | None = _is_float, what: str = "floating-point",
           out: str | None = None, sample=None) -> None:
    _add(OpDef(name, "elementwise", 1, (), _elementwise(out, require, what), ref,
               _per_element(cost), _lax(lax_name or name), sample or _unary_sample()))


def _binary(name: str, ref: Ref, cost: int = 1, lax_name: str | None = None,
            require: Callable[[str], bool] | None = None, what: str = "",
            out: str | None = None, sample=None) -> None:
    _add(OpDef(name, "elementwise", 2, (), _elementwise(out, require, what), ref,
               _per_element(cost), _lax(lax_name or name), sample or _binary_sample()))


def _round(x: np.ndarray, rounding_method: int = 0) -> np.ndarray:
    if rounding_method == 0:  # away from zero
        return np.sign(x) * np.floor(np.abs(x) + np.asarray(0.5, x.dtype))
    return np.round(x)


def _jax_round(x: Any, rounding_method: int = 0) -> Any:
    import jax.lax as lax

    return lax.round(x, lax.RoundingMethod(rounding_method))


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
            return (np.sign(a) * np.sign(b) * q).astype(a.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        return a / b


def _rem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b)


def _nonzero_sample(dtype: str):
    def sample(rng):
        a = _rand(rng, (3, 4), dtype, -9, 9)
        magnitude = rng.integers(1, 6, size=(3, 4)) if dtypes.is_int(dtype) else rng.uniform(
            0.5, 5, size=(3, 4))
        b = (magnitude * np.where(rng.random((3, 4)) < 0.5, -1, 1)).astype(dtypes.to_numpy(dtype))
        return [a, b], {}

    return sample


_unary("neg", np.negative, require=_is_num, what="numeric")
_unary("exp", np.exp, 4)
_unary("exp2", np.exp2, 4)
_unary("log", np.log, 4, sample=_unary_sample(low=0.1, high=3.0))
_unary("log1p", np.log1p, 4, sample=_unary_sample(low=-0.5, high=3.0))
_unary("expm1", np.expm1, 4)
_unary("sqrt", np.sqrt, 2, sample=_unary_sample(low=0.1, high=3.0))
_unary("rsqrt", lambda x: 1 / np.sqrt(x), 2, sample=_unary_sample(low=0.1, high=3.0))
_unary("cbrt", np.cbrt, 4)
_unary("abs", np.abs, require=_is_num, what="numeric")
_unary("sign", np.sign, require=_is_num, what="numeric")
_unary("sin", np.sin, 4)
_unary("cos", np.cos, 4)
_unary("tan", np.tan, 4, sample=_unary_sample(low=-1.2, high=1.2))
_unary("asin", np.arcsin, 4, sample=_unary_sample(low=-0.9, high=0.9))
_unary("acos", np.arccos, 4, sample=_unary_sample(low=-0.9, high=0.9))
_unary("atan", np.arctan, 4)
_unary("sinh", np.sinh, 4)
_unary("cosh", np.cosh, 4)
_unary("asinh", np.arcsinh, 4)
_unary("acosh", np.arccosh, 4, sample=_unary_sample(low=1.1, high=3.0))
_unary("atanh", np.arctanh, 4, sample=_unary_sample(low=-0.9, high=0.9))
_unary("tanh", np.tanh, 4)
_unary("logistic", sp.expit, 4)
_unary("erf", sp.erf, 8)
_unary("erfc", sp.erfc, 8)
_unary("erf_inv", sp.erfinv, 8, sample=_unary_sample(low=-0.9, high=0.9))
_unary("lgamma", sp.gammaln, 8, sample=_unary_sample(low=0.1, high=3.0))
_unary("digamma", sp.digamma, 8, sample=_unary_sample(low=0.1, high=3.0))
_unary("floor", np.floor)
_unary("ceil", np.ceil)
_unary("is_finite", np.isfinite, out="pred")
_unary("not", np.invert, lax_name="bitwise_not", require=_is_intlike, what="integer or pred",
       sample=_unary_sample("i32"))
_unary("square", np.square, require=_is_num, what="numeric")
_add(OpDef("round", "elementwise", 1, ("rounding_method",), _elementwise(None, _is_float,
           "floating-point"), _round, _per_element(1), _jax_round,
           lambda rng: ([_rand(rng, (3, 4), low=-4, high=4)], {"rounding_method": 1})))
_add(OpDef("integer_pow", "elementwise", 1, ("y",), _elementwise(None, _is_num, "numeric"),
           lambda x, y: np.power(x, y) if y >= 0 else 1 / np.power(x, -y),
           lambda ins, out, attrs: out.size * max(1, abs(int(attrs["y"]))),
           _lax("integer_pow"), lambda rng: ([_rand(rng, (3, 4))], {"y": 3})))

_binary("add", np.add)
_binary("add_any", np.add, lax_name="add")
_binary("sub", np.subtract)
_binary("mul", np.multiply)
_binary("div", _int_div, sample=_nonzero_sample("f32"))
_binary("rem", _rem, sample=_nonzero_sample("i32"))
_binary("pow", np.power, 8, require=_is_float, what="floating-point",
        sample=lambda rng: ([_rand(rng, (3, 4), low=0.1, high=3), _rand(rng, (3, 4))], {}))
_binary("max", np.maximum)
_binary("min", np.minimum)
_binary("atan2", np.arctan2, 8, require=_is_float, what="floating-point")
_binary("nextafter", np.nextafter, require=_is_float, what="floating-point")
for _cmp, _fn in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                  ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)):
    _binary(_cmp, _fn, out="pred", sample=_binary_sample("i32"))
_binary("and", np.bitwise_and, lax_name="bitwise_and", require=_is_intlike,
        what="integer or pred", sample=_binary_sample("pred"))
_binary("or", np.bitwise_or, lax_name="bitwise_or", require=_is_intlike,
        what="integer or pred", sample=_binary_sample("pred"))
_binary("xor", np.bitwise_xor, lax_name="bitwise_xor", require=_is_intlike,
        what="integer or pred", sample=_binary_sample("i32"))


def _jax_copy(x: Any) -> Any:
    import jax.numpy as jnp

    return jnp.array(x, copy=True)


_add(OpDef("copy", "elementwise", 1, (), _elementwise(), np.copy, _no_flops,
                    _jax_copy, _unary_sample()))


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


_add(OpDef("select_n", "elementwise", None, (), _select_infer, _select_ref, _per_element(1),
           _lax("select_n"),
           lambda rng: ([_rand(rng, (3, 4), "pred"), _rand(rng, (3, 4)), _rand(rng, (3, 4))], {})))


def _clamp_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    lo, x, hi = ts
    for b in (lo, hi):
        if b.dtype != x.dtype or b.shape not in ((), x.shape):
            raise OpError(f"clamp: bound {b} does not fit operand {x}")
    return x


_add(OpDef("clamp", "elementwise", 3, (), _clamp_infer,
           lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi), _per_element(2), _lax("clamp"),
           lambda rng: ([np.float32(-0.5), _rand(rng, (3, 4)), np.float32(0.7)], {})))


def _convert_ref(x: np.ndarray, new_dtype: str) -> np.ndarray:
    target = dtypes.to_numpy(new_dtype)
    if np.issubdtype(target, np.integer) and np.issubdtype(x.dtype, np.floating):
        with np.errstate(invalid="ignore"):
            x = np.trunc(np.nan_to_num(x, nan=0.0))
    return x.astype(target)


def _jax_convert(x: Any, new_dtype: str) -> Any:
    import jax.lax as lax

    return lax.convert_element_type(x, dtypes.to_numpy(new_dtype))


_add(OpDef("convert_element_type", "elementwise", 1, ("new_dtype",),
           lambda ts, a: TensorType(ts[0].shape, dtypes.to_numpy(a["new_dtype"]) and a["new_dtype"]),
           _convert_ref, _per_element(1), _jax_convert,
           lambda rng: ([_rand(rng, (3, 4), low=-5, high=5)], {"new_dtype": "i32"})))


# ---------------------------------------------------------------- sources


def _constant_infer(ts: Sequence[TensorType], attrs: Attrs) -> TensorType:
    value = attrs["value"]
    if not isinstance(value, Literal):
        raise OpError("constant: value must be a Literal")
    return value.type


def _bound(*args: Any, **attrs: Any) -> Any:
    raise OpError("parameters are bound to arguments, not computed")


# A parameter's type is declared, not inferred: the verifier checks it against `params`.
_add(OpDef("parameter", "source", 0, ("index",), _bound, _bound, _no_flops))
_add(OpDef("constant", "source", 0, ("value",), _constant_infer,
           lambda value: value.array, _no_flops, lambda value: value.array))


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


_add(OpDef("iota", "source", 0, ("dtype", "shape", "dimension"), _iota_infer, _iota_ref,
           _no_flops, _jax_iota, lambda rng: ([], {"dtype": "i32", "shape": (3, 4), "dimension": 1})))


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


_add(OpDef("broadcast_in_dim", "shape", 1, ("shape", "broadcast_dimensions"), _broadcast_infer,
           _broadcast_ref, _no_flops, _jax_broadcast,
           lambda rng: ([_rand(rng, (4,))], {"shape": (3, 4), "broadcast_dimensions": (1,)})))


def _reshape_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    new = tuple(a["new_sizes"])
    if math.prod(new) != t.size:
        raise OpError(f"reshape: cannot reshape {t} ({t.size} elements) to {list(new)}")
    return TensorType(new, t.dtype)


_add(OpDef("reshape", "shape", 1, ("new_sizes",), _reshape_infer,
           lambda x, new_sizes: np.reshape(x, new_sizes), _no_flops,
           lambda x, new_sizes: _lax("reshape")(x, tuple(new_sizes)),
           lambda rng: ([_rand(rng, (3, 4))], {"new_sizes": (2, 6)})))


def _transpose_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    perm = tuple(a["permutation"])
    if sorted(perm) != list(range(t.rank)):
        raise OpError(f"transpose: {perm} is not a permutation of rank {t.rank}")
    return TensorType(tuple(t.shape[p] for p in perm), t.dtype)


_add(OpDef("transpose", "shape", 1, ("permutation",), _transpose_infer,
           lambda x, permutation: np.transpose(x, permutation), _no_flops, _lax("transpose"),
           lambda rng: ([_rand(rng, (2, 3, 4))], {"permutation": (2, 0, 1)})))


def _squeeze_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    dims = _axes(a, t.rank, "dimensions")
    for d in dims:
        if t.shape[d] != 1:
            raise OpError(f"squeeze: dimension {d} of {t} is not 1")
    return TensorType(tuple(s for i, s in enumerate(t.shape) if i not in dims), t.dtype)


_add(OpDef("squeeze", "shape", 1, ("dimensions",), _squeeze_infer,
           lambda x, dimensions: np.squeeze(x, tuple(dimensions)), _no_flops, _lax("squeeze"),
           lambda rng: ([_rand(rng, (3, 1, 4))], {"dimensions": (1,)})))


def _expand_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    dims = tuple(a["dimensions"])
    rank = t.rank + len(dims)
    if any(not 0 <= d < rank for d in dims) or len(set(dims)) != len(dims):
        raise OpError(f"expand_dims: bad dimensions {dims} for {t}")
    it = iter(t.shape)
    return TensorType(tuple(1 if i in dims else next(it) for i in range(rank)), t.dtype)


_add(OpDef("expand_dims", "shape", 1, ("dimensions",), _expand_infer,
           lambda x, dimensions: np.expand_dims(x, tuple(dimensions)), _no_flops,
           _lax("expand_dims"), lambda rng: ([_rand(rng, (3, 4))], {"dimensions": (0, 2)})))

_add(OpDef("rev", "shape", 1, ("dimensions",),
           lambda ts, a: (_axes(a, ts[0].rank, "dimensions"), ts[0])[1],
           lambda x, dimensions: np.flip(x, tuple(dimensions)) if dimensions else x,
           _no_flops, _lax("rev"), lambda rng: ([_rand(rng, (3, 4))], {"dimensions": (1,)})))


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


_add(OpDef("slice", "shape", 1, ("start_indices", "limit_indices", "strides"), _slice_infer,
           _slice_ref, _no_flops, _lax("slice"),
           lambda rng: ([_rand(rng, (5, 6))], {"start_indices": (1, 0), "limit_indices": (4, 6),
                                               "strides": (1, 2)})))


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


_add(OpDef("dynamic_slice", "shape", None, ("slice_sizes",), _dyn_slice_infer, _dyn_slice_ref,
           _no_flops, _jax_dyn_slice,
           lambda rng: ([_rand(rng, (5, 6)), np.int32(2), np.int32(5)], {"slice_sizes": (2, 3)})))


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


_add(OpDef("dynamic_update_slice", "shape", None, (), _dyn_update_infer, _dyn_update_ref,
           _no_flops, _jax_dyn_update,
           lambda rng: ([_rand(rng, (5, 6)), _rand(rng, (2, 2)), np.int32(1), np.int32(9)], {})))


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


_add(OpDef("concatenate", "shape", None, ("dimension",), _concat_infer,
           lambda *xs, dimension: np.concatenate(xs, axis=dimension), _no_flops, _jax_concat,
           lambda rng: ([_rand(rng, (2, 3)), _rand(rng, (4, 3))], {"dimension": 0})))


def _split_infer(ts: Sequence[TensorType], a: Attrs) -> TupleType:
    (t,) = ts
    axis, sizes = a["axis"], tuple(a["sizes"])
    if not 0 <= axis < t.rank or sum(sizes) != t.shape[axis]:
        raise OpError(f"split: sizes {sizes} along axis {axis} do not add up to {t}")
    return TupleType(tuple(
        TensorType(tuple(s if i == axis else d for i, d in enumerate(t.shape)), t.dtype)
        for s in sizes))


def _split_ref(x, sizes, axis):
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


_add(OpDef("split", "shape", 1, ("sizes", "axis"), _split_infer, _split_ref, _no_flops,
           lambda x, sizes, axis: tuple(_lax("split")(x, tuple(sizes), axis)),
           lambda rng: ([_rand(rng, (5, 4))], {"sizes": (2, 3), "axis": 0})))


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


def _pad_ref(x, value, padding_config):
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


_add(OpDef("pad", "shape", 2, ("padding_config",), _pad_infer, _pad_ref, _no_flops, _jax_pad,
           lambda rng: ([_rand(rng, (3, 4)), np.float32(0.5)],
                        {"padding_config": ((1, 2, 1), (-1, 0, 0))})))


def _tile_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    reps = tuple(a["reps"])
    if len(reps) != t.rank or any(r < 0 for r in reps):
        raise OpError(f"tile: reps {reps} do not fit {t}")
    return TensorType(tuple(d * r for d, r in zip(t.shape, reps)), t.dtype)


_add(OpDef("tile", "shape", 1, ("reps",), _tile_infer, lambda x, reps: np.tile(x, reps),
           _no_flops, lambda x, reps: _lax("tile")(x, tuple(reps)),
           lambda rng: ([_rand(rng, (2, 3))], {"reps": (2, 1)})))


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


_add(OpDef("stack", "shape", None, ("axis",), _stack_infer,
           lambda *xs, axis: np.stack(xs, axis), _no_flops, _jax_stack,
           lambda rng: ([_rand(rng, (2, 3)), _rand(rng, (2, 3))], {"axis": 1})))


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
    return TensorType(tuple(shape), a.get("preferred_element_type") or lhs.dtype)


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


def _dot_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    lc = dot_dims(a)[0]
    k = math.prod(ins[0].shape[d] for d in lc)
    return 2 * out.size * k  # type: ignore[union-attr]


def _jax_dot(lhs, rhs, dimension_numbers, preferred_element_type=None):
    import jax.lax as lax

    pet = dtypes.to_numpy(preferred_element_type) if preferred_element_type else None
    return lax.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=pet)


_add(OpDef("dot_general", "dot", 2, ("dimension_numbers",), _dot_infer, _dot_ref, _dot_flops,
           _jax_dot,
           lambda rng: ([_rand(rng, (2, 3, 4)), _rand(rng, (2, 5, 4))],
                        {"dimension_numbers": (((2,), (2,)), ((0,), (0,)))})))


# ---------------------------------------------------------------- reductions


def _reducer(name: str, fn: Ref, lax_name: str, sample_dtype: str = "f32") -> None:
    def ref(x, axes):
        return fn(x, axis=tuple(axes))

    def jax_fn(x, axes):
        import jax.lax as lax

        return getattr(lax, lax_name)(x, tuple(axes))

    _add(OpDef(name, "reduce", 1, ("axes",), _reduce_infer, ref, _reduce_flops, jax_fn,
               lambda rng: ([_rand(rng, (3, 4, 5), sample_dtype)], {"axes": (0, 2)})))


_reducer("reduce_sum", np.sum, "reduce_sum")
_reducer("reduce_max", np.max, "reduce_max")
_reducer("reduce_min", np.min, "reduce_min")
_reducer("reduce_prod", np.prod, "reduce_prod")
_reducer("reduce_and", np.all, "reduce_and", "pred")
_reducer("reduce_or", np.any, "reduce_or", "pred")


def _arg_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    (t,) = ts
    axes = _axes(a, t.rank)
    if len(axes) != 1:
        raise OpError("argmax/argmin reduce exactly one axis")
    return TensorType(tuple(d for i, d in enumerate(t.shape) if i not in axes), a["index_dtype"])


def _arg(name: str, fn: Ref) -> None:
    def jax_fn(x, axes, index_dtype):
        import jax.lax as lax

        return getattr(lax, name)(x, axes[0], dtypes.to_numpy(index_dtype))

    _add(OpDef(name, "reduce", 1, ("axes", "index_dtype"), _arg_infer,
               lambda x, axes, index_dtype: fn(x, axis=axes[0]), _reduce_flops, jax_fn,
               lambda rng: ([_rand(rng, (3, 4))], {"axes": (1,), "index_dtype": "i32"})))


_arg("argmax", np.argmax)
_arg("argmin", np.argmin)


def _cumulative(name: str, fn: Ref) -> None:
    def ref(x, axis, reverse=False):
        if reverse:
            return np.flip(fn(np.flip(x, axis), axis=axis), axis)
        return fn(x, axis=axis)

    def jax_fn(x, axis, reverse=False):
        import jax.lax as lax

        return getattr(lax, name)(x, axis, reverse)

    _add(OpDef(name, "other", 1, ("axis", "reverse"),
               lambda ts, a: ts[0] if 0 <= a["axis"] < ts[0].rank else (_ for _ in ()).throw(
                   OpError(f"{name}: axis {a['axis']} out of range for {ts[0]}")),
               ref, _per_element(1), jax_fn,
               lambda rng: ([_rand(rng, (3, 4), low=0.5, high=1.5)], {"axis": 1, "reverse": True})))


_cumulative("cumsum", np.cumsum)
_cumulative("cumprod", np.cumprod)
_cumulative("cummax", np.maximum.accumulate)
_cumulative("cummin", np.minimum.accumulate)


# ---------------------------------------------------------------- sort / top_k


def _sort_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    first = ts[0]
    if any(t.shape != first.shape for t in ts):
        raise OpError("sort: operands must have the same shape")
    if not 0 <= a["dimension"] < first.rank:
        raise OpError(f"sort: dimension {a['dimension']} out of range for {first}")
    return first if len(ts) == 1 else TupleType(tuple(ts))


def _sort_ref(*xs, dimension, is_stable=True, num_keys=1):
    keys = [np.moveaxis(k, dimension, -1) for k in xs[:num_keys]]
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


_add(OpDef("sort", "other", None, ("dimension", "is_stable", "num_keys"), _sort_infer, _sort_ref,
           _sort_flops, _jax_sort,
           lambda rng: ([_rand(rng, (3, 5)), _rand(rng, (3, 5), "i32")],
                        {"dimension": 1, "is_stable": True, "num_keys": 1})))


def _topk_infer(ts: Sequence[TensorType], a: Attrs) -> TupleType:
    (t,) = ts
    axis = a.get("axis", t.rank - 1)
    if t.rank == 0 or not 0 <= axis < t.rank or not 0 <= a["k"] <= t.shape[axis]:
        raise OpError(f"top_k: k={a['k']} does not fit {t} along axis {axis}")
    shape = tuple(a["k"] if i == axis else d for i, d in enumerate(t.shape))
    return TupleType((TensorType(shape, t.dtype), TensorType(shape, "i32")))


def _topk_ref(x, k, axis=-1):
    moved = np.moveaxis(x, axis, -1)
    key = -moved.astype(np.float64)  # exact for every integer type up to 2**53
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


_add(OpDef("top_k", "other", 1, ("k", "axis"), _topk_infer, _topk_ref, _topk_flops, _jax_topk,
           lambda rng: ([_rand(rng, (3, 6))], {"k": 2, "axis": 1})))


def _gte_infer(ts: Sequence[Type], a: Attrs) -> TensorType:
    (t,) = ts
    if not isinstance(t, TupleType) or not 0 <= a["index"] < len(t.elements):
        raise OpError(f"get_tuple_element: index {a['index']} does not fit {t}")
    return t.elements[a["index"]]


_add(OpDef("get_tuple_element", "shape", 1, ("index",), _gte_infer,  # type: ignore[arg-type]
           lambda x, index: x[index], _no_flops, lambda x, index: x[index]))


def infer_type(op: str, input_types: Sequence[Type], attrs: Attrs) -> Type:
    """The result type of `op` on inputs of these types; raises OpError naming the problem."""
    d = get(op)
    d.check_arity(len(input_types))
    missing = [k for k in d.attrs if k not in attrs and k not in _OPTIONAL.get(op, ())]
    if missing:
        raise OpError(f"{op}: missing attribute(s) {', '.join(missing)}")
    if op != "get_tuple_element" and op not in TUPLE_OPERANDS:
        for t in input_types:
            _tensor(t, f"{op} operand")
    return d.infer(input_types, attrs)  # type: ignore[arg-type]


# Attributes a row lists but that may be absent (lax treats None/absent as the default).
_OPTIONAL: dict[str, tuple[str, ...]] = {
    "slice": ("strides",),
    "top_k": ("axis",),
    "round": ("rounding_method",),
    "sort": ("is_stable", "num_keys"),
    "cumsum": ("reverse",), "cumprod": ("reverse",), "cummax": ("reverse",),
    "cummin": ("reverse",),
    "parameter": ("index",),
}


# ---------------------------------------------------------------- regions
# A region op carries a `body` Graph: its inputs bind the body's parameters in order and its
# result is the body's output (a tuple when there are several). The reference interpreter
# evaluates bodies recursively (backends/reference.py); here they are only typed and costed.


def region_result(body: Any) -> Type:
    outs = [body[o].type for o in body.outputs]
    return outs[0] if len(outs) == 1 else TupleType(tuple(outs))


def _region_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    body = a["body"]
    want = [p.type for p in body.param_nodes]
    if list(ts) != want:
        raise OpError(f"region inputs {', '.join(map(str, ts))} do not match its body's "
                      f"parameters {', '.join(map(str, want))}")
    return region_result(body)


def region_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    body = a["body"]
    total = 0
    for n in body.nodes:
        if OPS[n.op].kind != "source":
            total += OPS[n.op].flops([body[i].type for i in n.inputs], n.type, n.attrs)
    return total


def _region_ref(*args: Any, **attrs: Any) -> Any:
    raise OpError("region bodies are evaluated by the interpreter, not by a NumPy reference")


# `kernel`: a fused kernel (our fuse pass, and XLA's fusion computations). attrs: body, and
# `kind` ("loop" | "input" | "output" | XLA's kind name).
_add(OpDef("kernel", "region", None, ("body",), _region_infer, _region_ref, region_flops))


# ---------------------------------------------------------------- imported HLO (issue 8)
# Rows for modules imported from XLA's HLO text (frontend/hlo_graph.py): `opaque` keeps an HLO
# instruction our table lacks (its opcode, its text and its declared type, so any module
# renders), `tuple` builds the tuples that HLO passes around, and `call`, `while` and
# `conditional` are region ops whose bodies are Graphs, like `kernel` above.

# Ops whose operands may be tuples (infer_type checks that all other ops read tensors).
TUPLE_OPERANDS = frozenset({"opaque", "tuple", "call", "while", "conditional"})


def type_from_text(text: str) -> Type:
    """'f32[3,4]' or '(f32[3], i32[])' -> the type; the inverse of str(type)."""
    import re

    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        inner = text[1:-1].strip()
        parts = [type_from_text(p) for p in inner.split(", ")] if inner else []
        if not all(isinstance(p, TensorType) for p in parts):
            raise OpError(f"nested tuple type {text!r}")
        return TupleType(tuple(parts))  # type: ignore[arg-type]
    m = re.fullmatch(r"(\w+)\[([\d,]*)\]", text)
    if m is None or m.group(1) not in dtypes.NAMES:
        raise OpError(f"bad type {text!r}")
    return TensorType(tuple(int(d) for d in m.group(2).split(",") if d), m.group(1))


def _opaque_ref(*args: Any, opcode: str = "?", **attrs: Any) -> Any:
    raise OpError(f"HLO op {opcode!r} was imported as an opaque node and cannot be evaluated")


# attrs: opcode (HLO's name), text (the instruction as XLA printed it), type (our type's text).
_add(OpDef("opaque", "other", None, ("opcode", "text", "type"),
           lambda ts, a: type_from_text(a["type"]), _opaque_ref, _no_flops))
_add(OpDef("tuple", "shape", None, (), lambda ts, a: TupleType(tuple(_tensor(t, "tuple element")
                                                                     for t in ts)),
           lambda *xs: tuple(xs), _no_flops))

# `call`: a call of another computation (HLO's call; attrs: body).
_add(OpDef("call", "region", None, ("body",), _region_infer, _region_ref, region_flops))


def _while_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    cond, body = a["cond"], a["body"]
    for g, what in ((cond, "condition"), (body, "body")):
        if [p.type for p in g.param_nodes] != list(ts):
            raise OpError(f"while: the {what}'s parameters do not match its inputs "
                          f"{', '.join(map(str, ts))}")
    if [cond[o].type for o in cond.outputs] != [TensorType((), "pred")]:
        raise OpError("while: the condition must return one pred[]")
    if [body[o].type for o in body.outputs] != list(ts):
        raise OpError("while: the body's results do not match its inputs")
    return region_result(body)


# `while`: attrs cond, body (Graphs over the loop state, one parameter per state element).
# FLOPs count one trip: the trip count is a run-time value.
_add(OpDef("while", "region", None, ("cond", "body"), _while_infer, _region_ref, region_flops))


def _branch_arity(branches: Sequence[Any]) -> list[int]:
    return [len(b.params) for b in branches]


def _conditional_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    branches = tuple(a["branches"])
    if not branches or not ts or ts[0].shape != () or ts[0].dtype not in ("pred", "i32"):
        raise OpError("conditional: needs branches and a pred[] or i32[] selector")
    if ts[0].dtype == "pred" and len(branches) != 2:
        raise OpError("conditional: a pred selector needs exactly two branches")
    operands, k = list(ts[1:]), 0
    for b in branches:
        want = [p.type for p in b.param_nodes]
        if operands[k:k + len(want)] != want:
            raise OpError("conditional: a branch's parameters do not match its operands")
        k += len(want)
    results = {region_result(b) for b in branches}
    if k != len(operands) or len(results) != 1:
        raise OpError("conditional: operands left over, or branches of different types")
    return results.pop()


def _conditional_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    return max(region_flops(ins, out, Attrs({"body": b})) for b in a["branches"])


# `conditional`: attrs branches (a tuple of Graphs). Inputs: the selector, then each branch's
# operands in branch order. A pred selector picks branches[1] when true (as select_n does);
# an i32 selector out of range picks the last branch (as XLA does).
_add(OpDef("conditional", "region", None, ("branches",), _conditional_infer, _region_ref,
           _conditional_flops))


# ---------------------------------------------------------------- loop (issue 4: memory-safe execution)
# `loop`: a map-reduce loop over chunks of one dimension, written by the split pass so that a
# program whose intermediates are too large runs chunk by chunk under a memory limit.
#
#   %r = f64[N] loop(%x, %y, %v) {size=N, chunk=C, split_inputs=((0, 0),),
#                                 combine=(("concat", 0),), body=graph @body {...}}
#
# Iteration space: `size` positions of the split dimension, taken `chunk` at a time
# (iteration i covers [i*chunk, min((i+1)*chunk, size))).
# Inputs: `split_inputs` lists (input index, axis) pairs; such an input has `size` elements
#   along `axis` and each iteration sees only that iteration's slice of them (a view). Inputs
#   not listed are passed whole to every iteration.
# Bodies: `body` is a Graph with one parameter per loop input (in order), typed for a full
#   chunk. When `chunk` does not divide `size`, the optional `tail` Graph (same parameters,
#   typed for the `size % chunk` remainder) runs for the last iteration; it is present exactly
#   when there is a remainder. A body may have several outputs; the loop then has a tuple type.
# Combining, one spec per body output (`combine`), giving the loop's k-th result:
#   ("concat", axis)  chunk results are slices of the result along `axis` (size `chunk` in
#                     the body, `size` in the result): iteration i writes its slice.
#   ("add",) ("mul",) ("max",) ("min",) ("and",) ("or",)
#                     the result accumulates the chunks' results elementwise (same type).
#   ("top_k", axis)   the chunk result holds the chunk's top k values along `axis` (k = the
#                     body result's size there, which the result keeps; a shorter tail
#                     result is allowed); the running top k is merged with them.
#   ("index", j)      indices along the split dimension local to the chunk (0 = the chunk's
#                     first position); the loop adds the chunk's start. They follow output j,
#                     whose combine is max or min (argmax/argmin: the chunk's entry replaces
#                     the running one where its value is strictly better, or NaN over a
#                     number, so ties keep the first occurrence, as argmax does) or top_k (the
#                     indices move with their values; ties keep lower indices first).
# The reference interpreter (backends/reference.py) runs it chunk by chunk; its planned peak
# (analysis/memory.py) is its result buffers plus one iteration's temporaries.

LOOP_ACCUMULATE = ("add", "mul", "max", "min", "and", "or")


def loop_param_types(ins: Sequence[TensorType], a: Attrs, rows: int) -> list[TensorType]:
    """The body parameter types for an iteration of `rows` positions."""
    out = list(ins)
    for k, axis in a["split_inputs"]:
        if not 0 <= k < len(ins) or not 0 <= axis < ins[k].rank:
            raise OpError(f"loop: split input ({k}, {axis}) does not exist")
        if ins[k].shape[axis] != a["size"]:
            raise OpError(f"loop: input {k} ({ins[k]}) has no dimension of size {a['size']} "
                          f"at axis {axis}")
        out[k] = TensorType(tuple(rows if i == axis else d for i, d in enumerate(ins[k].shape)),
                            ins[k].dtype)
    return out


def _loop_result(k: int, spec: tuple, outs: Sequence[TensorType], tail: Sequence[TensorType] | None,
                 size: int, chunk: int, rem: int) -> TensorType:
    t = outs[k]
    kind = spec[0] if spec else None
    if kind == "concat":
        axis = spec[1]
        if not 0 <= axis < t.rank or t.shape[axis] != chunk:
            raise OpError(f"loop: output {k} ({t}) has no chunk-sized axis {axis} to concat")
        if tail is not None and tail[k].shape != tuple(rem if i == axis else d
                                                       for i, d in enumerate(t.shape)):
            raise OpError(f"loop: tail output {k} ({tail[k]}) does not fit {t}")
        return TensorType(tuple(size if i == axis else d for i, d in enumerate(t.shape)), t.dtype)
    if kind in LOOP_ACCUMULATE and len(spec) == 1:
        if tail is not None and tail[k] != t:
            raise OpError(f"loop: tail output {k} ({tail[k]}) differs from {t}")
        return t
    if kind == "top_k" and len(spec) == 2 and 0 <= spec[1] < t.rank:
        if tail is not None and (tail[k].dtype != t.dtype or tail[k].rank != t.rank):
            raise OpError(f"loop: tail output {k} ({tail[k]}) does not fit {t}")
        return t
    if kind == "index" and len(spec) == 2 and 0 <= spec[1] < len(outs) and spec[1] != k:
        partner = outs[spec[1]]
        if partner.shape != t.shape or not dtypes.is_int(t.dtype):
            raise OpError(f"loop: index output {k} ({t}) does not match output {spec[1]} "
                          f"({partner})")
        return t
    raise OpError(f"loop: bad combine spec {spec!r} for output {k}")


def _loop_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    size, chunk, body = a["size"], a["chunk"], a["body"]
    if not (isinstance(size, int) and isinstance(chunk, int) and 0 < chunk <= size):
        raise OpError(f"loop: need 0 < chunk <= size, got chunk={chunk}, size={size}")
    rem = size % chunk
    tail = a.get("tail")
    if (tail is not None) != (rem != 0):
        raise OpError(f"loop: a tail body is needed exactly when chunk ({chunk}) does not "
                      f"divide size ({size})")
    for g, rows, what in ((body, chunk, "body"), (tail, rem, "tail")):
        if g is None:
            continue
        want = loop_param_types(ts, a, rows)
        have = [p.type for p in g.param_nodes]
        if have != want:
            raise OpError(f"loop: the {what}'s parameters {', '.join(map(str, have))} do not "
                          f"match its inputs sliced to {rows}: {', '.join(map(str, want))}")
    outs = [_tensor(body[o].type, "loop body output") for o in body.outputs]
    touts = None if tail is None else [_tensor(tail[o].type, "tail output") for o in tail.outputs]
    specs = tuple(a["combine"])
    if len(specs) != len(outs) or (touts is not None and len(touts) != len(outs)):
        raise OpError(f"loop: {len(specs)} combine specs for {len(outs)} body outputs")
    results = [_loop_result(k, tuple(s), outs, touts, size, chunk, rem) for k, s in enumerate(specs)]
    for k, s in enumerate(specs):
        if s[0] == "index" and tuple(specs[s[1]])[0] not in ("max", "min", "top_k"):
            raise OpError(f"loop: index output {k} follows output {s[1]}, which is not "
                          f"combined by max, min or top_k")
    return results[0] if len(results) == 1 else TupleType(tuple(results))


def _loop_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    iterations = a["size"] // a["chunk"]
    total = iterations * region_flops(ins, out, Attrs({"body": a["body"]}))
    if a.get("tail") is not None:
        total += region_flops(ins, out, Attrs({"body": a["tail"]}))
    return total


_add(OpDef("loop", "region", None, ("size", "chunk", "split_inputs", "combine", "body", "tail"),
           _loop_infer, _region_ref, _loop_flops))
_OPTIONAL["loop"] = ("tail",)
