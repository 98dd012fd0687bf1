"""The op table's traits (ir/traits.py) against the rows' own NumPy references: elementwise
rows map and fuse pointwise, monoids merge what their reductions compute, views are views, and
the program forms compute what the references do. (The code generators' scalar forms:
tests/backends/codegen/test_scalar_form.py and the dialects' tests.)"""

from __future__ import annotations

import numpy as np
import pytest

from explorer.ir import TensorType, dtypes
from explorer.ir.graph import Attrs
from explorer.ir.ops import MONOID_REDUCTIONS, OPS
from explorer.ir.traits import MONOIDS, FusionRole, OpKind, Split, View
from tests.ir.ops.samples import node_of, sample

ELEMENTWISE = [name for name, row in OPS.items() if row.kind == OpKind.ELEMENTWISE]


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_every_elementwise_row_maps_and_fuses_pointwise(name: str) -> None:
    row = OPS[name]
    assert row.split == Split.MAP and row.fuse == FusionRole.POINTWISE


# ---------------------------------------------------------------- monoids

_MONOID_DTYPES = {"add": ("f64", "i64"), "mul": ("f64", "i64"), "max": ("f32", "i32", "pred"),
                  "min": ("f32", "i32", "pred"), "and": ("pred",), "or": ("pred",),
                  "logsumexp": ("f32", "f64")}


@pytest.mark.parametrize("name", list(MONOIDS))
def test_monoid_identities_are_identities(name: str) -> None:
    m = MONOIDS[name]
    fn = getattr(np, m.array_fn)
    for dtype in _MONOID_DTYPES[name]:
        rng = np.random.default_rng(3)
        npd = dtypes.to_numpy(dtype)
        x = (rng.random(50) < 0.5) if dtype == "pred" else (rng.standard_normal(50) * 9).astype(npd)
        e = np.asarray(m.identity_value(dtype)).astype(npd)
        np.testing.assert_array_equal(fn(x, e), x)
        np.testing.assert_array_equal(fn(e, x), x)


def test_the_monoid_reductions_and_every_reduction_has_a_monoid() -> None:
    assert MONOID_REDUCTIONS == {"add": "reduce_sum", "mul": "reduce_prod", "max": "reduce_max",
                                 "min": "reduce_min", "and": "reduce_and", "or": "reduce_or"}
    for name, row in OPS.items():
        if row.split in (Split.ACCUMULATE, Split.ARG) or row.fuse == FusionRole.REDUCTION:
            assert row.monoid is not None, name
        if row.fuse == FusionRole.REDUCTION:
            assert row.kind == OpKind.REDUCE and row.split == Split.ACCUMULATE, name


REDUCTIONS = [n for n, row in OPS.items() if row.kind == OpKind.REDUCE]


@pytest.mark.parametrize("name", REDUCTIONS)
def test_a_reduction_over_a_split_is_its_monoid_over_the_halves(name: str) -> None:
    row = OPS[name]
    (x,), attrs = sample(name)
    axis = attrs["axes"][0]
    k = x.shape[axis] // 2
    lo, hi = np.split(x, [k], axis=axis)
    fn = getattr(np, row.monoid.array_fn)  # type: ignore[union-attr]
    if row.split == Split.ARG:  # the values merge with the monoid; the index points at them
        value = OPS[MONOID_REDUCTIONS[row.monoid.name]].ref  # type: ignore[union-attr]
        whole = value(x, axes=(axis,))
        merged = fn(value(lo, axes=(axis,)), value(hi, axes=(axis,)))
        picked = np.take_along_axis(x, np.expand_dims(row.ref(x, **attrs), axis), axis)
        np.testing.assert_array_equal(np.squeeze(picked, axis), whole)
    else:
        whole = row.ref(x, **attrs)
        merged = fn(row.ref(lo, **attrs), row.ref(hi, **attrs))
    np.testing.assert_allclose(merged, whole, rtol=1e-5)


def test_dot_contraction_merges_with_its_monoid() -> None:
    row = OPS["dot_general"]
    (lhs, rhs), attrs = sample("dot_general")
    (lc, rc), _ = attrs["dimension_numbers"]
    halves = zip(np.split(lhs, 2, axis=lc[0]), np.split(rhs, 2, axis=rc[0]))
    parts = [row.ref(a, b, **attrs) for a, b in halves]
    merged = getattr(np, row.monoid.array_fn)(*parts)  # type: ignore[union-attr]
    np.testing.assert_allclose(merged, row.ref(lhs, rhs, **attrs), rtol=1e-5)


