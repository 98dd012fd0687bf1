"""Every op row against JAX eager over the element types JAX accepts for it and the edge shapes.

The op table drives it (as tests/ir/ops/test_table.py): each row's `sample` gives the shapes, the
attributes and the domain of its inputs; its inputs are re-typed to each element type (f16,
bf16, f32, f64 under jax.enable_x64, int8..int64, uint8..uint64, bool, int4/uint4) and
reshaped to each edge shape (0-d, empty, size-1, a rank-0 operand with a rank-2 one, size-1
dimensions against full ones). The row's `jax` form, run eagerly, decides what is accepted:
where JAX refuses a type or a shape (REFUSALS) the case is skipped; otherwise our row must
accept it too (infer_type must not raise) and a one-op graph must give JAX's shape, dtype and
values on the reference, cpu and jax backends; elementwise rows and the monoid reductions
also after the fuse pass with a `copy` after the op, so that the cpu backend runs the op in a
generated numba kernel. Integers and bools compare exactly, floats NaN for NaN and within TOL.

The normal run keeps a representative subset: every row at its own element type and five
more rotated over the rows (so every type meets a third of the rows), its edge shapes and its
fused form at its own type, the data rows at their own type and one rotated, conversions from
every type to four. GAMBIT_FUZZ=full runs every row at every type in every form.

Rows covered: every ELEMENTWISE and REDUCE row with a sample in every form; the rows that move
or combine data (shape ops, cumulative ops, sort, top_k, windows and their gradients,
gather/scatter, dot_general, conv, iota, the linear-algebra rows) at every element type on
their sample shapes (their edge shapes would need per-row attributes). Not covered: the random
rows (their operands are PRNG keys: uint32 by definition), and rows without a sample (see
tests/ir/ops/test_table.py)."""

from __future__ import annotations

import contextlib
import math
import zlib
from typing import Any

import jax
import ml_dtypes
import numpy as np
import pytest

from explorer.backends import registry
from explorer.ir import GraphBuilder, TensorType, dtypes
from explorer.ir.graph import Attrs, Graph, TupleType
from explorer.ir.ops import OPS, infer_type
from explorer.ir.traits import OpKind
from explorer.passes.fuse import Fuse
from tests.conftest import FULL_FUZZ

DTYPES = ("f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
          "pred", "i4", "u4")
BACKENDS = ("reference", "cpu", "jax")
# Relative (and absolute, near zero) tolerance per float type; transcendental rows (cost 4 or
# more per element in the table) get four times it: XLA's and NumPy's libm differ in ulps.
TOL = {"f16": 1e-3, "bf16": 1e-2, "f32": 1e-5, "f64": 1e-12}

ELEMENTWISE = [n for n, r in OPS.items() if r.kind == OpKind.ELEMENTWISE and r.sample]
REDUCE = [n for n, r in OPS.items() if r.kind == OpKind.REDUCE and r.sample]
# The linear-algebra rows: their samples are built to be well posed (a Cholesky factor's matrix
# is positive definite), so the sample itself is converted, not redrawn.
LINALG = ["cholesky", "triangular_solve", "lu", "qr", "eigh", "svd"]
# Rows that move or combine data without caring about its type: re-typed at their sample shape.
DATA = ["iota", "broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "rev",
        "slice", "dynamic_slice", "dynamic_update_slice", "concatenate", "split", "pad", "tile",
        "stack", "unstack", "dot_general", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "sort",
        "top_k", "reduce_window_sum", "reduce_window_max", "reduce_window_min",
        "select_and_scatter_add", "select_and_gather_add", "conv_general_dilated", "gather",
        "scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max", *LINALG, "sharding_constraint"]
# The data rows whose inputs get the special values too (elsewhere an inf times a padding's or
# a dilation's zero is NaN where XLA skips the zero, and NaN ties pick either)
SPECIALS_TOO = {"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "sort", "top_k",
                "rev", "transpose", "reshape", "slice", "concatenate", "pad"}
