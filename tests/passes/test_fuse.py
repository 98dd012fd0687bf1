"""fuse: the seeds' kernels, no fusion across dot_general, fusion inside split loops, and
before-vs-after semantics on hand-written and random programs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import explorer as gx
from explorer.frontend.jaxpr import trace
from explorer.ir import Graph, parse, verify
from explorer.passes.fuse import Fuse
from tests.corpora.ir_programs import programs
from tests.passes.semantic import check_semantics


def _graph(fn: Callable[..., Any], *shapes: tuple[int, ...]) -> Graph:
    return trace(fn, *(np.zeros(s, np.float32) for s in shapes)).graph


def _compute_ops(g: Graph) -> list[str]:
    return [n.op for n in g.nodes if n.op not in ("parameter", "constant")]


def test_registered_under_its_own_name() -> None:
    assert Fuse().name == "fuse" and "fuse" in gx.passes.names()
    assert isinstance(gx.passes.get("fuse"), Fuse)


@pytest.mark.parametrize("fn,shapes", [
    (lambda x, y, z: jnp.sum(x + y * z), [(16, 8)] * 3),  # seed 001
    (lambda x, y: jnp.mean(x ** 2 * 3 + y), [(16, 8)] * 2),  # seed 004
])
def test_seed_examples_become_one_kernel(fn: Callable[..., Any], shapes: list) -> None:
    after, report = check_semantics(Fuse(), _graph(fn, *shapes))
    assert _compute_ops(after) == ["kernel"]
    (kernel,) = [n for n in after.nodes if n.op == "kernel"]
    assert kernel.attrs["kind"] == "input"
    assert [r.rule for r in report.rewrites] == ["fuse-reduction"]


def test_a_dot_joins_only_as_the_head_of_its_epilogue() -> None:
    """tanh((a*2) @ b + 1) @ c: the first dot heads the kernel of its epilogue (+1, tanh:
    output fusion), its prologue (a*2, a lone small op) stays outside, and the second dot,
    read by nothing elementwise, stays a BLAS call."""
    g = _graph(lambda a, b, c: jnp.tanh((a * 2.0) @ b + 1.0) @ c, (8, 6), (6, 5), (5, 3))
    after, report = check_semantics(Fuse(), g)
    kinds = sorted(n.attrs["kind"] for n in after.nodes if n.op == "kernel")
    assert kinds == ["output"] and after.ops()["dot_general"] == 1 and after.ops()["mul"] == 1
    head = next(n for n in after.nodes if n.op == "kernel" and n.attrs["kind"] == "output")
    assert head.attrs["body"].ops()["dot_general"] == 1
    assert "fuse-dot-epilogue" in [r.rule for r in report.rewrites]


def test_a_dot_with_other_readers_or_under_a_reduction_stays_outside() -> None:
    """Output fusion takes a dot only where the elementwise group alone reads it and iterates
    over its result: not when the dot is also returned or read elsewhere, not into a
    reduction, not inside a loop body (a compiled scan calls BLAS itself)."""
    shared = _graph(lambda a, b: (lambda d: (jnp.tanh(d), d))(a @ b), (8, 6), (6, 5))
    reduced = _graph(lambda a, b: jnp.tanh(a @ b).sum(1), (8, 6), (6, 5))
    for g in (shared, reduced):
        after, _ = check_semantics(Fuse(), g)
        assert after.ops()["dot_general"] == 1
        assert all(n.attrs["kind"] != "output" for n in after.nodes if n.op == "kernel")
    # a dot of a scalar constant (a gradient's 1.0 * v): constants are copied into kernels,
    # so the dot, whose operand it is, stays outside (a head's operands are kernel inputs)
    scaled = _graph(lambda v: 0.5 * jax.lax.dot_general(jnp.float32(1.0), v, (((), ()), ((), ())))
                    + v, (6,))
    after, _ = check_semantics(Fuse(), scaled)
    assert after.ops()["dot_general"] == 1
    scan = _graph(lambda h, w: jax.lax.scan(lambda c, _: (jnp.tanh(c @ w), None), h, None,
                                             length=3)[0], (4, 4), (4, 4))
    after, _ = check_semantics(Fuse(), scan)
    body = next(n for n in after.nodes if n.op == "scan").attrs["body"]
    assert body.ops()["dot_general"] == 1


@pytest.mark.parametrize("fn,shapes,kernels", [
    (lambda x: x - x.mean(1, keepdims=True), [(6, 5)], 1),
    (lambda x, b: jnp.exp(x + b[None, :]).max(0), [(6, 5), (5,)], 1),
    (lambda x: (jnp.sin(x) * 2.0).sum(1) + 1.0, [(4, 3, 5)], 1),
    (lambda x: jnp.where(x > 0, x, 0.1 * x).astype(jnp.int32) // 2, [(7, 3)], 1),
    (lambda x: (jnp.exp(x) * 2.0, jnp.exp(x).sum()), [(4, 4)], 2),  # exp traced twice
    (lambda x: (lambda t: (t * 2.0, t.sum()))(jnp.exp(x)), [(4, 4)], 0),  # shared: not duplicated
    (lambda x: jnp.abs(x), [(4, 4)], 0),  # a single small op is left alone
    (lambda x: jnp.abs(x), [(256, 256)], 1),  # a single large one is a kernel
    (lambda x, s: x / s[:, None], [(512, 128), (512,)], 1),  # with a broadcast operand
    (lambda x: (lambda t: (t * 2.0, t.sum()))(jnp.exp(x)), [(256, 256)], 3),  # shared, large
    (lambda x: jax.nn.softmax(x, -1), [(6, 5)], 1),  # row kernels: two reductions a row
    (lambda x: jax.nn.log_softmax(x, -1), [(2, 3, 7)], 1),
    (lambda x, g: (x - x.mean(1, keepdims=True)) / jnp.sqrt(x.var(1, keepdims=True) + 1e-5) * g,
     [(6, 5), (5,)], 1),
])
def test_semantics_and_kernel_count(fn: Callable[..., Any], shapes: list, kernels: int) -> None:
    after, report = check_semantics(Fuse(), _graph(fn, *shapes))
    assert after.ops().get("kernel", 0) == kernels == len(report.rewrites)
    assert report.changed == bool(kernels)
    assert parse(str(after)) == after
    assert all(r.source for r in report.rewrites)


def _interleave(x: Any, y: Any) -> Any:
    """JAX's interleave (as associative_scan writes it): pads with interior padding, added."""
    return jax.lax.pad(x, 0.0, [(0, 0, 0), (0, 1, 1)]) + jax.lax.pad(y, 0.0, [(0, 0, 0), (1, 0, 1)])


