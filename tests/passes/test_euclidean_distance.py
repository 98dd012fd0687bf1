"""euclidean-distance: before-vs-after semantics (with a tolerance: the quadratic form is not
bit-exact) over axis orders, scalings, consumers, shapes and float types; exact zeros at
coincident points under consumers sensitive at zero, against JAX; the documented divergence
with non-finite inputs; and where it must not fire."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.analysis.cost import graph_cost
from explorer.backends import registry
from explorer.backends.reference import evaluate
from explorer.frontend.jaxpr import trace
from explorer.ir import Graph, parse
from explorer.passes.euclidean_distance import RULE_NAME, EuclideanDistance, noise_bound
from explorer.passes.simplify import Simplify
from tests.passes.semantic import check_semantics


def _graph(fn: Callable[..., Any], *shapes: tuple[int, ...], dtype: str = "f32") -> Graph:
    g = trace(fn, *(np.zeros(s, np.float32) for s in shapes)).graph
    return g if dtype == "f32" else parse(str(g).replace("f32", dtype))  # same program in f64


def _sq_mul(a: Any, b: Any) -> Any:
    d = a[:, None, :] - b[None, :, :]
    return jnp.sum(d * d, axis=-1)


def _naive(a: Any, b: Any) -> Any:
    return jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1)


# name -> (fn, (n, m, k) -> operand shapes)
FORMS: dict[str, tuple[Callable[..., Any], Callable[[int, int, int], list[tuple[int, ...]]]]] = {
    "seed-000": (_naive, lambda n, m, k: [(n, k), (m, k)]),
    "b-minus-a": (lambda a, b: jnp.sum((b[None, :, :] - a[:, None, :]) ** 2, -1),
                  lambda n, m, k: [(n, k), (m, k)]),
    "points-transposed": (lambda a, b: jnp.sum((a[None, :, :] - b[:, None, :]) ** 2, -1),
                          lambda n, m, k: [(n, k), (m, k)]),
    "features-first": (lambda a, b: jnp.sum(jnp.square(a[:, :, None] - b[:, None, :]), 0),
                       lambda n, m, k: [(k, n), (k, m)]),
    "features-middle": (lambda a, b: jnp.sum((a[:, :, None] - b.T[None, :, :]) ** 2, 1),
                        lambda n, m, k: [(n, k), (m, k)]),
    "square-as-mul": (_sq_mul, lambda n, m, k: [(n, k), (m, k)]),
    "two-feature-axes": (lambda a, b: jnp.sum((a[:, None] - b[None]) ** 2, axis=(2, 3)),
                         lambda n, m, k: [(n, k, 2), (m, k, 2)]),
    "batched": (lambda a, b: jnp.sum((a[:, :, None, :] - b[:, None, :, :]) ** 2, -1),
                lambda n, m, k: [(3, n, k), (3, m, k)]),
    "scaled": (lambda a, b: -0.5 * _naive(a, b), lambda n, m, k: [(n, k), (m, k)]),
    "divided": (lambda a, b, l: _naive(a, b) / l, lambda n, m, k: [(n, k), (m, k), ()]),
    "sqrt": (lambda a, b: jnp.sqrt(_naive(a, b)), lambda n, m, k: [(n, k), (m, k)]),
    "rbf": (lambda a, b, g: jnp.exp(-jnp.abs(g) * _naive(a, b)),
            lambda n, m, k: [(n, k), (m, k), ()]),
    "matern-like": (lambda a, b: jnp.exp(-jnp.sqrt(_sq_mul(a, b) / 2.0)),
                    lambda n, m, k: [(n, k), (m, k)]),
}

SHAPES = [(6, 5, 3), (2, 7, 2), (9, 4, 16)]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", FORMS)
def test_distances_keep_their_values(name: str, shape: tuple[int, int, int], dtype: str) -> None:
    fn, operand_shapes = FORMS[name]
    g = _graph(fn, *operand_shapes(*shape), dtype=dtype)
    after, report = check_semantics(EuclideanDistance(), g)
    features = shape[2] * (2 if name == "two-feature-axes" else 1)
    if dtype == "f32" and features <= 2:  # float64's N x M would be no smaller than the
        assert not report.rewrites, name  # float32 N x M x 2 difference: left naive
        return
    assert [r.rule for r in report.rewrites] == [RULE_NAME], name
    root = g[report.rewrites[0].before[0]]
    assert root.op == "reduce_sum" and report.rewrites[0].source == str(root.source)
    assert "sub" not in after.ops()
    assert graph_cost(after).peak_bytes < graph_cost(g).peak_bytes


def test_after_simplify_the_square_is_a_mul() -> None:
    """In the default pipeline simplify runs first and turns integer_pow y=2 into mul(d, d):
    the rule must still fire."""
    g, _ = Simplify()(_graph(_naive, (6, 3), (5, 3)))
    assert "integer_pow" not in g.ops() and g.ops()["mul"] == 1
    _, report = check_semantics(EuclideanDistance(), g)
    assert len(report.rewrites) == 1


def test_identical_points_give_exact_zeros_under_sqrt() -> None:
    g = _graph(lambda a: jnp.sqrt(_naive(a, a)), (8, 5))
    after, report = EuclideanDistance()(g)
    assert len(report.rewrites) == 1
    a = np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32) * 100
    (d,) = evaluate(after, [a])
    assert not np.isnan(d).any() and (np.diag(d) == 0).all()


def _self(a: Any) -> Any:
    return jnp.sum((a[:, None] - a[None]) ** 2, -1)


# consumers for which "about 0" is not 0: the quadratic form's rounding noise at a point's
# distance to itself gave sqrt 0.002, `> 0` True and floor(exp(-d/2)) 0 where JAX gives 0,
# False and 1
AT_ZERO: dict[str, Callable[..., Any]] = {
    "sqrt": lambda a: jnp.sqrt(_self(a)),
    "positive": lambda a: _self(a) > 0.0,
    "floor-exp": lambda a: jnp.floor(jnp.exp(-0.5 * _self(a))),
}


def _backend(name: str) -> str:
    if name == "cpu":
        pytest.importorskip("numba")
    return name


@pytest.mark.parametrize("backend", ["reference", "cpu", "jax"])
@pytest.mark.parametrize("shape", [(50, 3), (500, 64), (64, 300)], ids=str)
@pytest.mark.parametrize("name", AT_ZERO)
def test_self_distances_are_exact_at_zero(name: str, shape: tuple[int, int], backend: str,
                                          ) -> None:
    fn = AT_ZERO[name]
    a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    t = gx.explore(fn, a)
    (stage,) = [s for s in t.stages if s.name == "euclidean-distance"]
    assert [r.rule for r in stage.report.rewrites] == [RULE_NAME]
    got, want = np.asarray(t.run(a, backend=_backend(backend)).value), np.asarray(jax.jit(fn)(a))
    np.testing.assert_array_equal(np.diag(got), np.diag(want))
    if name == "sqrt":  # within the square root of the documented tolerance
        scale = 2 * np.max(np.sum(a * a, -1))
        tol = np.sqrt((noise_bound("f32", shape[1]) + 32 * 2.0**-24) * scale)
        np.testing.assert_allclose(got, want, rtol=0, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_points_two_sets_share_are_exact_at_zero(backend: str) -> None:
    """Distinct operands with coincident points (a test set inside the training set): zero
    there too, under sqrt and comparisons; elsewhere within the documented tolerance."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((40, 64)).astype(np.float32)
    b = np.concatenate([a[::4], rng.standard_normal((20, 64)).astype(np.float32)])
    fn = lambda a, b: (_naive(a, b), _naive(a, b) > 0.0)  # noqa: E731
    t = gx.explore(fn, a, b)
    assert "sub" not in t.final.graph.ops()
    (d, apart) = (np.asarray(v) for v in t.run(a, b, backend=_backend(backend)).value)
    want_d, want_apart = (np.asarray(v) for v in jax.jit(fn)(a, b))
    i = np.arange(10)
    assert (d[4 * i, i] == 0).all()
    np.testing.assert_array_equal(apart, want_apart)
    norms = np.sum(a * a, -1)[:, None] + np.sum(b * b, -1)[None, :]
    assert (np.abs(d - want_d) <= (noise_bound("f32", 64) + 32 * 2.0**-24) * norms).all()


