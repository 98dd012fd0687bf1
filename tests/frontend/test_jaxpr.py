"""The JAX frontend (frontend/jaxpr.py, converter.py and its handler modules): coverage of everyday
functions, the seeds, a model and its gradient, inlined calls, opaque nodes, tracing errors."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.frontend.jaxpr import TraceError, trace
from explorer.ir import verify
from tests.corpora.graphs import ALL, CATALOGUE, MODELS, assert_tree_close


@pytest.mark.parametrize("name", sorted(ALL))
def test_reference_equals_jax(name: str) -> None:
    fn, args = ALL[name]
    t = gx.explore(fn, *args, pipeline=[])
    assert [s.name for s in t.stages] == ["traced"]
    verify(t.final.graph)
    tol = 1e-4 if name in MODELS else 1e-5
    assert_tree_close(t.run().value, fn(*args), rtol=tol, atol=tol)


def test_catalogue_is_broad() -> None:
    """The catalogue exercises most of the op table (tests/ir/ops/test_table.py the rest)."""
    used = set()
    for fn, args in CATALOGUE.values():
        used |= set(trace(fn, *args).graph.ops())
    assert len(used) >= 50, sorted(used)


def test_model_sizes() -> None:
    fn, args = MODELS["mlp_attention"]
    g = trace(fn, *args).graph
    gfn, gargs = MODELS["mlp_attention_grad"]
    grad = trace(gfn, *gargs).graph
    computing = [n for n in g.nodes if n.op not in ("parameter", "constant")]
    assert 400 <= len(computing) <= 500
    assert len(grad) > 2 * len(g)


def test_nested_jit_custom_rules_and_stop_gradient_are_inlined() -> None:
    @jax.custom_vjp
    def clip_grad(x):
        return x

    clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1, 1),))

    @jax.custom_jvp
    def softplus(x):
        return jnp.log1p(jnp.exp(x))

    softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] * jax.nn.sigmoid(p[0])))

    @jax.jit
    def inner(x):
        return jax.lax.stop_gradient(x) * softplus(clip_grad(x))

    def f(x):
        return jax.jit(inner)(x) + 1

    x = np.linspace(-2, 2, 5).astype(np.float32)
    g = trace(f, x).graph
    assert not {"pjit", "jit", "custom_jvp_call", "custom_vjp_call", "stop_gradient"} & set(g.ops())
    assert_tree_close(gx.explore(f, x, pipeline=[]).run().value, f(x))
    gf = jax.grad(lambda x: jnp.sum(f(x)))
    assert_tree_close(gx.explore(gf, x, pipeline=[]).run().value, gf(x))


def test_primitive_without_a_row_runs_as_an_opaque_node() -> None:
    """A primitive the table lacks is kept with its parameters and source line, and every
    CPU-side backend runs it through JAX's own implementation."""
    def f(x):
        y = jax.lax.bessel_i1e(x) * 2.0  # no row for bessel_i1e
        z = jax.pure_callback(lambda a: np.sort(a), jax.ShapeDtypeStruct(x.shape, x.dtype), y)
        return z + 1.0

    x = np.linspace(-2, 2, 7).astype(np.float32)
    t = gx.explore(f, x)
    opaque = [n for n in t.stages[0].graph.nodes if n.op == "opaque"]
    assert {n.attrs["opcode"] for n in opaque} == {"bessel_i1e", "pure_callback"}
    assert all(n.source is not None and n.source.file.endswith("test_jaxpr.py") for n in opaque)
    assert "result_avals=" in next(n for n in opaque if n.attrs["opcode"] == "pure_callback").attrs["text"]
    for s in t.stages:
        verify(s.graph)
        assert gx.parse(str(s.graph)) == s.graph
    for backend in ("reference", "cpu", "jax"):
        assert_tree_close(t.run(backend=backend).value, f(x), rtol=1e-6, atol=1e-6)


def test_opaque_node_read_elsewhere_says_it_cannot_run() -> None:
    t = gx.explore(lambda x: jax.lax.bessel_i1e(x), np.ones(3, np.float32), pipeline=[])
    text = str(t.final.graph)
    token = re.search(r'impl=jax<"([^"]+)">', text).group(1)
    g = gx.parse(text.replace(token, "bessel_i1e:999999"))
    assert str(g) == text.replace(token, "bessel_i1e:999999")  # still prints and verifies
    verify(g)
    from explorer.backends import registry
    with pytest.raises(Exception, match="read from text.*cannot run here"):
        registry.run_graph(g, [np.ones(3, np.float32)], "reference", t.options)


def test_branching_on_a_traced_value_says_how_to_make_it_static() -> None:
    def f(x, flag):
        return x * 2 if flag > 0 else x

    with pytest.raises(TraceError, match="branches on in Python is traced.*static"):
        trace(f, np.ones(3, np.float32), 1.0)


def test_shape_mismatch_names_the_user_line() -> None:
    def f(x, y):
        return x + y  # incompatible

    with pytest.raises(TraceError) as e:
        trace(f, np.ones(3, np.float32), np.ones(4, np.float32))
    msg = str(e.value)
    assert "Incompatible shapes" in msg or "shapes" in msg
    assert "test_jaxpr.py" in msg and "x + y" in msg


def test_lax_empty_is_zeros_not_an_opaque_call() -> None:
    """lax.empty (which linalg gradients and scans fill later) is a zero constant, as JAX
    lowers it, rather than an opaque node that runs through JAX on every call."""
    import jax.numpy as jnp

    def f(x):  # noqa: ANN001, ANN202
        return x + jax.lax.empty((3,), jnp.float32)

    x = np.arange(3, dtype=np.float32)
    t = gx.explore(f, x)
    assert "opaque" not in t.stages[0].graph.ops()
    np.testing.assert_array_equal(t.run(backend="cpu").value, jax.jit(f)(x))
