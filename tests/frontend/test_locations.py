"""A traced node's location (frontend/locations.py): the user's line in a file or a notebook
cell (In[N]), and the named scope of calls, named_scope blocks and library modules."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.frontend.jaxpr import trace
from tests.corpora.graphs import SEEDS, assert_tree_close


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
    assert dots and all(n.source.file.endswith("test_locations.py") for n in dots)
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


def test_notebook_cells_show_as_in_n() -> None:
    from tests.ipyshell import ipython_shell

    # the process's one test shell: clearing a shell of our own here would leave the magic
    # tests, which xdist may run in this process around this test, without get_ipython()
    shell = ipython_shell()
    shell.run_cell("import jax.numpy as jnp, numpy as np\n"
                   "from explorer.frontend.jaxpr import trace")
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