def test_nan_propagates_and_negatives_clamp() -> None:
    g = _graph(_naive, (6, 3), (5, 3))
    after, _ = EuclideanDistance()(g)
    a, b = np.random.default_rng(3).standard_normal((2, 6, 3)).astype(np.float32)
    a[1, 0] = np.nan
    b[:5] = a[:5]  # coincident points where the form may round below 0
    (d,) = evaluate(after, [a, b[:5]])
    (want,) = evaluate(g, [a, b[:5]])
    assert np.isnan(d[1]).all() and np.isnan(want[1]).all()
    assert (d >= 0).all(where=~np.isnan(d)) and (d[[0, 2, 3, 4], [0, 2, 3, 4]] == 0).all()


def test_infinite_inputs_give_nan_where_the_naive_form_gives_inf() -> None:
    """The documented divergence (module doc, README): inf - inf in the quadratic form where
    the infinite coordinate meets a coordinate of the same sign (or 0) in the other point."""
    g = _graph(_naive, (2, 3), (2, 3))
    after, _ = EuclideanDistance()(g)
    a = np.array([[np.inf, 1, 2], [1, 2, 3]], np.float32)
    b = np.array([[1, 1, 1], [-1, 0, 2]], np.float32)
    (want,) = evaluate(g, [a, b])
    (got,) = evaluate(after, [a, b])
    assert (want[0] == np.inf).all()
    assert np.isnan(got[0, 0]) and got[0, 1] == np.inf  # b[0, 0] = 1 > 0; b[1, 0] = -1 < 0
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5)


