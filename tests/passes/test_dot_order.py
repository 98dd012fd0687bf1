"""dot-order: the chain DP against brute force, and before-vs-after semantics on many chains."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from explorer.analysis.cost import graph_cost
from explorer.frontend.jaxpr import trace
from explorer.ir import Graph
from explorer.passes.dot_order import DotOrder, Leaf, _best, _tree_cost
from tests.passes.semantic import check_semantics

RULE = "reassociate-dot-chain"


def _graph(fn: Callable[..., Any], *shapes: tuple[int, ...]) -> Graph:
    return trace(fn, *(np.zeros(s, np.float32) for s in shapes)).graph


# ---------------------------------------------------------------- the dynamic programme


def _trees(i: int, j: int) -> Iterator[Any]:
    """Every parenthesisation of leaves i..j."""
    if i == j:
        yield Leaf(i, 0, 1)
        return
    for k in range(i, j):
        for left in _trees(i, k):
            for right in _trees(k + 1, j):
                yield (left, right)


@pytest.mark.parametrize("seed", range(40))
def test_dp_finds_the_cheapest_parenthesisation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    dims = {i: int(d) for i, d in enumerate(rng.integers(1, 40, size=n + 1))}
    leaves = [Leaf(i, 0, 1) for i in range(n)]
    cost, tree = _best(dims, leaves, batch=2, item=4)
    brute = min(_tree_cost(t, dims, 0, 2, 4) for t in _trees(0, n - 1))
    assert cost == brute == _tree_cost(tree, dims, 0, 2, 4)


def test_ties_in_flops_are_broken_by_intermediate_bytes() -> None:
    # A 2x2, B 2x2, C 2x3, D 3x6, E 6x3: ((((A B) C) D) E) and (((A B) C) (D E)) both cost
    # 184 FLOPs; the second keeps 25 intermediate elements instead of 28.
    g = _graph(lambda a, b, c, d, e: (((a @ b) @ c) @ d) @ e,
               (2, 2), (2, 2), (2, 3), (3, 6), (6, 3))
    after, report = check_semantics(DotOrder(), g)
    assert [r.rule for r in report.rewrites] == [RULE]
    assert graph_cost(after).flops == graph_cost(g).flops == 184
    assert graph_cost(after).bytes < graph_cost(g).bytes


# ---------------------------------------------------------------- semantics and firing

def _shared(a: Any, b: Any, v: Any) -> Any:
    ab = a @ b
    return ab @ v, ab


# name -> (fn, shapes, fires): chains the pass must re-associate (fires=True) or leave alone.
CHAINS: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]], bool]] = {
    "matrix-vector": (lambda a, b, v: (a @ b) @ v, [(8, 6), (6, 5), (5,)], True),
    "vector-matrix": (lambda v, a, b: v @ (a @ b), [(8,), (8, 6), (6, 5)], True),
    "transpose-of-dot": (lambda a, b, u: (a @ b).T @ u, [(8, 6), (6, 5), (8,)], True),
    "dot-of-transposes": (lambda a, b, v: (a.T @ b.T) @ v, [(6, 8), (5, 6), (5,)], True),
    "transposed-result": (lambda a, b, c: ((a @ b) @ c).T, [(30, 40), (40, 50), (50, 2)], True),
    "four": (lambda a, b, c, d: ((a @ b) @ c) @ d, [(10, 30), (30, 5), (5, 60), (60, 2)], True),
    "batched": (lambda a, b, c: (a @ b) @ c, [(3, 8, 6), (3, 6, 5), (3, 5, 1)], True),
    "batched-einsum": (lambda a, b, v: jnp.einsum("bij,bj->bi", a @ b, v),
                       [(2, 7, 6), (2, 6, 5), (2, 5)], True),
    "mixed": (lambda a, b, c, v: (((a @ b).T @ c) @ v), [(9, 8), (8, 7), (9, 6), (6,)], True),
    "two-users": (_shared, [(8, 6), (6, 5), (5,)], False),
    "optimal": (lambda a, b, c: (a @ b) @ c, [(10, 100), (100, 5), (5, 50)], False),
    "single-dot": (lambda a, b: a @ b, [(4, 5), (5, 6)], False),
    "batch-against-matrix": (lambda a, b, c: (a @ b) @ c, [(3, 8, 6), (6, 5), (5, 1)], False),
}


@pytest.mark.parametrize("name", CHAINS)
def test_chains_keep_their_values(name: str) -> None:
    fn, shapes, fires = CHAINS[name]
    g = _graph(fn, *shapes)
    after, report = check_semantics(DotOrder(), g)
    assert bool(report.rewrites) == fires == report.changed
    assert all(r.rule == RULE and r.source for r in report.rewrites)
    before_cost, after_cost = graph_cost(g), graph_cost(after)
    assert after_cost.flops < before_cost.flops if fires else after == g
    if fires:  # the pass settles: a second run finds nothing better
        assert DotOrder()(after)[1].rewrites == ()


@pytest.mark.parametrize("seed", range(12))
def test_random_chains(seed: int) -> None:
    """Random dims, random association: never worse, always the same values."""
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3, 6))
    dims = [int(d) for d in rng.integers(1, 12, size=n + 1)]
    vector_end = bool(rng.integers(2))

    def fn(*ms: Any) -> Any:
        acc = ms[0]
        for m in ms[1:]:
            acc = acc @ m
        return acc

    shapes = [(dims[i], dims[i + 1]) for i in range(n)]
    if vector_end:
        shapes[-1] = (dims[n - 1],)
    g = _graph(fn, *shapes)
    after, _ = check_semantics(DotOrder(), g)
    assert graph_cost(after).flops <= graph_cost(g).flops


def test_unchanged_nodes_keep_their_ids_and_new_ones_are_fresh() -> None:
    g = _graph(lambda a, b, v: jnp.tanh((a @ b) @ v), (8, 6), (6, 5), (5,))
    after, report = DotOrder()(g)
    (rw,) = report.rewrites
    kept = {n.id for n in after.nodes} - set(rw.after)
    assert all(after[i].op == g[i].op for i in kept)
    assert min(rw.after) >= g.next_id
    assert after[after.outputs[0]].op == "tanh" and after.outputs == g.outputs


def test_reassociation_through_an_infinity_can_turn_inf_into_nan() -> None:
    """README (Numerics): in the user's order, (x0 @ x1) @ x2 spreads x0's -inf over a row
    of infinities of both signs and then adds them: NaN, as JAX gives. dot-order's
    x0 @ (x1 @ x2) multiplies the -inf by one finite number: an infinity. The fuzz's
    DOT_ORDER_INF counts this as documented."""
    import jax.numpy as jnp

    import explorer as gx
    from explorer.backends import registry

    x0 = np.array([[-np.inf], [-0.31137892603874207]], np.float32)
    x1 = np.array([[-6.409552097320557, -2.8329436779022217, -0.10207203775644302]], np.float32)
    x2 = np.array([-0.7418578267097473, 0.3659997582435608, -1.2209938764572144], np.float32)
    tr = gx.explore(lambda a, b, c: (a @ b) @ c, x0, x1, x2)
    assert tr.stage("dot-order").report.rewrites
    want = np.asarray((jnp.asarray(x0) @ jnp.asarray(x1)) @ jnp.asarray(x2))
    got = registry.run_graph(tr.stage("dot-order").graph, [x0, x1, x2], "reference").outputs[0]
    traced = registry.run_graph(tr.stages[0].graph, [x0, x1, x2], "reference").outputs[0]
    np.testing.assert_array_equal(traced, want)  # the user's order: as JAX
    assert np.isnan(want[0]) and np.isinf(got[0])
    assert np.isclose(got[1], want[1], rtol=1e-5)


# ---------------------------------------------------------------- a scalar factor out of a dot

SCALE = "scale-out-of-dot"


def _two_users(x: Any, w: Any) -> Any:
    xs = x * 0.5
    return xs @ w, xs


def _i32(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *a: fn(*(v.astype(jnp.int32) for v in a))


# name -> (fn, shapes, rules that fire): the factor moves to the result only where the
# operand has more elements than the result, the product is read by the dot alone, and a
# division is by a float.
SCALED: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]], list[str]]] = {
    "constant-lhs": (lambda x, w: (x * 0.125) @ w, [(64, 32), (32, 8)], [SCALE]),
    "constant-first": (lambda x, w: (0.125 * x) @ w, [(64, 32), (32, 8)], [SCALE]),
    "rhs": (lambda x, w: x @ (w * 3.0), [(8, 32), (32, 64)], [SCALE]),
    "divided-by-a-parameter": (lambda x, w, t: (x / t) @ w, [(64, 32), (32, 8), ()], [SCALE]),
    "both-operands": (lambda x, w, t: (x * t) @ (w * 2.0), [(20, 100), (100, 10), ()],
                      [SCALE, SCALE]),
    "batched-attention-scores": (lambda q, k: jnp.einsum("bqd,bkd->bqk", q * 0.25, k),
                                 [(2, 16, 64), (2, 8, 64)], [SCALE]),
    "vector-result": (lambda x, v: (x * 2.0) @ v, [(16, 8), (8,)], [SCALE]),
    "int-multiply": (_i32(lambda x, w: (x * 3) @ w), [(16, 8), (8, 2)], [SCALE]),
    "cheaper-on-the-operand": (lambda x, w: (x * 0.125) @ w, [(8, 4), (4, 64)], []),
    "product-read-twice": (_two_users, [(64, 32), (32, 8)], []),
    "elementwise-factor": (lambda x, y, w: (x * y) @ w, [(64, 32), (64, 32), (32, 8)], []),
    "int-division": (_i32(lambda x, w: (x // 3) @ w), [(16, 8), (8, 2)], []),
}


@pytest.mark.parametrize("name", SCALED)
def test_a_scalar_factor_moves_to_the_smaller_side(name: str) -> None:
    fn, shapes, fired = SCALED[name]
    g = _graph(fn, *shapes)
    after, report = check_semantics(DotOrder(), g)
    assert [r.rule for r in report.rewrites] == fired
    assert all(r.source for r in report.rewrites)
    muls = lambda h: sum(math.prod(n.shape) for n in h.nodes  # noqa: E731
                         if n.op in ("mul", "div") and n.type.rank)
    if fired:
        assert muls(after) < muls(g)
        dots = [n for n in after.nodes if n.op == "dot_general"]
        assert all(after[i].op not in ("mul", "div") for d in dots for i in d.inputs)
        assert DotOrder()(after)[1].rewrites == ()  # it settles
    else:
        assert after == g


def test_a_scaled_dot_becomes_one_output_kernel() -> None:
    """The moved factor is an epilogue: the final stage computes the dot and scales its
    result in one output kernel, with no pass over the scaled operand."""
    import explorer as gx

    x, w = (np.random.default_rng(0).standard_normal(s).astype(np.float32)
            for s in ((128, 64), (64, 16)))
    tr = gx.explore(lambda x, w: jax.nn.relu((x / 8.0) @ w), x, w)
    final = tr.stages[-1].graph
    (k,) = [n for n in final.nodes if n.op == "kernel"]
    assert k.attrs["kind"] == "output" and len(final.nodes) == 3  # two parameters, one kernel
    got = gx.compile(lambda x, w: jax.nn.relu((x / 8.0) @ w))(x, w)
    np.testing.assert_allclose(np.asarray(got), np.maximum((x / 8) @ w, 0), rtol=1e-5,
                               atol=1e-6)


# ---------------------------------------------------------------- remarks


def test_a_chain_already_cheapest_says_so_with_both_costs() -> None:
    def f(a, b, c):  # type: ignore[no-untyped-def]
        return (a @ b) @ c  # (A B) C: 10*100*5 + 10*5*50 multiply-adds, the cheapest

    args = [np.ones(s, np.float32) for s in ((10, 100), (100, 5), (5, 50))]
    g = trace(f, *args).graph
    out, report = DotOrder()(g)
    assert out == g and not report.rewrites
    (r,) = report.remarks
    assert (r.pass_, r.kind, r.rule) == ("dot-order", "analysis", "reassociate-dot-chain")
    assert r.source is not None and r.source.endswith(f":{f.__code__.co_firstlineno + 1}")
    assert "10x100 @ 100x5 @ 5x50" in r.reason
    assert f"{2 * (10 * 100 * 5 + 10 * 5 * 50):,} FLOPs" in r.reason  # written = best
    assert r.nodes == (g.outputs[0],)


def test_no_remark_when_the_chain_is_reordered() -> None:
    def f(a, b, v):  # type: ignore[no-untyped-def]
        return (a @ b) @ v

    args = [np.ones(s, np.float32) for s in ((40, 30), (30, 20), (20,))]
    _, report = DotOrder()(trace(f, *args).graph)
    assert [r.rule for r in report.rewrites] == ["reassociate-dot-chain"]
    assert report.remarks == ()  # not even on the new, cheapest chain it made
