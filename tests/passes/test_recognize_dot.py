"""recognize-dot: before-vs-after semantics over forms and shapes, and where it must not fire."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from explorer.analysis.cost import graph_cost
from explorer.frontend.jaxpr import trace
from explorer.ir import Graph
from explorer.passes.recognize_dot import RecognizeDot
from tests.passes.semantic import check_semantics

RULE = "broadcast-mul-sum-to-dot"


def _graph(fn: Callable[..., Any], *shapes: tuple[int, ...], dtype: Any = np.float32) -> Graph:
    return trace(fn, *(np.zeros(s, dtype) for s in shapes)).graph


def _tile_gemm(a: Any, b: Any) -> Any:
    return jnp.sum(jnp.tile(jnp.expand_dims(a, -1), [1, 1, b.shape[1]])
                   * jnp.tile(jnp.expand_dims(b, 0), [a.shape[0], 1, 1]), axis=1)


def _shared(a: Any, b: Any) -> Any:
    p = a[:, :, None] * b[None, :, :]
    return jnp.sum(p, axis=1), p


# name -> (fn, shapes (n, k, m) -> operand shapes): forms that are matrix products.
PRODUCTS: dict[str, tuple[Callable[..., Any], Callable[[int, int, int], list[tuple[int, ...]]]]] = {
    "gemm2": (lambda a, b: jnp.sum(a[:, :, None] * b[None, :, :], axis=1),
              lambda n, k, m: [(n, k), (k, m)]),
    "gemm2-swapped": (lambda a, b: jnp.sum(b[None, :, :] * a[:, :, None], axis=1),
                      lambda n, k, m: [(n, k), (k, m)]),
    "tile": (_tile_gemm, lambda n, k, m: [(n, k), (k, m)]),
    "broadcast_to": (lambda a, b: jnp.sum(jnp.broadcast_to(a[:, :, None], (*a.shape, b.shape[1]))
                                          * b[None], axis=1), lambda n, k, m: [(n, k), (k, m)]),
    "contract-first": (lambda x, y: jnp.sum(y[:, None, :] * x[:, :, None], axis=0),
                       lambda n, k, m: [(k, n), (k, m)]),
    "contract-last": (lambda a, b: jnp.sum(a[:, None, :] * b[None, :, :], axis=2),
                      lambda n, k, m: [(n, k), (m, k)]),
    "transposed-output": (lambda a, b: jnp.sum(a[None, :, :] * b.T[:, :, None], axis=1),
                          lambda n, k, m: [(k, n), (k, m)]),
    "batched": (lambda x, y: jnp.sum(x[:, :, :, None] * y[:, None, :, :], axis=2),
                lambda n, k, m: [(2, n, k), (2, k, m)]),
    "batch-in-middle": (lambda x, y: jnp.sum(x[:, :, :, None] * y[None, :, :, :], axis=2),
                        lambda n, k, m: [(n, 3, k), (3, k, m)]),
    "matvec": (lambda a, v: jnp.sum(a * v[None, :], axis=1), lambda n, k, m: [(n, k), (k,)]),
    "vecmat": (lambda v, b: jnp.sum(v[:, None] * b, axis=0), lambda n, k, m: [(k,), (k, m)]),
    "two-contracting": (lambda x, y: jnp.sum(x[:, :, :, None] * y[None, :, :, :], axis=(1, 2)),
                        lambda n, k, m: [(n, k, 2), (k, 2, m)]),
    "batch-only": (lambda x, y: jnp.sum(x[:, None, :] * y[:, None, :], axis=2),
                   lambda n, k, m: [(n, k), (n, k)]),
    "self-product": (lambda a: jnp.sum(a[:, :, None] * a[None, :, :], axis=1),
                     lambda n, k, m: [(k, k)]),
}

SHAPES = [(4, 5, 6), (7, 3, 2), (2, 9, 5)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", PRODUCTS)
def test_products_become_dots(name: str, shape: tuple[int, int, int]) -> None:
    fn, operand_shapes = PRODUCTS[name]
    g = _graph(fn, *operand_shapes(*shape))
    after, report = check_semantics(RecognizeDot(), g)
    assert [r.rule for r in report.rewrites] == [RULE], name
    assert report.rewrites[0].source == str(g.output_nodes[0].source)
    ops = after.ops()
    assert "mul" not in ops and "reduce_sum" not in ops and ops["dot_general"] == 1
    assert graph_cost(after).peak_bytes <= graph_cost(g).peak_bytes


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float16, ml_dtypes.bfloat16])
def test_other_element_types(dtype: Any) -> None:
    g = _graph(PRODUCTS["gemm2"][0], (4, 5), (5, 3), dtype=dtype)
    _, report = check_semantics(RecognizeDot(), g)
    assert len(report.rewrites) == 1


# name -> (fn, operand shapes): sums of products that are not matrix products, or must stay.
NOT_PRODUCTS: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]]]] = {
    "sum-over-one-operand": (lambda a, b: jnp.sum(a[:, :, None] * b[None, :, :], axis=0),
                             [(4, 5), (5, 6)]),
    "product-has-two-users": (_shared, [(4, 5), (5, 6)]),
    "unbroadcast-elementwise": (lambda x, y: jnp.sum(x * y, axis=1), [(3, 4), (3, 4)]),
    "outer-product-no-sum": (lambda a, b: jnp.sum(a[:, None, :] * b[None, :, :], axis=()),
                             [(4, 5), (6, 5)]),
    "sum-of-sum": (lambda a, b: jnp.sum(a[:, :, None] + b[None, :, :], axis=1), [(4, 5), (5, 6)]),
    "max-not-sum": (lambda a, b: jnp.max(a[:, :, None] * b[None, :, :], axis=1), [(4, 5), (5, 6)]),
    "both-broadcast-along-summed-axis": (
        lambda a, b: jnp.sum(jnp.broadcast_to(a[:, None, :], (4, 3, 5))
                             * jnp.broadcast_to(b[:, None, :], (4, 3, 5)), axis=1),
        [(4, 5), (4, 5)]),
    "outer-product-over-unit-axis": (lambda a, b: jnp.sum(a[:, :, None] * b[None, :, :], axis=1),
                                     [(4, 1), (1, 6)]),
    "boolean": (lambda a, b: jnp.sum(a[:, :, None] * b[None, :, :], axis=1), "bool"),
}


@pytest.mark.parametrize("name", NOT_PRODUCTS)
def test_non_products_are_left_alone(name: str) -> None:
    fn, shapes = NOT_PRODUCTS[name]
    if shapes == "bool":
        g = _graph(fn, (4, 5), (5, 6), dtype=np.bool_)
    else:
        g = _graph(fn, *shapes)
    after, report = check_semantics(RecognizeDot(), g)
    assert report.rewrites == () and not report.changed and after == g


def test_unit_dimensions_and_untouched_ids() -> None:
    g = _graph(lambda a, b, c: jnp.tanh(jnp.sum(a[:, :, None] * b[None, :, :], axis=1)) + c,
               (1, 5), (5, 6), (1, 6))
    after, report = check_semantics(RecognizeDot(), g)
    assert len(report.rewrites) == 1
    assert [n.id for n in after.nodes if n.op == "tanh"] == [n.id for n in g.nodes if n.op == "tanh"]


def _random_product(rng: np.random.Generator, sizes: list[int]) -> tuple[Any, list, bool]:
    """A random sum of a broadcast product: each axis belongs to x, y or both, summed or
    kept, in random orders. Returns (fn, operand shapes, whether it is a matrix product)."""
    roles = [str(r) for r in rng.choice(["x", "y", "sum", "batch"], size=len(sizes))]
    order = [int(i) for i in rng.permutation(len(sizes))]  # the product's axis order
    xs = [int(i) for i in rng.permutation([i for i, r in enumerate(roles) if r != "y"])]
    ys = [int(i) for i in rng.permutation([i for i, r in enumerate(roles) if r != "x"])]

    def lift(t: Any, axes: list[int]) -> Any:
        present = [a for a in order if a in axes]
        t = jnp.transpose(t, [axes.index(a) for a in present])
        return jnp.expand_dims(t, tuple(k for k, a in enumerate(order) if a not in axes))

    def fn(x: Any, y: Any) -> Any:
        p = lift(x, xs) * lift(y, ys)
        return jnp.sum(p, axis=tuple(k for k, a in enumerate(order) if roles[a] == "sum"))

    big = [r for r, s in zip(roles, sizes, strict=True) if s > 1]
    product = "sum" in big and ("x" in big or "y" in big) and "x" in roles and "y" in roles
    return fn, [tuple(sizes[a] for a in xs), tuple(sizes[a] for a in ys)], product


@pytest.mark.parametrize("seed", range(60))
def test_random_axis_layouts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = [int(s) for s in rng.choice([0, 1, 2, 3, 4], size=int(rng.integers(2, 6)),
                                        p=[0.05, 0.15, 0.3, 0.25, 0.25])]
    fn, shapes, product = _random_product(rng, sizes)
    g = _graph(fn, *shapes)
    _, report = check_semantics(RecognizeDot(), g)
    if product and 0 not in sizes:
        assert len(report.rewrites) == 1


# ---------------------------------------------------------------- remarks


def test_a_broadcast_product_that_almost_matched_names_the_condition() -> None:
    def f(a, b):  # type: ignore[no-untyped-def]
        prod = a[:, :, None] * b[None, :, :]
        return jnp.sum(prod, axis=1), prod  # the product is an output too

    g = trace(f, np.ones((4, 5), np.float32), np.ones((5, 6), np.float32)).graph
    out, report = RecognizeDot()(g)
    assert out == g
    (r,) = report.remarks
    assert (r.pass_, r.kind, r.rule) == ("recognize-dot", "missed", "broadcast-mul-sum-to-dot")
    assert "read elsewhere too (an output)" in r.reason
    assert r.source is not None and r.source.endswith(f":{f.__code__.co_firstlineno + 2}")
    assert g[r.nodes[1]].op == "mul" and g[r.nodes[0]].op == "reduce_sum"


def test_a_sum_over_one_operands_axis_is_not_a_product() -> None:
    def f(a, b):  # type: ignore[no-untyped-def]
        return jnp.sum(a[:, :, None] * b[None, :, :], axis=0)

    _, report = RecognizeDot()(trace(f, np.ones((4, 5), np.float32),
                                     np.ones((5, 6), np.float32)).graph)
    (r,) = report.remarks
    assert "axis 0 (size 4) is summed but indexes the first operand only" in r.reason


def test_no_remark_when_it_fires_or_for_a_plain_product() -> None:
    def gemm(a, b):  # type: ignore[no-untyped-def]
        return jnp.sum(a[:, :, None] * b[None, :, :], axis=1)

    def rowdot(x, y):  # type: ignore[no-untyped-def]
        return jnp.sum(x * y, axis=1)

    _, fired = RecognizeDot()(trace(gemm, np.ones((4, 5), np.float32),
                                    np.ones((5, 6), np.float32)).graph)
    assert fired.rewrites and fired.remarks == ()
    _, plain = RecognizeDot()(trace(rowdot, *[np.ones((4, 5), np.float32)] * 2).graph)
    assert not plain.rewrites and plain.remarks == ()


# ---------------------------------------------------------------- bound for XLA (backend=jax)


@pytest.mark.parametrize("fn,shapes,fires", [
    (lambda a, v: jnp.sum(a * v[None, :], 1), [(4, 5), (5,)], False),  # matrix-vector
    (lambda g, s: jnp.mean(g * s[:, None, None], 0), [(6, 4, 5), (6,)], False),  # DP-SGD's mean
    (lambda a, b: jnp.sum(a[:, :, None] * b[None, :, :], 1), [(4, 5), (5, 6)], True),
    (lambda x, y: jnp.sum(x[:, :, :, None] * y[:, None, :, :], 2), [(2, 3, 4), (2, 4, 5)],
     True),  # batched matrix-matrix
])
def test_for_xla_matrix_vector_products_are_left_alone(fn, shapes, fires) -> None:  # noqa: ANN001
    g = _graph(fn, *shapes)
    after, report = check_semantics(RecognizeDot(backend="jax"), g)
    assert (RULE in {r.rule for r in report.rewrites}) is fires
    said = [r for r in report.remarks if "jax backend" in r.reason]
    assert bool(said) is not fires
    assert RULE in {r.rule for r in RecognizeDot()(g)[1].rewrites}  # elsewhere: a dot