def test_the_bias_costs_no_op() -> None:
    """Exactness at zero comes from the cross term's constant, -2(1 + c), not from extra
    elementwise ops on the N x M result: one mul by a constant, one max, as without it."""
    after, _ = EuclideanDistance()(_graph(_naive, (6, 3), (5, 3)))
    ops = after.ops()
    assert ops["max"] == 1 and "select_n" not in ops and "lt" not in ops
    consts = [n.attrs["value"].array for n in after.nodes if n.op == "constant"]
    # (3 features: computed in float64, so the float64 bound)
    assert -2.0 * (1 + noise_bound("f64", 3)) in [float(np.asarray(c)) for c in consts]


@pytest.mark.parametrize("dtype, features, units", [
    ("f32", 3, 10), ("f32", 62, 128), ("f32", 1024, 128), ("f64", 3, 10), ("bf16", 3, 10)])
def test_noise_bound_grows_with_features_up_to_a_cap(dtype: str, features: int, units: int,
                                                      ) -> None:
    bits = {"f32": 24, "f64": 53, "bf16": 8}[dtype]
    assert noise_bound(dtype, features) == units * 2.0 ** -bits


def _diff_reused(a: Any, b: Any) -> Any:
    d = a[:, None, :] - b[None, :, :]
    return jnp.sum(d**2, -1), d


def _square_reused(a: Any, b: Any) -> Any:
    s = (a[:, None, :] - b[None, :, :]) ** 2
    return jnp.sum(s, -1), jnp.max(s, -1)


NOT_DISTANCES: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]]]] = {
    "difference-reused": (_diff_reused, [(6, 3), (5, 3)]),
    "square-reused": (_square_reused, [(6, 3), (5, 3)]),
    "sum-over-point-axis": (lambda a, b: jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, 0),
                            [(6, 3), (6, 3)]),
    "row-wise": (lambda a, b: jnp.sum((a - b) ** 2, -1), [(6, 3), (6, 3)]),
    "one-sided": (lambda a, v: jnp.sum((a - v[None, :]) ** 2, -1), [(6, 3), (3,)]),
    "single-feature": (_naive, [(6, 1), (5, 1)]),  # no N x M x K temporary to save
    "cube": (lambda a, b: jnp.sum((a[:, None, :] - b[None, :, :]) ** 3, -1), [(6, 3), (5, 3)]),
    "sum-not-difference": (lambda a, b: jnp.sum((a[:, None, :] + b[None, :, :]) ** 2, -1),
                           [(6, 3), (5, 3)]),
    "constant-along-feature": (
        lambda a, b: jnp.sum((a[:, None, :] - b[None, :, None]) ** 2, -1), [(6, 3), (5,)]),
}


