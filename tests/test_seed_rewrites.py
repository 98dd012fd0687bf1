"""The seeds' examples through `gx.explore`: each shows its rewrite, the rule's name, the user's
source line, and the cost change the seed describes."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.trace import Stage, Trace

N, M, D = 64, 48, 32
rng = np.random.default_rng(0)


def _rand(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def chain(a: jax.Array, b: jax.Array, v: jax.Array) -> jax.Array:
    c = (a @ b) @ v
    return c


def euclidean(a: jax.Array, b: jax.Array) -> jax.Array:
    c = (a[:, None, :] - b[None, :, :]) ** 2
    return jnp.sum(c, axis=-1)


def gemm2(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.sum(a[:, :, None] * b[None, :, :], axis=1)


def gemm2_tiled(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.sum(
        jnp.multiply(
            jnp.tile(jnp.expand_dims(a, -1), [1, 1, b.shape[1]]),
            jnp.tile(jnp.expand_dims(b, 0), [a.shape[0], 1, 1]),
        ),
        axis=1,
    )


def _line(fn: Callable[..., Any], text: str) -> str:
    """'file:line' of the line of `fn`'s source that contains `text`."""
    lines, start = inspect.getsourcelines(fn)
    (offset,) = [i for i, line in enumerate(lines) if text in line]
    return f"{inspect.getsourcefile(fn)}:{start + offset}"


def _stage(trace: Trace, name: str) -> Stage:
    (stage,) = [s for s in trace.stages if s.name == name]
    return stage


def _check_runs(trace: Trace, args: tuple[Any, ...], fn: Callable[..., Any]) -> None:
    want = np.asarray(fn(*args))
    got = np.asarray(trace.run(*args).value)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_matrix_chain_is_reassociated() -> None:
    args = (_rand(N, M), _rand(M, D), _rand(D))
    trace = gx.explore(chain, *args, pipeline="simplify,dot-order,dce")
    (rw,) = _stage(trace, "dot-order").report.rewrites
    assert rw.rule == "reassociate-dot-chain"
    assert rw.source == _line(chain, "(a @ b) @ v")
    # (A x B) x v: 2NMD + 2ND FLOPs;  A x (B x v): 2MD + 2NM
    assert trace.stages[0].cost.flops == 2 * N * M * D + 2 * N * D
    assert trace.final.cost.flops == 2 * M * D + 2 * N * M
    _check_runs(trace, args, chain)


def test_euclidean_distance_is_expanded() -> None:
    args = (_rand(N, D), _rand(M, D))
    trace = gx.explore(euclidean, *args, pipeline="simplify,cse,euclidean-distance,dce")
    (rw,) = _stage(trace, "euclidean-distance").report.rewrites
    assert rw.rule == "expand-squared-distance"
    assert rw.source == _line(euclidean, "jnp.sum(c, axis=-1)")  # the root is the sum
    assert "sub" not in trace.final.graph.ops()
    # traced: sub NMD, integer_pow 2NMD, sum NM(D-1).  final: a and b widened to float64
    # (D = 32 features: ND + MD), two norms (mul + sum each), -2 * b (MD), the product 2NMD,
    # then add, add, max and the conversion back over N x M.
    assert D <= 32
    assert trace.stages[0].cost.flops == 4 * N * M * D - N * M
    norms = N * D + N * (D - 1) + M * D + M * (D - 1)
    assert trace.final.cost.flops == N * D + M * D + norms + M * D + 2 * N * M * D + 4 * N * M
    # (N x M float64 values for N x M x D float32 ones: D / 2 times less, less what the
    # unfused stage holds at once)
    assert trace.final.cost.peak_bytes < trace.stages[0].cost.peak_bytes / 7
    _check_runs(trace, args, euclidean)


@pytest.mark.parametrize("fn", [gemm2, gemm2_tiled], ids=lambda f: f.__name__)
def test_gemm2_becomes_one_dot(fn: Callable[..., Any]) -> None:
    args = (_rand(N, M), _rand(M, D))
    trace = gx.explore(fn, *args, pipeline="simplify,cse,recognize-dot,dce")
    (rw,) = _stage(trace, "recognize-dot").report.rewrites
    assert rw.rule == "broadcast-mul-sum-to-dot"
    assert rw.source == _line(fn, "jnp.sum(")
    assert trace.final.graph.ops() == {"parameter": 2, "dot_general": 1}
    # mul NMD + sum N(M-1)D = 2NMD - ND before; a dot counts 2NMD. The FLOPs barely move;
    # what goes is the N x M x D product (seed 002's point: memory and time, not FLOPs).
    assert trace.stages[0].cost.flops == 2 * N * M * D - N * D
    assert trace.final.cost.flops == 2 * N * M * D
    assert trace.final.cost.bytes < trace.stages[0].cost.bytes / 10
    assert trace.final.cost.peak_bytes < trace.stages[0].cost.peak_bytes / 10
    _check_runs(trace, args, fn)


@pytest.mark.parametrize("fn, args, stage", [
    (chain, (_rand(N, M), _rand(M, D), _rand(D)), "dot-order"),
    (euclidean, (_rand(N, D), _rand(M, D)), "euclidean-distance"),
    (gemm2, (_rand(N, M), _rand(M, D)), "recognize-dot"),
], ids=["chain", "euclidean", "gemm2"])
def test_default_pipeline_shows_each_seed_rewrite(fn: Callable[..., Any], args: tuple[Any, ...],
                                                  stage: str) -> None:
    trace = gx.explore(fn, *args, check=True)
    assert len(_stage(trace, stage).report.rewrites) == 1
    assert trace.final.cost.flops < trace.stages[0].cost.flops or stage == "recognize-dot"
    _check_runs(trace, args, fn)