NOT_COVERED = {
    "threefry2x32": "operands are PRNG key words: uint32 by definition",
    "random_seed": "operands are PRNG seeds; the result is a uint32 key",
    "random_bits": "operands are PRNG keys (uint32)",
    "random_split": "operands are PRNG keys (uint32)",
    "random_fold_in": "operands are PRNG keys (uint32)",
}


def test_every_sampled_row_is_covered_or_explained() -> None:
    sampled = {n for n, r in OPS.items() if r.sample is not None}
    assert sampled - set(ELEMENTWISE) - set(REDUCE) - set(DATA) - set(NOT_COVERED) == set()


# ---------------------------------------------------------------- inputs


def _x64(*types: str) -> contextlib.AbstractContextManager:
    wide = {"f64", "i64", "u64"} & set(types)
    return jax.enable_x64(True) if wide else contextlib.nullcontext()


def _sample(name: str) -> tuple[list[np.ndarray], dict]:
    inputs, attrs = OPS[name].sample(np.random.default_rng(0))  # type: ignore[misc]
    attrs = dict(attrs)
    attrs.pop("preferred_element_type", None)  # (dot_general's mixed precision: test_table)
    return [np.asarray(x) for x in inputs], attrs


def _data_index(name: str) -> int:
    """The operand whose element type is the row's data type (select_n's cases, not its
    selector)."""
    return 1 if name == "select_n" else 0


def _ints(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, lo: int, hi: int
          ) -> np.ndarray:
    info = dtypes.iinfo(dtype)
    lo, hi = max(lo, int(info.min)), min(hi, int(info.max))
    wide = np.int64 if lo < 0 else np.uint64
    return rng.integers(lo, hi, size=shape, dtype=wide, endpoint=True).astype(dtypes.to_numpy(dtype))


SPECIALS = (np.nan, np.inf, -np.inf, 0.0, -0.0)


# Rows on the bits of integers: their operands take random bits over the whole range.
BITS = {"population_count", "bitcast_convert_type", "and", "or", "xor", "not"}