@pytest.mark.parametrize("name", NOT_DISTANCES)
def test_non_distances_are_left_alone(name: str) -> None:
    fn, shapes = NOT_DISTANCES[name]
    g = _graph(fn, *shapes)
    after, report = check_semantics(EuclideanDistance(), g)
    assert report.rewrites == () and after == g


def test_integer_distances_are_left_alone() -> None:
    g = trace(_naive, np.zeros((6, 3), np.int32), np.zeros((5, 3), np.int32)).graph
    assert EuclideanDistance()(g)[1].rewrites == ()


@pytest.mark.parametrize("seed", range(30))
def test_random_axis_layouts(seed: int) -> None:
    """Point axes of a and of b, feature and batch axes, in random orders on both sides and
    in the difference; the rewrite fires when each side has a point axis and there is a
    feature axis (all of size > 1)."""
    rng = np.random.default_rng(seed)
    roles = ["a", "b", "feature"] + [str(r) for r in rng.choice(["a", "b", "feature", "batch"],
                                                               size=int(rng.integers(0, 3)))]
    sizes = [int(s) for s in rng.integers(2, 5, size=len(roles))]
    order = [int(i) for i in rng.permutation(len(roles))]
    a_axes = [int(i) for i in rng.permutation([i for i, r in enumerate(roles) if r != "b"])]
    b_axes = [int(i) for i in rng.permutation([i for i, r in enumerate(roles) if r != "a"])]

    def lift(t: Any, axes: list[int]) -> Any:
        t = jnp.transpose(t, [axes.index(a) for a in order if a in axes])
        return jnp.expand_dims(t, tuple(k for k, a in enumerate(order) if a not in axes))

    def fn(a: Any, b: Any) -> Any:
        d = lift(b, b_axes) - lift(a, a_axes) if seed % 2 else lift(a, a_axes) - lift(b, b_axes)
        summed = tuple(k for k, a in enumerate(order) if roles[a] == "feature")
        return jnp.sum(d**2, axis=summed)

    g = _graph(fn, tuple(sizes[i] for i in a_axes), tuple(sizes[i] for i in b_axes))
    _, report = check_semantics(EuclideanDistance(), g)
    features = math.prod(s for s, r in zip(sizes, roles) if r == "feature")
    assert len(report.rewrites) == (features > 2)  # 2 float32 features: left naive


@pytest.mark.parametrize("dtype, features, wide", [
    ("f32", 3, "f64"), ("f32", 32, "f64"), ("f32", 33, None), ("f64", 3, None),
    ("f16", 3, "f32"), ("bf16", 8, "f32")])
def test_few_features_are_computed_wider(dtype: str, features: int, wide: str | None) -> None:
    """Up to 32 features the norms, the cross term and their sum are formed in the next wider
    float type and rounded once at the end; beyond that (the product is compute-bound) or in
    float64, in the input's own type."""
    after, report = EuclideanDistance()(_graph(_naive, (6, features), (5, features), dtype=dtype))
    assert len(report.rewrites) == 1
    dot = next(n for n in after.nodes if n.op == "dot_general")
    converts = [n for n in after.nodes if n.op == "convert_element_type"]
    if wide is None:
        assert dot.dtype == dtype and not converts
    else:
        assert dot.dtype == wide and len(converts) == 3
        assert after[after.outputs[0]].dtype == dtype


