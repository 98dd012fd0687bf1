"""The backend registry and the one interpreter core: README's "Adding a backend" example
registers a toy backend, and every entry point (trace.run, compare, gx.compile, %%gambit,
the widget's run tab) finds it there."""

from __future__ import annotations

import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import registry
from explorer.backends.combine import Combiner
from explorer.ir.graph import TensorType
from explorer.options import CompileOptions

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    text = README.read_text()
    section = text[text.index("### Adding a backend"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def toy():
    namespace: dict = {}
    exec(compile(readme_example(), "README.md", "exec"), namespace)
    yield namespace
    registry.unregister("counting")


def test_readme_toy_backend_runs_everywhere(toy) -> None:
    assert "counting" in registry.available() and "counting" in gx.trace.BACKENDS
    counter = toy["CountingInterpreter"]
    assert counter.dots >= 1  # the example ran a trace on it
    counter.dots = 0
    a, b = np.ones((4, 3), np.float32), np.full((3, 2), 2.0, np.float32)
    t = gx.explore(lambda a, b: (a @ b).sum(), a, b)
    r = t.run(backend="counting", stage="traced")
    assert float(r.value) == 48.0 and r.backend == "counting" and counter.dots == 1
    f = gx.compile(lambda a, b: (a @ b).sum(), backend="counting")
    assert float(f(a, b)) == 48.0 and counter.dots >= 2
    row = t.compare(backends=("counting",), baselines=(), stages=[0], repeats=1,
                    plot=False, progress=False).rows[0]
    assert row.ok and row.backend == "counting" and row.peak_how == "tracemalloc"
    w = t.widget(repeats=1)
    w.run(["counting"], baselines=False)
    assert any(r["backend"] == "counting" and not r["error"] for r in w.run_rows)
    assert "counting" in w.backends  # the run tab lists what the registry has


def test_unknown_and_unavailable_backends_say_why() -> None:
    t = gx.explore(lambda x: x * 2.0, np.ones(3, np.float32))
    with pytest.raises(registry.BackendError, match="unknown backend 'nope'; registered: reference"):
        t.run(backend="nope")

    class Absent(registry.Backend):
        name = "absent"

        def unavailable_reason(self) -> str:
            return "it needs a quantum computer"

    registry.register(Absent())
    try:
        assert "absent" in registry.names() and "absent" not in registry.available()
        with pytest.raises(ValueError, match="not available here: it needs a quantum computer"):
            t.run(backend="absent")
        with pytest.raises(ValueError, match="quantum"):
            gx.explore(lambda x: x, np.ones(2), options=CompileOptions(backend="absent"))
    finally:
        registry.unregister("absent")


def test_options_key_the_executable_cache() -> None:
    t = gx.explore(lambda x: x * 2.0, np.ones(3, np.float32))
    g = t.final.graph
    one = registry.executable(g, "reference", CompileOptions())
    assert registry.executable(g, "reference", CompileOptions()) is one
    assert registry.executable(g, "reference", CompileOptions(memory_limit=2**20)) is not one


@pytest.mark.parametrize("xp", [np, jnp], ids=["numpy", "jax.numpy"])
def test_combiners_are_written_once_for_every_namespace(xp) -> None:
    """sum, max with its argmax, top_k with its indices, logsumexp and concat: folding
    chunks gives what one pass over the whole array gives."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 10)).astype(np.float32)
    specs = [("add",), ("max",), ("index", 1), ("top_k", 1), ("index", 3), ("logsumexp",),
             ("concat", 1)]
    types = [TensorType((6,), "f32"), TensorType((6,), "f32"), TensorType((6,), "i32"),
             TensorType((6, 3), "f32"), TensorType((6, 3), "i32"), TensorType((6,), "f32"),
             TensorType((6, 10), "f32")]
    c = Combiner(xp, specs, types)
    for start in range(0, 10, 4):
        part = x[:, start:start + 4]
        order = np.argsort(-part, axis=1, kind="stable")[:, :3]
        outs = [part.sum(1), part.max(1), part.argmax(1).astype(np.int32),
                np.take_along_axis(part, order, 1), order.astype(np.int32),
                np.log(np.exp(part).sum(1)), part]
        c.add(start, [xp.asarray(o) for o in outs])
    s, m, am, tv, ti, lse, cat = (np.asarray(r) for r in c.results())
    np.testing.assert_allclose(s, x.sum(1), rtol=1e-5)
    np.testing.assert_array_equal(m, x.max(1))
    np.testing.assert_array_equal(am, x.argmax(1))
    order = np.argsort(-x, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(ti, order)
    np.testing.assert_array_equal(tv, np.take_along_axis(x, order, 1))
    np.testing.assert_allclose(lse, np.log(np.exp(x).sum(1)), rtol=1e-5)
    np.testing.assert_array_equal(cat, x)
