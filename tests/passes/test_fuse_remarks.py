"""fuse's remarks (explorer/passes/fuse_remarks.py): every edge the pass leaves into a kernel is
explained. The issue's figure: on every zoo program (tests/corpora/zoo.py), every value a
kernel of the `fuse` stage reads from another kernel or from a node in no kernel (all but the
graph's parameters), in the graph and in every control-flow body, has a `missed` remark of the
fuse pass naming that producer and that kernel."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.ir.graph import Graph
from explorer.ir.ops import CONTROL_FLOW
from explorer.ir.ops.regions import bodies, body_path
from explorer.ir.remarks import Remark, disabled
from explorer.passes.fuse import Fuse
from explorer.passes.fuse_remarks import value
from tests.corpora.zoo import zoo

NAMES = sorted(zoo())


def edges(g: Graph, region: str = "") -> Iterator[tuple[str, int, int]]:
    """(region, producer, kernel) for every value a kernel reads that is not a parameter."""
    for n in g.nodes:
        if n.op == "kernel":
            for x in dict.fromkeys(n.inputs):
                if g[x].op != "parameter":
                    yield region, x, n.id
        if n.op in CONTROL_FLOW or n.op == "loop":
            for key, body in bodies(n):
                where = body_path(n, key)
                yield from edges(body, f"{region}/{where}" if region else where)


def unexplained(g: Graph, remarks: tuple[Remark, ...]) -> list[tuple[str, int, int]]:
    said = {(r.region, r.nodes) for r in remarks if r.pass_ == "fuse" and r.kind == "missed"}
    return [(region, x, k) for region, x, k in edges(g) if (region, (x, k)) not in said]


@cache
def _fuse_stages(name: str) -> list[tuple[Graph, tuple[Remark, ...]]]:
    fn, args = zoo()[name]
    t = gx.explore(fn, *args)
    return [(s.graph, s.report.remarks) for s in t.stages if s.name == "fuse"]


@pytest.mark.parametrize("name", NAMES)
def test_every_edge_into_a_kernel_is_explained(name: str) -> None:
    stages = _fuse_stages(name)
    assert stages
    for g, remarks in stages:
        assert unexplained(g, remarks) == []
        assert all(r.reason and r.rule for r in remarks)


def test_the_count_fails_when_a_remark_is_dropped() -> None:
    """The check can fail: without one remark, its edge is reported."""
    g, remarks = _fuse_stages("gpt_grad")[0]
    total = sum(1 for _ in edges(g))
    assert total > 20  # a real count: the gradient leaves many edges between kernels
    dropped = next(r for r in remarks if r.pass_ == "fuse" and r.kind == "missed")
    left = unexplained(g, tuple(r for r in remarks if r is not dropped))
    assert left == [(dropped.region, *dropped.nodes)]


# ---------------------------------------------------------------- rules on small programs


def _fuse(fn, *args):  # type: ignore[no-untyped-def]
    t = gx.explore(fn, *args)
    s = next(s for s in t.stages if s.name == "fuse")
    return s.graph, s.report.remarks


def _by_rule(remarks: tuple[Remark, ...], rule: str) -> list[Remark]:
    return [r for r in remarks if r.rule == rule]


X = np.linspace(-1, 1, 256 * 512, dtype=np.float32).reshape(256, 512)
W = np.linspace(-1, 1, 512 * 512, dtype=np.float32).reshape(512, 512)


def test_a_dot_read_by_two_kernels() -> None:
    def f(x, w):  # type: ignore[no-untyped-def]
        h = x @ w
        return jnp.tanh(h) + 1.0, jnp.sum(jnp.exp(h), axis=1)

    g, remarks = _fuse(f, X, W)
    (dot,) = [n for n in g.nodes if n.op == "dot_general"]
    got = _by_rule(remarks, "dot-has-other-readers")
    assert {r.nodes for r in got} == {(dot.id, k.id) for k in g.nodes
                                      if k.op == "kernel" and dot.id in k.inputs}
    assert len(got) == 2
    r = got[0]
    assert r.pass_ == "fuse" and r.kind == "missed"
    assert r.source is not None and r.source.endswith(f":{f.__code__.co_firstlineno + 1}")
    assert "has 2 users" in r.reason and value(g, dot.id) in r.reason
    assert "kernel %" in r.reason


def test_no_remark_when_the_dot_is_fused_as_head() -> None:
    def f(x, w):  # type: ignore[no-untyped-def]
        return jnp.tanh(x @ w) * 2.0

    g, remarks = _fuse(f, X, W)
    assert [n.attrs["kind"] for n in g.nodes if n.op == "kernel"] == ["output"]
    assert [r for r in remarks if r.pass_ == "fuse" and r.rule != "dot-operand"] == []
    # the head's operands are the two parameters: no edge, no remark
    assert remarks == ()


def test_an_opaque_like_barrier_and_its_reason() -> None:
    def f(x):  # type: ignore[no-untyped-def]
        y = jnp.exp(x) * 2.0
        return jnp.sort(y, axis=0) * 3.0

    g, remarks = _fuse(f, X)
    (sort,) = [n for n in g.nodes if n.op == "sort"]
    (r,) = _by_rule(remarks, "not-elementwise")
    assert r.nodes[0] == sort.id and g[r.nodes[1]].op == "kernel"
    assert "neither elementwise nor a reduction" in r.reason


def test_second_reduction_names_both() -> None:
    def f(x):  # type: ignore[no-untyped-def]
        return jnp.sum(jnp.max(x, axis=0) * 2.0)

    g, remarks = _fuse(f, X)
    got = _by_rule(remarks, "second-reduction") + _by_rule(remarks, "reduction-axes-differ")
    assert len(got) == 1
    assert "axes [0]" in got[0].reason


def test_remarks_off_makes_none_and_the_same_graph() -> None:
    def f(x, w):  # type: ignore[no-untyped-def]
        h = x @ w
        return jnp.tanh(h) + 1.0, jnp.sum(jnp.exp(h), axis=1)

    traced = gx.explore(f, X, W).stages[0].graph
    on, with_remarks = Fuse()(traced)
    with disabled():
        off, without = Fuse()(traced)
    assert on == off
    assert with_remarks.remarks and all(r.pass_ == "fuse" for r in with_remarks.remarks)
    assert without.remarks == ()


def test_a_loop_result_is_a_region_boundary() -> None:
    def f(x):  # type: ignore[no-untyped-def]
        y = jax.lax.fori_loop(0, 3, lambda i, v: v * 1.5 + 1.0, x)
        return jnp.exp(y) * 2.0

    g, remarks = _fuse(f, X)
    (loop,) = [n for n in g.nodes if n.op in CONTROL_FLOW]
    (r,) = [r for r in remarks if not r.region]
    assert g[r.nodes[0]].op == "get_tuple_element" and g[r.nodes[0]].inputs == (loop.id,)
    assert r.rule == "region-boundary" and g[r.nodes[1]].op == "kernel"
    assert f"of %{loop.id}, a {loop.op} region" in r.reason
    assert r.source is not None and r.source.endswith(f":{f.__code__.co_firstlineno + 1}")
    # inside the body, the elementwise chain is one kernel and reads only the body's inputs
    assert unexplained(g, remarks) == []