@pytest.mark.parametrize("limit, wide", [(32, None), (64, "f64"), (0, None)])
def test_the_wide_form_s_feature_limit_is_an_option(limit: int, wide: str | None) -> None:
    """`euclidean-distance{wide-max-features=64}` takes 64 float32 features wide; the
    default (32) does not; 0 never does. The values keep within the semantic test either way."""
    p = gx.passes.pipeline.parse_spec(f"euclidean-distance{{wide-max-features={limit}}}")[0]
    assert p.wide_max_features == limit
    after, report = check_semantics(p, _graph(_naive, (6, 64), (5, 64)))
    dot = next(n for n in after.nodes if n.op == "dot_general")
    assert len(report.rewrites) == 1 and dot.dtype == (wide or "f32")


_GPU = registry.unavailable_reason("gpu")


@pytest.mark.parametrize("backend", ["reference", "cpu", "jax", pytest.param(
    "gpu", marks=pytest.mark.skipif(_GPU is not None, reason=f"GPU backend unavailable: {_GPU}"))])
def test_nearest_neighbours_are_those_of_the_naive_program(backend: str) -> None:
    """kNN over points far from the origin next to their spacing (|a|^2 about 3e4, distances
    about 1e-4): the float32 quadratic form cancels all of its digits there, so only the
    wider form finds the neighbours that jax.jit of the naive program finds, wherever their
    float64 distances are not near-ties."""
    rng = np.random.default_rng(3)
    x = (100 + 0.01 * rng.random((300, 3))).astype(np.float32)
    y = (100 + 0.01 * rng.random((2000, 3))).astype(np.float32)

    def knn(a: Any, b: Any) -> Any:
        return jax.lax.top_k(-_naive(a, b), 8)[1]

    t = gx.explore(knn, x, y)
    assert any(r.rule == RULE_NAME for s in t.stages for r in s.report.rewrites)
    got = np.asarray(t.run(backend=backend).value)
    want = np.asarray(jax.jit(knn)(x, y))
    d64 = ((x[:, None, :].astype(np.float64) - y[None].astype(np.float64)) ** 2).sum(-1)
    for row in np.nonzero((got != want).any(1))[0]:  # differing rows: near-ties only
        ours, theirs = np.sort(d64[row, got[row]]), np.sort(d64[row, want[row]])
        np.testing.assert_allclose(ours, theirs, rtol=8 * 2.0**-24)
    assert (got == want).mean() > 0.99


# ---------------------------------------------------------------- remarks


def _pairwise(a, b):  # type: ignore[no-untyped-def]
    return jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, -1)


def test_declined_with_two_features_says_why() -> None:
    g = trace(_pairwise, np.ones((6, 2), np.float32), np.ones((5, 2), np.float32)).graph
    out, report = EuclideanDistance()(g)
    assert out == g
    (r,) = report.remarks
    assert (r.pass_, r.kind, r.rule) == ("euclidean-distance", "missed", RULE_NAME)
    assert "2 f32 features" in r.reason and "no smaller than the difference" in r.reason
    assert r.source is not None and r.source.endswith(f":{_pairwise.__code__.co_firstlineno + 1}")


def test_declined_when_the_difference_is_read_elsewhere() -> None:
    def f(a, b):  # type: ignore[no-untyped-def]
        d = a[:, None, :] - b[None, :, :]
        return jnp.sum(d**2, -1), d

    _, report = EuclideanDistance()(trace(f, np.ones((6, 8), np.float32),
                                          np.ones((5, 8), np.float32)).graph)
    (r,) = report.remarks
    assert "read elsewhere too" in r.reason


def test_no_remark_when_it_fires_or_without_broadcasts() -> None:
    _, fired = EuclideanDistance()(trace(_pairwise, np.ones((6, 8), np.float32),
                                         np.ones((5, 8), np.float32)).graph)
    assert fired.rewrites and fired.remarks == ()

    def rowwise(a, b):  # type: ignore[no-untyped-def]
        return jnp.sum((a - b) ** 2, -1)

    _, plain = EuclideanDistance()(trace(rowwise, *[np.ones((6, 8), np.float32)] * 2).graph)
    assert plain.remarks == ()
