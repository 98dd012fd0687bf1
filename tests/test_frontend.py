"""The JAX frontend: coverage of everyday functions, the seeds, a model and its gradient."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.frontend.jax import TraceError, UnsupportedPrimitiveError, trace
from explorer.ir import verify
from tests.graphs import ALL, CATALOGUE, MODELS, SEEDS, assert_tree_close


@pytest.mark.parametrize("name", sorted(ALL))
def test_reference_equals_jax(name: str) -> None:
    fn, args = ALL[name]
    t = gx.explore(fn, *args, pipeline=[])
    assert [s.name for s in t.stages] == ["traced"]
    verify(t.final.graph)
    tol = 1e-4 if name in MODELS else 1e-5
    assert_tree_close(t.run().value, fn(*args), rtol=tol, atol=tol)


def test_catalogue_is_broad() -> None:
    """The catalogue exercises most of the op table (the rest is covered by test_ops)."""
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


def test_every_node_has_a_source_line() -> None:
    for name, (fn, args) in SEEDS.items():
        g = trace(fn, *args).graph
        for n in g.nodes:
            if n.op != "parameter":
                assert n.source is not None, f"{name}: {n.describe()} has no source"
                assert n.source.file.endswith("examples.py")


def test_source_points_at_the_user_line() -> None:
    def f(x):
        y = jnp.exp(x)  # the exp line
        return jax.nn.softmax(y)  # the softmax line

    g = trace(f, np.ones(3, np.float32)).graph
    exp = next(n for n in g.nodes if n.op == "exp" and "exp line" in n.source.line_text)
    assert exp.source.function.endswith("f")
    div = next(n for n in g.nodes if n.op == "div")
    assert "softmax line" in div.source.line_text
    assert div.source.line == exp.source.line + 1


def test_pytrees_in_and_out() -> None:
    def f(params, x):
        return {"y": x @ params["w"] + params["b"], "n": [jnp.sum(x)]}

    params = {"w": np.ones((3, 2), np.float32), "b": np.zeros(2, np.float32)}
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = gx.explore(f, params, x, pipeline=[])
    names = [p.attrs["name"] for p in t.final.graph.param_nodes]
    assert names == ["params['b']", "params['w']", "x"]
    out = t.run()
    assert_tree_close(out.value, f(params, x))
    other = {"w": 2 * params["w"], "b": params["b"] + 1}
    assert_tree_close(t.run(other, x).value, f(other, x))


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


def test_unsupported_primitive_names_it_and_the_line() -> None:
    def f(x):
        return jnp.abs(jnp.fft.fft(x))

    with pytest.raises(UnsupportedPrimitiveError) as e:
        trace(f, np.ones(3, np.float32))
    msg = str(e.value)
    assert "'fft'" in msg
    assert "test_frontend.py" in msg and "jnp.fft.fft" in msg


def test_non_array_argument() -> None:
    def f(x, y):
        return x

    with pytest.raises(TraceError, match=r"argument y of f is a str"):
        trace(f, np.ones(3), "hello")
    with pytest.raises(TraceError, match=re.escape("argument y['k'] of f is a object")):
        trace(f, np.ones(3), {"k": object()})


def test_shape_mismatch_names_the_user_line() -> None:
    def f(x, y):
        return x + y  # incompatible

    with pytest.raises(TraceError) as e:
        trace(f, np.ones(3, np.float32), np.ones(4, np.float32))
    msg = str(e.value)
    assert "Incompatible shapes" in msg or "shapes" in msg
    assert "test_frontend.py" in msg and "x + y" in msg


def test_run_rejects_wrong_arguments() -> None:
    t = gx.explore(lambda x: x * 2, np.ones(3, np.float32), pipeline=[])
    with pytest.raises(ValueError, match=r"argument x has shape \(4,\).*\(3,\)"):
        t.run(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="traced with arguments shaped like"):
        t.run(np.ones(3, np.float32), np.ones(3, np.float32))


def test_python_scalars_are_arguments() -> None:
    t = gx.explore(lambda x, s: x * s, np.ones(3, np.float32), 2.0, pipeline=[])
    np.testing.assert_allclose(t.run().value, 2 * np.ones(3))


def test_notebook_cells_show_as_in_n() -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("import jax.numpy as jnp, numpy as np\n"
                       "from explorer.frontend.jax import trace")
        result = shell.run_cell(
            "def f(x):\n"
            "    return jnp.exp(x) * 2\n"
            "g = trace(f, np.ones(3, np.float32)).graph", store_history=True)
        result.raise_error()
        g = shell.user_ns["g"]
        exp = next(n for n in g.nodes if n.op == "exp")
        assert re.fullmatch(r"In\[\d+\]", exp.source.file), exp.source
        assert exp.source.line == 2
        assert exp.source.line_text == "return jnp.exp(x) * 2"
    finally:
        InteractiveShell.clear_instance()
