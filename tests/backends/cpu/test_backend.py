"""The CPU backend against the reference interpreter: seeds, every elementwise op of the
table inside a kernel, split loops, random programs; and the fusion goal's memory claim."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import explorer as gx
from explorer.backends import reference, registry
from explorer.backends.cpu import kernels as cpu
from explorer.backends.cpu.kernel_codegen import PARALLEL_MIN
from explorer.ir import Graph, GraphBuilder, TensorType
from explorer.ir.ops import OPS
from explorer.passes.fuse import Fuse
from tests.backends.conftest import PROGRAMS, explore, run_matching_the_reference
from tests.corpora.ir_programs import programs
from tests.passes.semantic import assert_outputs_close, random_args

pytest.importorskip("numba", reason="the CPU backend needs numba")


@pytest.mark.parametrize("name", PROGRAMS)
def test_programs_match_the_reference(name: str) -> None:
    for k in run_matching_the_reference(name, "cpu").kernels:
        assert k.seconds >= 0 and "def " in k.source and "@njit" in k.source, k.source


def test_seed_kernel_is_one_pass_that_allocates_nothing() -> None:
    t, _ = explore("seed004-mean")
    (k,) = t.run(backend="cpu").kernels
    body = k.source.split("def ", 1)[1]
    assert body.count("for i0 ") == 1  # one loop nest over the inputs
    for alloc in ("np.empty", "np.zeros", "np.full", "np.ones", "np.array", ".copy("):
        assert alloc not in body


def _elementwise_graph(op: str, inputs: list[np.ndarray], attrs: dict) -> Graph:
    b = GraphBuilder("op")
    ps = [b.param(TensorType(x.shape, _name(x.dtype))) for x in inputs]
    y = b.add(op, ps, attrs)
    t = b.type_of(y)
    z = b.add("add" if t.dtype != "pred" else "xor", [y, y])  # two ops: one kernel
    return b.build([z])


def _name(dtype: np.dtype) -> str:
    from explorer.ir import dtypes

    return dtypes.from_numpy(dtype)


ELEMENTWISE = [name for name, row in OPS.items() if row.kind == "elementwise" and row.sample]


@pytest.mark.parametrize("op", ELEMENTWISE)
def test_every_elementwise_op_in_a_kernel(op: str) -> None:
    inputs, attrs = OPS[op].sample(np.random.default_rng(1))
    inputs = [np.asarray(x) for x in inputs]
    g = _elementwise_graph(op, inputs, attrs)
    fused, report = Fuse()(g)
    assert report.changed
    r = registry.executable(fused, "cpu").run(inputs)
    outs, kernels = r.outputs, r.kernels
    assert_outputs_close(reference.evaluate(g, inputs), outs, op)
    assert len(kernels) == 1


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1), ()])
def test_parallel_reductions(axes: tuple[int, ...]) -> None:
    """Large enough for prange: the kept-outer-dimension and the per-chunk partials paths."""
    rows = PARALLEL_MIN // 512
    x = np.random.default_rng(2).standard_normal((rows, 512)).astype(np.float32)
    t = gx.explore(lambda x: jnp.sum(jnp.abs(x) * 2.0, axis=axes), x, pipeline=["fuse"])
    got = t.run(backend="cpu")
    (k,) = got.kernels
    assert "prange" in k.source
    np.testing.assert_allclose(got.value, np.sum(np.abs(x) * 2, axis=axes), rtol=1e-4)


@pytest.mark.parametrize("axes", [(0,), (0, 1)])
def test_parallel_reductions_as_a_16_core_machine_generates_them(axes, monkeypatch) -> None:
    """With 16 threads the kernel folds 64 partial rows; numba once fused the partials'
    combine (written through a reshaped alias) with the epilogue and read zeros."""
    monkeypatch.setattr(cpu, "threads", lambda: 16)
    rows = PARALLEL_MIN // 512
    x = np.random.default_rng(4).standard_normal((rows, 512)).astype(np.float32)
    t = gx.explore(lambda x: jnp.sum(jnp.abs(x) * 2.0, axis=axes), x, pipeline=["fuse"])
    got = registry.get("cpu").compile(t.final.graph, gx.CompileOptions()).run([x])
    (k,) = got.kernels
    assert "64 partial rows" in k.source and "prange(chunks)" in k.source
    np.testing.assert_allclose(got.outputs[0], np.sum(np.abs(x) * 2, axis=axes), rtol=1e-4)


def test_split_loops_run_chunk_by_chunk() -> None:
    x = np.random.default_rng(3).standard_normal((512, 256)).astype(np.float32)
    t = gx.explore(lambda x: (jnp.exp(x) * 2.0).sum(1), x, pipeline=list(gx.passes.DEFAULT_PIPELINE),
                   memory_limit="128KiB")
    assert "loop" in t.final.graph.ops()
    got = t.run(backend="cpu")
    np.testing.assert_allclose(got.value, (np.exp(x) * 2).sum(1), rtol=1e-4)
    assert got.peak_bytes <= 128 * 1024
    assert all(k.name.startswith("loop_") for k in got.kernels)


def test_unsupported_op_runs_interpreted_and_says_so() -> None:
    x = np.random.default_rng(4).uniform(0.5, 3, (8, 8)).astype(np.float32)
    t = gx.explore(lambda x: jax_digamma(x) * 2.0, x, pipeline=["fuse"])
    got = t.run(backend="cpu")
    (k,) = got.kernels
    assert "reference interpreter" in k.source
    np.testing.assert_allclose(got.value, t.run(backend="reference").value, rtol=1e-6)


def jax_digamma(x):  # noqa: ANN001, ANN201 - a traced helper
    import jax

    return jax.lax.digamma(x)


def test_fused_temporaries_are_under_one_percent_of_numpy_eager() -> None:
    x = np.random.default_rng(5).standard_normal((1024, 1024)).astype(np.float32)
    t = gx.explore(lambda x, y: jnp.mean(x ** 2 * 3 + y), x, x, pipeline=["fuse"])
    eager = t.run(backend="reference", stage=0).peak_bytes
    fused = t.run(backend="cpu").peak_bytes
    assert eager >= 4 * 1024 * 1024
    assert fused <= 0.01 * eager


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(graph=programs(max_steps=6))
def test_random_programs(graph: Graph) -> None:
    fused, _ = Fuse()(graph)
    args = random_args(graph, np.random.default_rng(0))
    outs = registry.executable(fused, "cpu").run(args).outputs
    assert_outputs_close(reference.evaluate(graph, args), outs, "cpu")