def _values(rng: np.random.Generator, name: str, shape: tuple[int, ...], dtype: str,
            like: np.ndarray, k: int, retyped: bool, specials: bool) -> np.ndarray:
    """An array of `dtype` and `shape` for an operand like `like` (the sample's): floats in the
    sample's range with a few specials, small integers (random bits for bit ops; an index's or
    selector's own range where it keeps its type), coin flips."""
    if dtypes.is_bool(dtype):
        return rng.random(shape) < 0.5
    if dtypes.is_int(dtype):
        info = dtypes.iinfo(dtype)
        if not retyped and like.size:  # keep an index's or selector's range
            return _ints(rng, shape, dtype, int(like.min()), int(like.max()))
        if name.startswith("shift") and k == 1:  # shift amounts past the width too
            return _ints(rng, shape, dtype, -2, dtypes.bits(dtype) + 2)
        if name in BITS or name.startswith("shift"):
            return _ints(rng, shape, dtype, int(info.min), int(info.max))
        return _ints(rng, shape, dtype, -4, 8)
    lo, hi = -2.0, 2.0
    if like.dtype.kind == "f" or like.dtype == ml_dtypes.bfloat16:
        if like.size:
            lo, hi = float(np.min(like)), float(np.max(like))
    x = rng.uniform(lo, hi, size=shape)
    if specials and x.size >= 4:
        flat = x.reshape(-1)
        at = rng.choice(flat.size, size=min(len(SPECIALS), flat.size // 3), replace=False)
        flat[at] = rng.choice(SPECIALS, size=at.size)
    return x.astype(dtypes.to_numpy(dtype))


# Per dtype, a same-width type to bitcast to.
_BITCAST = {"f16": "i16", "bf16": "u16", "f32": "u32", "f64": "i64", "i8": "u8", "i16": "f16",
            "i32": "f32", "i64": "f64", "u8": "i8", "u16": "bf16", "u32": "i32", "u64": "f64",
            "pred": "i8", "i4": "u4", "u4": "i4"}


def _attrs(name: str, attrs: dict, dtype: str) -> dict:
    if name == "bitcast_convert_type":
        return {**attrs, "new_dtype": _BITCAST[dtype]}
    if name == "iota":
        return {**attrs, "dtype": dtype}
    return attrs


# ---------------------------------------------------------------- edge shapes

# Per shape form, the operands' shapes of an n-ary elementwise op (None: not for this arity).
def _shapes(form: str, sample: list[tuple[int, ...]]) -> list[tuple[int, ...]] | None:
    n = len(sample)
    if form == "sample":
        return sample
    if form in ("0d", "empty", "empty2", "size1"):
        s = {"0d": (), "empty": (0,), "empty2": (3, 0), "size1": (1,)}[form]
        return [s] * n
    if n < 2:
        return None
    if form == "scalar_first":  # a rank-0 operand with rank-2 ones
        return [()] + [(3, 4)] * (n - 1)
    if form == "scalar_last":
        return [(3, 4)] * (n - 1) + [()]
    if form == "ones_dims":  # size-1 dimensions of equal rank against full ones
        return [(3, 1) if k % 2 == 0 else (1, 4) for k in range(n)]
    if form == "ones_full":
        return [(1, 4)] + [(3, 4)] * (n - 1)
    raise AssertionError(form)


ELEMENTWISE_FORMS = ("sample", "0d", "empty", "empty2", "size1", "scalar_first",
                     "scalar_last", "ones_dims", "ones_full")
# A reduction's edge forms: (input shape, axes).
REDUCE_FORMS = {"sample": None, "0d": ((), ()), "empty": ((0,), (0,)),
                "empty2": ((3, 0), (1,)), "empty2_keep": ((3, 0), (0,)),
                "size1": ((1,), (0,)), "none": ((3, 4), ())}


def _case(name: str, dtype: str, form: str) -> tuple[list[np.ndarray], dict]:
    """The inputs and attrs of `name` at element type `dtype` and shape form `form`."""
    ins, attrs = _sample(name)
    rng = np.random.default_rng(zlib.crc32(f"{name} {dtype} {form}".encode()))
    data = ins[_data_index(name)].dtype if ins else None
    specials = name not in DATA or name in SPECIALS_TOO
    if OPS[name].kind == OpKind.REDUCE and form != "sample":
        shape, axes = REDUCE_FORMS[form]
        attrs = {**attrs, "axes": axes}
        shapes = [shape]
    elif OPS[name].kind == OpKind.ELEMENTWISE:
        shapes = _shapes(form, [x.shape for x in ins])
        if shapes is None:
            pytest.skip(f"no {form} form for a unary op")
    else:
        shapes = [x.shape for x in ins]
    if name in LINALG:
        return [x.astype(dtypes.to_numpy(dtype)) for x in ins], attrs
    out = []
    for k, (x, shape) in enumerate(zip(ins, shapes)):
        retype = x.dtype == data
        if name == "select_n" and k == 0:
            retype = False
        out.append(_values(rng, name, shape, dtype if retype else dtypes.from_numpy(x.dtype), x,
                           k, retype, specials))
    return out, _attrs(name, attrs, dtype)


# ---------------------------------------------------------------- JAX, our graph, comparison

# What JAX raises where it does not take an element type: TypeError and ValueError, and for a
# few rows OverflowError (an integer window or cumulative logsumexp: its -inf init),
# NotImplementedError or an XLA error at run time (int4 top_k: "custom element sizes")
REFUSALS = (TypeError, ValueError, OverflowError, NotImplementedError, jax.errors.JaxRuntimeError)


def _jax(name: str, inputs: list[np.ndarray], attrs: dict) -> list[np.ndarray]:
    out = OPS[name].jax(*[jax.numpy.asarray(x) for x in inputs], **attrs)  # type: ignore[misc]
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else [out])]


def _graph(name: str, inputs: list[np.ndarray], attrs: dict, then_copy: bool = False) -> Graph:
    b = GraphBuilder(name.replace("-", "_"))
    ps = [b.param(TensorType(x.shape, dtypes.from_numpy(x.dtype))) for x in inputs]
    y = b.add(name, ps, attrs)
    t = b.type_of(y)
    if isinstance(t, TupleType):
        outs = [b.add("get_tuple_element", [y], {"index": k}) for k in range(len(t.elements))]
    else:
        outs = [b.add("copy", [y]) if then_copy else y]
    return b.build(outs)


