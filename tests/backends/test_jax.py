"""The JAX backend against the reference (seeds, split loops, random programs), and the
measuring layer on top: trace.compare's table and plot, gx.compile's cache."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import explorer as gx
from explorer.backends import reference, registry
from explorer.ir import Graph
from explorer.passes.fuse import Fuse
from tests.backends.conftest import PROGRAMS, explore
from tests.corpora.ir_programs import programs
from tests.passes.semantic import assert_outputs_close, random_args


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("stage", [0, -1])
def test_programs_match_the_reference(name: str, stage: int) -> None:
    t, _ = explore(name)
    want = t.run(backend="reference", stage=0).value
    got = t.run(backend="jax", stage=stage)
    assert_outputs_close([want], [got.value], name)
    assert got.kernels and "HloModule" in got.kernels[0].source


def test_split_loops_lower_to_chunks() -> None:
    x = np.random.default_rng(3).standard_normal((300, 64)).astype(np.float32)
    t = gx.explore(lambda x: (jnp.exp(x) * 2.0).sum(1), x, memory_limit="32KiB",
                   pipeline=list(gx.passes.DEFAULT_PIPELINE))
    assert "loop" in t.final.graph.ops()
    np.testing.assert_allclose(t.run(backend="jax").value, (np.exp(x) * 2).sum(1), rtol=1e-5)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(graph=programs(max_steps=6))
def test_random_programs(graph: Graph) -> None:
    if any(n.dtype == "f64" for n in graph.nodes if hasattr(n.type, "dtype")):
        return  # without jax_enable_x64 JAX computes f64 in f32 (documented)
    fused, _ = Fuse()(graph)
    args = random_args(graph, np.random.default_rng(0))
    outs = registry.executable(fused, "jax").run(args).outputs
    assert_outputs_close(reference.evaluate(graph, args), outs, "jax")


def test_compare_returns_a_table_and_a_plot() -> None:
    t, _ = explore("seed004-mean")
    c = t.compare(backends=("cpu", "jax"), repeats=2, progress=False)
    labels = [r.label for r in c.rows]
    assert labels[:3] == ["numpy", "jax-eager", "jax-jit"]
    assert f"{t.final.name} on cpu" in labels and "traced on jax" in labels
    assert all(r.ok for r in c.rows), str(c)
    assert all(r.minimum <= r.median for r in c.rows)
    assert c.row("numpy").peak_bytes and c.row("numpy").peak_how == "tracemalloc"
    assert "median ms" in str(c) and "<table>" in c._repr_html_()
    assert c.figure is not None and len(c.figure.axes) == 2
    assert c.ratio("numpy", f"{t.final.name} on cpu") > 0


def test_compile_traces_once_per_signature() -> None:
    f = gx.compile(lambda x, y: jnp.mean(x ** 2 * 3 + y))
    x = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)
    np.testing.assert_allclose(f(x, x), np.mean(x ** 2 * 3 + x), rtol=1e-5)
    f(x + 1, x)
    assert len(f.traces) == 1
    f(x[:8], x[:8])
    assert len(f.traces) == 2
    (trace, *_) = f.traces.values()
    assert "fuse" in [s.name for s in trace.stages]


@pytest.mark.parametrize("backend", ["jax", "reference"])
def test_compile_on_other_backends_and_under_a_limit(backend: str) -> None:
    f = gx.compile(lambda x: jnp.tanh(x * 2.0).sum(0), memory_limit="64KiB", backend=backend)
    x = np.random.default_rng(1).standard_normal((256, 128)).astype(np.float32)
    np.testing.assert_allclose(f(x), np.tanh(x * 2).sum(0), rtol=1e-4, atol=1e-4)
    assert "loop" in f.trace_for(x).final.graph.ops()


def test_unknown_backend_is_refused() -> None:
    t, _ = explore("seed001-reduce-sum")
    with pytest.raises(ValueError, match="available"):
        t.run(backend="tpu")


@pytest.mark.parametrize("name", ["dp-sgd per-example grads", "moe top-2 grad"])
def test_stages_planned_for_xla_match_jax_jit(name: str) -> None:
    """gx.compile(backend="jax") plans the passes for XLA (passes/targets.py): the rewrites
    that decline there say so in remarks, and the result is jax.jit's."""
    from tests.corpora.graphs import assert_tree_close
    from tests.corpora.wide import wide

    fn, args = wide("small")[name]
    compiled = gx.compile(fn, backend="jax")
    assert_tree_close(compiled(*args), jax.jit(fn)(*args), rtol=1e-4, atol=1e-4)
    remarks = [r for s in compiled.trace_for(*args).stages for r in s.report.remarks]
    assert any("jax backend" in r.reason for r in remarks)
