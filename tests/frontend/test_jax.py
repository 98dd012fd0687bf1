"""The JAX frontend: coverage of everyday functions, the seeds, a model and its gradient."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.frontend.jax import TraceError, trace
from explorer.ir import verify
from tests.corpora.graphs import ALL, CATALOGUE, MODELS, SEEDS, assert_tree_close


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
    assert all(n.source is not None and n.source.file.endswith("test_jax.py") for n in opaque)
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


def test_static_leaves_are_closed_over() -> None:
    """Functions, strings, bools and Python values inside containers are static, as
    equinox.filter_jit treats them; the model may branch on them in Python."""
    def g(params, x, cfg):
        h = x @ params["w"]
        if cfg["relu"]:
            h = jax.nn.relu(h)
        return cfg["act"](h * cfg["scale"]).sum()

    p = {"w": np.arange(12, dtype=np.float32).reshape(3, 4) / 10}
    x = np.ones((2, 3), np.float32)
    cfg = {"relu": True, "act": jnp.tanh, "name": "mlp", "scale": 2}
    t = gx.explore(g, p, x, cfg)
    assert t.traced.arg_names == ("params['w']", "x")
    assert_tree_close(t.run(backend="cpu").value, g(p, x, cfg), rtol=1e-6)
    assert_tree_close(t.run(p, x * 2, cfg).value, g(p, x * 2, cfg), rtol=1e-6)
    with pytest.raises(ValueError, match=r"static argument cfg\['relu'\] is False.*traced with True"):
        t.run(p, x, {**cfg, "relu": False})
    compiled = gx.compile(g, backend="reference")
    assert_tree_close(compiled(p, x, {**cfg, "relu": False}), g(p, x, {**cfg, "relu": False}))
    assert_tree_close(compiled(p, x, cfg), g(p, x, cfg))
    assert len(compiled.traces) == 2


def test_branching_on_a_traced_value_says_how_to_make_it_static() -> None:
    def f(x, flag):
        return x * 2 if flag > 0 else x

    with pytest.raises(TraceError, match="branches on in Python is traced.*static"):
        trace(f, np.ones(3, np.float32), 1.0)


def test_equinox_module_is_an_argument_with_named_scopes() -> None:
    eqx = pytest.importorskip("equinox")
    m = eqx.nn.MLP(3, 2, 8, 2, key=jax.random.PRNGKey(0))
    x = jnp.linspace(-1, 1, 3)
    t = gx.explore(lambda m, x: m(x), m, x)
    assert t.traced.arg_names[0] == "m.layers[0].weight"
    scopes = {n.source.scope for n in t.stages[0].graph.nodes if n.source is not None}
    assert "eqx.nn.MLP/eqx.nn.Linear" in scopes
    # the line shown is the user's (this file), the library's module shows as the scope
    dots = [n for n in t.stages[0].graph.nodes if n.op == "dot_general"]
    assert dots and all(n.source.file.endswith("test_jax.py") for n in dots)
    for backend in ("reference", "cpu", "jax"):
        assert_tree_close(t.run(backend=backend).value, m(x), rtol=1e-5, atol=1e-6)


def test_calls_become_named_scopes_and_round_trip() -> None:
    @jax.jit
    def helper(x):
        return jnp.sin(x) * 2

    def f(x):
        with jax.named_scope("block"):
            y = helper(x) + jax.nn.relu(x)
            y = jax.checkpoint(lambda z: z * 3)(y)
        return y.sum()

    x = np.linspace(-1, 1, 5).astype(np.float32)
    g = gx.explore(jax.grad(f), x, pipeline=[]).final.graph
    scopes = {n.source.scope for n in g.nodes if n.source is not None}
    assert {"block/helper", "block/relu", "block (transpose)/checkpoint",
            "block (transpose)/helper"} <= scopes
    assert gx.parse(str(g)) == g
    assert 'loc("' in str(g) and '"block/helper")' in str(g)


def test_typed_prng_keys_are_arguments() -> None:
    def dropout(key, x):
        keep = jax.random.bernoulli(key, 0.7, x.shape)
        return jnp.where(keep, x / 0.7, 0.0)

    x = np.ones((4, 5), np.float32)
    for key in (jax.random.key(3), jax.random.PRNGKey(3)):
        t = gx.explore(dropout, key, x)
        assert t.traced.graph.param_nodes[0].type == gx.ir.TensorType((2,), "u32")
        for backend in ("reference", "cpu", "jax"):
            assert_tree_close(t.run(backend=backend).value, dropout(key, x))


def test_shape_mismatch_names_the_user_line() -> None:
    def f(x, y):
        return x + y  # incompatible

    with pytest.raises(TraceError) as e:
        trace(f, np.ones(3, np.float32), np.ones(4, np.float32))
    msg = str(e.value)
    assert "Incompatible shapes" in msg or "shapes" in msg
    assert "test_jax.py" in msg and "x + y" in msg


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
    from tests.ipyshell import ipython_shell

    # the process's one test shell: clearing a shell of our own here would leave the magic
    # tests, which xdist may run in this process around this test, without get_ipython()
    shell = ipython_shell()
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
