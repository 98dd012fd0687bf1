"""Arguments as JAX users pass them (frontend/arguments.py): pytrees in and out, static
leaves closed over, typed PRNG keys and Python scalars traced, and runs with other arguments."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from tests.corpora.graphs import assert_tree_close


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


def test_run_rejects_wrong_arguments() -> None:
    t = gx.explore(lambda x: x * 2, np.ones(3, np.float32), pipeline=[])
    with pytest.raises(ValueError, match=r"argument x has shape \(4,\).*\(3,\)"):
        t.run(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="traced with arguments shaped like"):
        t.run(np.ones(3, np.float32), np.ones(3, np.float32))


def test_python_scalars_are_arguments() -> None:
    t = gx.explore(lambda x, s: x * s, np.ones(3, np.float32), 2.0, pipeline=[])
    np.testing.assert_allclose(t.run().value, 2 * np.ones(3))