def _tol(name: str, dtype: str) -> float:
    row = OPS[name]
    types = [TensorType((1,), dtype)] * (row.arity or 1)
    try:
        cost = row.flops(types, TensorType((1,), dtype), Attrs({"y": 2}))
    except Exception:  # noqa: BLE001  (rows whose flop rule reads other attrs)
        cost = 1
    return TOL[dtype] * (4 if cost >= 4 else 1)


# Rows that sum or multiply many terms: the order differs between implementations, so the
# tolerance grows with the terms summed into each result (and their magnitude).
ACCUMULATE = {"reduce_sum", "reduce_prod", "cumsum", "cumprod", "cumlogsumexp", "dot_general",
              "conv_general_dilated", "reduce_window_sum", "scatter-add", "scatter-mul",
              "select_and_scatter_add"}
PRODUCTS = {"reduce_prod", "cumprod", "dot_general", "conv_general_dilated", "scatter-mul"}


def _compare(got: Any, want: np.ndarray, name: str, where: str,
             inputs: list[np.ndarray] = ()) -> None:
    got = np.asarray(got)
    assert (got.shape, got.dtype) == (want.shape, want.dtype), where
    d = dtypes.from_numpy(want.dtype)
    if not dtypes.is_float(d):
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"NaNs differ: {where}")
    rtol = atol = _tol(name, d)
    if name in ACCUMULATE and inputs:
        terms = max(1, math.ceil(max(x.size for x in inputs) / max(w.size, 1)))
        big = max(1.0, *(float(np.max(np.abs(x[np.isfinite(x)]), initial=0))
                         for x in (np.asarray(y, np.float64) for y in inputs)))
        rtol, atol = rtol * terms, atol * terms * big ** (2 if name in PRODUCTS else 1)
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=where)


def _check(name: str, dtype: str, form: str, fused: bool = False, attrs: dict | None = None
           ) -> None:
    inputs, sampled = _case(name, dtype, form)
    attrs = {**sampled, **(attrs or {})}
    with _x64(dtype, attrs.get("new_dtype", "")):
        try:
            with np.errstate(all="ignore"):
                want = _jax(name, inputs, attrs)
        except REFUSALS as e:
            pytest.skip(f"JAX refuses {name} at {dtype} {form}: {str(e)[:120]}")
        types = [TensorType(x.shape, dtypes.from_numpy(x.dtype)) for x in inputs]
        infer_type(name, types, Attrs(attrs))  # raises where JAX accepts and we do not
        graph = _graph(name, inputs, attrs, then_copy=fused)
        if fused:
            graph, _ = Fuse()(graph)
            assert any(n.op == "kernel" for n in graph.nodes), f"no kernel made of {name}"
        for backend in BACKENDS if not fused else ("reference", "cpu"):
            got = registry.run_graph(graph, inputs, backend).outputs
            assert len(got) == len(want), backend
            for k, (g, w) in enumerate(zip(got, want)):
                _compare(g, w, name, f"{name} {dtype} {form}: output {k} on {backend}", inputs)


# ---------------------------------------------------------------- the subsets and the tests

# Findings too big to fix here (or JAX's own): (row, dtype) -> the cause. They fail at the
# sample shape (strict xfail, so the test says when they are fixed); the other shapes of the
# pair are skipped (an empty or 0-d one may agree by chance).
XFAIL: dict[tuple[str, str], str] = {
    ("population_count", "i4"):
        "XLA's CPU backend counts the bits of an int4 sign-extended to 8 bits "
        "(population_count(int4(-8)) = 5); the row counts the 4 bits (1)",
    ("select_and_gather_add", "pred"):
        "JAX's select_and_gather_add on bool (its packed-word lowering) does not gather the "
        "tangent at each window's max: on the same values as float32 JAX agrees with the row",
}


