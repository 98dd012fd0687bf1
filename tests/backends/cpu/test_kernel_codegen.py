"""Row kernels (kernel_plan.RowPlan, kernel_codegen.generate_rows): softmax, log-softmax,
layer norm and cross-entropy each run as one kernel that loops over rows, with one pass over
the row's columns per round of reductions, and agree with the reference interpreter (NaN
rows, -inf rows and integer folds included)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference
from explorer.backends.codegen.kernel_plan import PlanError, RowPlan, plan_any, plan_rows
from explorer.backends.cpu.kernel_codegen import PARALLEL_MIN
from explorer.ir import Graph
from tests.passes.semantic import assert_outputs_close

rng = np.random.default_rng(11)


def _f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _layer_norm(x: jax.Array, g: jax.Array, b: jax.Array) -> jax.Array:
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-5) * g + b


def _xent(logits: jax.Array, y: jax.Array) -> jax.Array:
    logp = jax.nn.log_softmax(logits)
    return -jnp.sum(logp * jax.nn.one_hot(y, logits.shape[-1]), -1)


def _masked_softmax(s: jax.Array, mask: jax.Array) -> jax.Array:
    return jax.nn.softmax(jnp.where(mask, s, -1e9), -1)


PROGRAMS: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]], int]] = {
    # name: (function, arguments, reductions in its row kernel)
    "softmax": (lambda x: jax.nn.softmax(x, -1), lambda: (_f32(37, 50),), 2),
    "log_softmax 3-d": (lambda x: jax.nn.log_softmax(x, -1), lambda: (_f32(3, 5, 33),), 2),
    "layer norm": (_layer_norm, lambda: (_f32(20, 64), _f32(64), _f32(64)), 2),
    "cross-entropy": (_xent, lambda: (_f32(16, 40), rng.integers(0, 40, 16).astype(np.int32)), 3),
    "masked softmax": (_masked_softmax,
                       lambda: (_f32(2, 24, 24), np.tril(np.ones((24, 24), bool))), 2),
    "centre rows": (lambda x: x - x.mean(1, keepdims=True), lambda: (_f32(9, 70),), 1),
    "integer rows": (lambda x: x - x.max(1, keepdims=True) + x.sum(1, keepdims=True),
                     lambda: (rng.integers(-50, 50, (6, 11)).astype(np.int32),), 2),
}


def _row_kernels(g: Graph) -> list[RowPlan]:
    return [p for n in g.nodes if n.op == "kernel"
            and isinstance(p := plan_any(n.attrs["body"]), RowPlan)]


@pytest.mark.parametrize("name", PROGRAMS)
def test_row_programs_are_one_row_kernel_that_matches_the_reference(name: str) -> None:
    fn, make, folds = PROGRAMS[name]
    args = make()
    t = gx.explore(fn, *args)
    (plan,) = _row_kernels(t.final.graph)
    assert len(plan.reductions) == folds
    r = t.run(backend="cpu")
    want = reference.evaluate(t.stages[0].graph, [np.asarray(a) for a in args])
    assert_outputs_close(want, [r.value], name)
    (k,) = [k for k in r.kernels if "prange" in k.source or "for i0" in k.source]
    assert "runs on the reference interpreter" not in k.source


def test_reductions_that_do_not_read_each_other_share_a_pass() -> None:
    """mean and mean of squares fold in one pass over each row; the output is a second."""
    x = _f32(8, 32)
    t = gx.explore(lambda x: (x - x.mean(1, keepdims=True)) / ((x * x).mean(1, keepdims=True) + 1),
                   x)
    (plan,) = _row_kernels(t.final.graph)
    assert [len(p) for p in plan.passes] == [2]
    (k,) = t.run(backend="cpu").kernels
    assert k.source.count("for i1 in range(n1):") == 2


def test_the_softmax_exp_is_kept_in_the_output_between_passes() -> None:
    """The exp both the sum's pass and the output's pass need is computed once: the sum's
    pass stores it in the output buffer and the last pass reads it back."""
    x = _f32(16, 64)
    r = gx.explore(lambda x: jax.nn.softmax(x, -1), x).run(backend="cpu")
    (k,) = r.kernels
    assert k.source.count("exp32(") == 1
    assert "= out[i0, i1]" in k.source
    np.testing.assert_allclose(r.value, jax.nn.softmax(x, -1), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("fill", [np.nan, -np.inf, np.inf])
def test_rows_with_nan_and_infinities_match_the_reference(fill: float) -> None:
    x = _f32(6, 20)
    x[1, 3] = fill
    x[4, :] = fill
    fn = PROGRAMS["softmax"][0]
    t = gx.explore(fn, x)
    want = reference.evaluate(t.stages[0].graph, [x])
    assert_outputs_close(want, [t.run(backend="cpu").value], f"softmax with {fill}")
    m = gx.explore(lambda x: x.max(1) - x.min(1) + x.max(1, keepdims=True).sum(), x)
    assert_outputs_close(reference.evaluate(m.stages[0].graph, [x]), [m.run(backend="cpu").value],
                         "max and min")


def test_large_row_kernels_run_their_rows_in_parallel() -> None:
    x = _f32(PARALLEL_MIN // 8 // 256, 256)
    r = gx.explore(lambda x: jax.nn.softmax(x, -1), x).run(backend="cpu")
    (k,) = r.kernels
    assert "prange(n0)" in k.source
    np.testing.assert_allclose(r.value, jax.nn.softmax(x, -1), rtol=1e-5, atol=1e-7)


def test_a_reduction_over_leading_axes_is_no_row_kernel() -> None:
    x = _f32(8, 16)
    t = gx.explore(lambda x: x - x.mean(0, keepdims=True), x, pipeline=["fuse"])
    assert not _row_kernels(t.final.graph)
    kernels = [n for n in t.final.graph.nodes if n.op == "kernel"]
    for k in kernels:
        with pytest.raises(PlanError):
            plan_rows(k.attrs["body"])