# ---------------------------------------------------------------- views

VIEWS = [n for n, row in OPS.items() if row.view != View.NONE]


def test_the_views() -> None:
    assert {n for n in VIEWS if OPS[n].view == View.STRIDED} == {
        "broadcast_in_dim", "transpose", "rev", "slice", "sharding_constraint"}
    assert {n for n in VIEWS if OPS[n].view == View.RESHAPE} == {
        "reshape", "squeeze", "expand_dims", "get_tuple_element"}


@pytest.mark.parametrize("name", [n for n in VIEWS if OPS[n].sample is not None])
def test_a_view_op_returns_a_view_of_a_contiguous_input(name: str) -> None:
    inputs, attrs = sample(name)
    x = np.ascontiguousarray(inputs[0])
    out = OPS[name].ref(x, *inputs[1:], **attrs)
    assert np.shares_memory(out, x), name


# ---------------------------------------------------------------- program forms compute the references

PROGRAM_FORMS = [n for n, row in OPS.items() if row.program is not None and row.sample is not None]

DOT_CASES = [  # (lhs shape, rhs shape, dimension numbers): matrix, vector, batched, transposed
    ((5, 3), (3, 4), (((1,), (0,)), ((), ()))),
    ((3, 5), (4, 3), (((0,), (1,)), ((), ()))),
    ((5, 3), (3,), (((1,), (0,)), ((), ()))),
    ((3,), (3,), (((0,), (0,)), ((), ()))),
    ((2, 5, 3, 6), (2, 6, 3, 4), (((2, 3), (2, 1)), ((0,), (0,)))),
    ((7, 2, 3), (3, 2), (((2,), (0,)), ((1,), (1,)))),
]


def _program_matches(name: str, inputs: list[np.ndarray], attrs: dict) -> None:
    n = node_of(name, inputs, attrs)
    types = [TensorType(x.shape, dtypes.from_numpy(x.dtype)) for x in inputs]
    expr = OPS[name].program([f"x{k}" for k in range(len(inputs))], types, n.type, n.attrs)
    names = {"np": np, "matmul": np.matmul}  # (OpDef.program: a dot calls `matmul`)
    got = eval(expr, {**names, **{f"x{k}": x for k, x in enumerate(inputs)}})  # noqa: S307
    want = OPS[name].ref(*inputs, **attrs)
    if isinstance(want, tuple):  # (split: a tuple of pieces, of different shapes)
        assert isinstance(got, tuple) and len(got) == len(want), (name, expr)
        pairs = list(zip(got, want))
    else:
        pairs = [(got, want)]
    for g, w in pairs:
        assert np.shape(g) == np.shape(w), (name, expr)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=expr)


@pytest.mark.parametrize("name", PROGRAM_FORMS)
def test_program_form_matches_the_reference(name: str) -> None:
    for seed in range(4):
        inputs, attrs = OPS[name].sample(np.random.default_rng(seed))  # type: ignore[misc]
        _program_matches(name, [np.asarray(x) for x in inputs], attrs)


@pytest.mark.parametrize("case", DOT_CASES, ids=str)
def test_dot_program_form_matches_the_reference(case) -> None:
    lhs, rhs, dims = case
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(lhs).astype(np.float32), rng.standard_normal(rhs).astype(np.float32)
    _program_matches("dot_general", [x, y], {"dimension_numbers": dims})


def test_program_forms_decline_where_the_reference_is_needed() -> None:
    """An OpDef.program may decline (None) and the program calls the reference: integer
    division (XLA's truncation and x / 0), a max or min over an empty axis (the identity)."""
    i32 = TensorType((3,), "i32")
    assert OPS["div"].program(["a", "b"], [i32, i32], i32, Attrs({})) is None
    f32 = TensorType((3,), "f32")
    assert OPS["div"].program(["a", "b"], [f32, f32], f32, Attrs({})) == "(a / b)"
    empty = TensorType((0, 4), "f32")
    assert OPS["reduce_max"].program(["a"], [empty], TensorType((4,), "f32"),
                                     Attrs({"axes": (0,)})) is None
    assert OPS["reduce_or"].program is None