def _param(name: str, dtype: str, form: str) -> Any:
    reason = XFAIL.get((name, dtype))
    if reason is None:
        return pytest.param(name, dtype, form)
    mark = pytest.mark.xfail(strict=True, reason=reason) if form == "sample" else \
        pytest.mark.skip(reason=f"known at the sample shape: {reason}")
    return pytest.param(name, dtype, form, marks=mark)


def _rotated(*key: str, k: int = 1) -> list[str]:
    """`k` element types picked by `key` (the normal run's rotation: over the rows and forms,
    every type is met)."""
    at = zlib.crc32(" ".join(key).encode())
    return [DTYPES[(at + j * 7) % len(DTYPES)] for j in range(k)]


def _own(name: str) -> list[str]:
    """The element type of the row's sample, and those its known failures name (so that the
    normal run reports them too)."""
    ins, _ = _sample(name)
    own = dtypes.from_numpy(ins[_data_index(name)].dtype) if ins else "f32"
    return [own, *(d for r, d in XFAIL if r == name)]


def _dtypes(name: str, form: str, k: int = 5) -> list[str]:
    """The element types `name` runs at in shape form `form`: all in the full run; else its own
    and `k` rotated ones at its sample shape, its own at the edge shapes."""
    if FULL_FUZZ:
        return list(DTYPES)
    return list(dict.fromkeys([*_own(name), *_rotated(name, k=k if form == "sample" else 0)]))


def _forms(name: str) -> tuple[str, ...]:
    if OPS[name].kind == OpKind.REDUCE:  # (argmax/argmin reduce exactly one axis)
        one = name in ("argmax", "argmin")
        return tuple(f for f, v in REDUCE_FORMS.items() if not one or v is None or len(v[1]) == 1)
    n = len(_sample(name)[0])
    return tuple(f for f in ELEMENTWISE_FORMS if _shapes(f, [(3, 4)] * n) is not None)


def _cases(rows: list[str], all_forms: bool = True) -> list[Any]:
    return [_param(name, dtype, form) for name in rows
            for form in (_forms(name) if all_forms else ("sample",))
            for dtype in _dtypes(name, form)]


@pytest.mark.parametrize("name, dtype, form", _cases(ELEMENTWISE))
def test_elementwise_matches_jax(name: str, dtype: str, form: str) -> None:
    _check(name, dtype, form)


@pytest.mark.parametrize("name, dtype, form", _cases(REDUCE))
def test_reduction_matches_jax(name: str, dtype: str, form: str) -> None:
    _check(name, dtype, form)


# The data rows run numba loops on the cpu backend, compiled per element type: the normal run
# takes each at its own type and a rotated one.
@pytest.mark.parametrize("name, dtype, form", [
    _param(name, dtype, "sample") for name in DATA
    for dtype in (DTYPES if FULL_FUZZ else dict.fromkeys([*_own(name), *_rotated(name)]))])
def test_data_row_matches_jax(name: str, dtype: str, form: str) -> None:
    _check(name, dtype, form)


CONVERT_TO = DTYPES if FULL_FUZZ else ("f32", "i32", "u8", "pred")


@pytest.mark.parametrize("dtype, to", [(d, t) for d in DTYPES for t in CONVERT_TO])
def test_convert_matches_jax(dtype: str, to: str) -> None:
    """convert_element_type from every type to every type: floats saturate into integers
    (NaN to 0), integers wrap, anything to bool is `!= 0`."""
    _check("convert_element_type", dtype, "sample", attrs={"new_dtype": to})


# With a `copy` after it, the fuse pass makes the op a kernel: the cpu backend runs it in a
# generated numba loop (for the types numba has; else it interprets the kernel's body).
FUSED = ELEMENTWISE + [r for r in REDUCE if OPS[r].fuse.name == "REDUCTION"]


@pytest.mark.parametrize("name, dtype, form", [
    _param(name, dtype, "sample") for name in FUSED
    for dtype in (DTYPES if FULL_FUZZ else _own(name))])
def test_fused_matches_jax(name: str, dtype: str, form: str) -> None:
    _check(name, dtype, form, fused=True)