@pytest.mark.parametrize("fn,shapes,kernels,left", [
    (lambda x, y: x[:, 0:-1:2] + y, [(4, 9), (4, 4)], 1, {}),  # a strided slice, read in place
    (lambda x: jnp.sum(x[1:, ::3] * 2.0, 0), [(5, 10)], 1, {}),  # ... before a reduction
    (_interleave, [(3, 4), (3, 4)], 1, {}),
    (lambda x, y: jax.lax.pad(x, -0.0, [(1, 2, 2), (0, 0, 0)]) * y, [(3, 4), (10, 4)], 1, {}),
    (lambda x, y: jax.lax.pad(x, 0.0, [(-1, 0, 0), (0, 0, 0)]) * y, [(3, 4), (2, 4)], 1,
     {"pad": 0}),  # a pad that crops: a slice
    (lambda x, y: jax.lax.pad(x, 1.5, [(-2, 3, 2), (2, -1, 0)]) * y, [(4, 5), (11, 6)], 1,
     {"pad": 0}),  # cropping and padding, interior padding too
    (lambda x, y: jax.lax.pad(x, 0.0, [(-1, 0, 0), (0, 0, 0)])[::2] + y, [(8, 4), (4, 4)], 1,
     {"pad": 0, "slice": 0}),  # a slice of a pad (the scan's gradient): one read
    (lambda x, y: jax.lax.pad(x, 2.0, [(2, 1, 1), (0, 0, 0)])[1:-1:3] * y, [(5, 3), (4, 3)], 1,
     {"pad": 0, "slice": 0}),
    (lambda x, v, y: jax.lax.pad(x, v, [(1, 0, 1), (0, 0, 0)]) * y, [(3, 4), (), (6, 4)], 0,
     {"pad": 1}),  # a padding value computed at run time: the pad stays an op of its own
    (lambda x: jax.lax.associative_scan(jnp.add, x, axis=1), [(2, 8)], 9,
     {"slice": 3, "concatenate": 3, "pad": 0}),
    (lambda x, y: jax.lax.associative_scan(lambda a, b: (a[0] * b[0], b[0] * a[1] + b[1]),
                                           (x, y), axis=1), [(3, 13), (3, 13)], None, {"pad": 0}),
])
def test_slices_and_pads_of_inputs_are_read_in_place(fn: Callable[..., Any], shapes: list,
                                                      kernels: int | None, left: dict) -> None:
    after, report = check_semantics(Fuse(), _graph(fn, *shapes))
    assert kernels is None or after.ops().get("kernel", 0) == kernels == len(report.rewrites)
    assert all(after.ops().get(op, 0) == k for op, k in left.items())
    assert parse(str(after)) == after


def test_fuses_inside_split_loops() -> None:
    x = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    t = gx.explore(lambda x: jnp.tanh(x * 2.0).sum(0), x,
                   pipeline=list(gx.passes.DEFAULT_PIPELINE), memory_limit="64KiB")
    (loop,) = [n for n in t.final.graph.nodes if n.op == "loop"]
    assert _compute_ops(loop.attrs["body"]) == ["kernel"]
    verify(t.final.graph)
    np.testing.assert_allclose(t.run().value, np.tanh(x * 2).sum(0), rtol=1e-4, atol=1e-4)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(graph=programs())
def test_random_programs_keep_their_values(graph: Graph) -> None:
    after, _ = check_semantics(Fuse(), graph)
    assert parse(str(after)) == after
    again, report = Fuse()(after)  # kernels are not fused again
    assert not report.changed and again == after
