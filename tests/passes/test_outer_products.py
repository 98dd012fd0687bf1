"""dot-order's outer-product rules (passes/outer_products.py): per-example gradients' norms
and clipped sums without the B x m x n outer products, before vs after on the reference
interpreter, for traced JAX programs (vmap of grad, einsum spellings, several batch dims,
integers) and the cases left alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from explorer.frontend.jaxpr import trace
from explorer.ir import Graph
from explorer.passes import get
from explorer.passes.dot_order import DotOrder
from explorer.passes.pipeline import run_pipeline
from tests.corpora.wide import dp_sgd_grad
from tests.passes.semantic import check_semantics

RULES = {"contract-outer-product", "norm-of-outer-product"}


def _graph(fn: Callable[..., Any], *args: Any) -> Graph:
    return trace(fn, *args).graph


def _up_to_dot_order(g: Graph) -> Graph:
    return run_pipeline(g, [get(p) for p in ("simplify", "cse", "recognize-dot")])


def _outer_products(g: Graph) -> int:
    return sum(1 for n in g.nodes if n.op == "dot_general"
               and not n.attrs["dimension_numbers"][0][0])


def _fired(fn: Callable[..., Any], *args: Any) -> tuple[Graph, list[str]]:
    g = _up_to_dot_order(_graph(fn, *args))
    after, report = check_semantics(DotOrder(), g)
    return after, [r.rule for r in report.rewrites if r.rule in RULES]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dp_sgd_forms_no_outer_product(dtype: type) -> None:
    rng = np.random.default_rng(1)
    sizes = (5, 7, 4, 3)
    p = [(rng.standard_normal((a, c)).astype(dtype), rng.standard_normal(c).astype(dtype))
         for a, c in zip(sizes[:-1], sizes[1:])]
    xs, ys = rng.standard_normal((6, 5)).astype(dtype), rng.integers(0, 3, 6).astype(np.int32)
    x64 = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", dtype == np.float64)
    try:
        before = _up_to_dot_order(_graph(dp_sgd_grad, p, xs, ys))
    finally:
        jax.config.update("jax_enable_x64", x64)
    assert _outer_products(before) == 3  # one per layer
    after, report = check_semantics(DotOrder(), before)
    rules = [r.rule for r in report.rewrites]
    assert rules.count("norm-of-outer-product") == 3 and rules.count("contract-outer-product") == 3
    after, _ = get("dce")(after)
    assert _outer_products(after) == 0


def test_einsum_spellings_with_two_batch_dims() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    g = rng.standard_normal((4, 3, 6)).astype(np.float32)
    s = rng.standard_normal((3, 4)).astype(np.float32)

    def f(x: Any, g: Any, s: Any) -> Any:
        o = jnp.einsum("abi,baj->abij", x, g)
        return jnp.sum(o.reshape(3, 4, -1) ** 2, -1), jnp.einsum("abij,ab->ij", o, s)

    after, fired = _fired(f, x, g, s)
    assert sorted(fired) == sorted(RULES)
    assert _outer_products(get("dce")(after)[0]) == 0


def test_integer_outer_products_are_exact() -> None:
    rng = np.random.default_rng(3)
    x, g = rng.integers(-50, 50, (4, 3)).astype(np.int32), rng.integers(-50, 50, (4, 5)).astype(np.int32)
    s = rng.integers(-5, 5, 4).astype(np.int32)

    def f(x: Any, g: Any, s: Any) -> Any:
        o = jnp.einsum("bi,bj->bij", x, g)
        return jnp.sum(o.reshape(4, -1) * o.reshape(4, -1), 1), jnp.einsum("bij,b->ij", o, s)

    _, fired = _fired(f, x, g, s)  # check_semantics compares integers exactly
    assert sorted(fired) == sorted(RULES)


def test_unbatched_outer_product_norm() -> None:
    x, g = np.arange(1.0, 4.0, dtype=np.float32), np.arange(2.0, 7.0, dtype=np.float32)
    _, fired = _fired(lambda x, g: jnp.sum(jnp.einsum("i,j->ij", x, g) ** 2), x, g)
    assert fired == ["norm-of-outer-product"]


def test_left_alone_where_the_outer_product_is_read_otherwise() -> None:
    rng = np.random.default_rng(4)
    x, g = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    v = rng.standard_normal(3).astype(np.float32)

    def f(x: Any, g: Any, v: Any) -> Any:
        o = jnp.einsum("bi,bj->bij", x, g)
        # the whole sum (over the batch too), a contraction of a free dim, the values out
        return jnp.sum(o ** 2), jnp.einsum("bij,i->bj", o, v), o

    _, fired = _fired(f, x, g, v)
    assert fired == []
