"""euclidean-distance: before-vs-after semantics (with a tolerance: the quadratic form is not
bit-exact) over axis orders, scalings, consumers, shapes and float types; and where it must
not fire."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

from explorer.analysis.cost import graph_cost
from explorer.backends.reference import evaluate
from explorer.frontend.jax import trace
from explorer.ir import Graph, parse
from explorer.passes.euclidean_distance import RULE_NAME, EuclideanDistance
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


def test_identical_points_give_no_nan_under_sqrt() -> None:
    g = _graph(lambda a: jnp.sqrt(_naive(a, a)), (8, 5))
    after, report = EuclideanDistance()(g)
    assert len(report.rewrites) == 1
    a = np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32) * 100
    (d,) = evaluate(after, [a])
    assert not np.isnan(d).any()
    # the diagonal is zero up to the cancellation error, sqrt(eps * |a|^2)
    assert np.abs(np.diag(d)).max() < np.sqrt(1e-6 * 2 * np.max(np.sum(a * a, -1)))


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
    assert len(report.rewrites) == 1
