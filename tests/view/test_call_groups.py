"""Groups that follow calls (issue 25): a loop's calls of a plain Python function are one group
per call, numbered in call order, inside a group for the function, also in the backward pass
and inside jitted code; many parameters are one "inputs" group, nested by pytree path."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.examples import mlp_attention_grad
from explorer.ir.graph import Graph, Node
from explorer.view.collapse import BUDGET, Cluster, Group, hierarchy, plan_layout
from explorer.view.render import render

LAYERS = 3


def dense(x, w):
    y = x @ w
    return jnp.tanh(y)


def attention(x, p):
    q = dense(x, p["wq"])
    k = dense(x, p["wk"])
    v = dense(x, p["wv"])
    return jax.nn.softmax(q @ k.T) @ v


def mlp(x, p):
    h = dense(x, p["w1"])
    return dense(h, p["w2"])


def layer(x, p):
    x = x + attention(x, p)
    return x + mlp(x, p)


def model(params, x):
    for p in params:
        x = layer(x, p)
    return jnp.sum(x**2)


def model_comprehension(params, x):
    ys = [layer(x, p) for p in params]
    return jnp.sum(jnp.stack(ys))


@jax.jit
def block(x, w):
    return jnp.tanh(x @ w) + 1.0


def blocks(ws, x):
    for w in ws:
        x = block(x, w)
    return jnp.sum(x)


def step(x):
    y = jnp.sin(x)
    return y * 2.0


def many_steps(x):
    for _ in range(20):
        x = step(x)
    return x


def scoped(params, x):
    with jax.named_scope("encoder"):
        x = layer(x, params[0])
    with jax.named_scope("decoder"):
        return layer(x, params[1])


@pytest.fixture(scope="module")
def args() -> tuple:
    rng = np.random.default_rng(0)
    params = [{k: (rng.standard_normal((8, 8)) / 3).astype(np.float32)
               for k in ("wq", "wk", "wv", "w1", "w2")} for _ in range(LAYERS)]
    return params, rng.standard_normal((4, 8)).astype(np.float32)


def traced(fn, *args) -> Graph:
    return gx.explore(fn, *args, pipeline=[]).final.graph


def tree(g: Graph) -> Group:
    return hierarchy(g, budget=10**6)  # no runs: every group as the calls make it


def groups(root: Group) -> dict[tuple[str, ...], Group]:
    """Every group by its path relative to the root."""
    out: dict[tuple[str, ...], Group] = {}

    def walk(g: Group) -> None:
        for c in g.children:
            if isinstance(c, Group):
                out[c.path] = c
                walk(c)

    walk(root)
    return out


def names(g: Group) -> list[str]:
    """The names of a group's child groups (a child that is a chain of one-child groups is
    merged into one: its first name)."""
    return [c.path[len(g.path)] for c in g.children if isinstance(c, Group)]


def path_of(root: Group, node: Node) -> tuple[str, ...]:
    """The path of the innermost group holding `node` (() at the top)."""
    best: tuple[str, ...] = ()
    for path, g in groups(root).items():
        if node in g.nodes() and len(path) > len(best):
            best = path
    return best


def param(g: Graph, name: str) -> Node:
    return next(n for n in g.nodes if n.op == "parameter" and n.attrs["name"] == name)


def readers(g: Graph, node: Node, op: str) -> list[Node]:
    return [n for n in g.nodes if node.id in n.inputs and n.op == op]


def test_a_loop_over_a_plain_function_is_one_group_per_call(args):
    g = traced(model, *args)
    root = tree(g)
    by_path = groups(root)
    assert names(by_path[("layer",)]) == [f"layer #{k}" for k in range(LAYERS)]
    for k in range(LAYERS):  # each call holds the ops on its own layer's weights
        [dot] = readers(g, param(g, f"params[{k}]['wq']"), "dot_general")
        assert path_of(root, dot)[:2] == ("layer", f"layer #{k}")
    sizes = {len(by_path[("layer", f"layer #{k}")].nodes()) for k in range(1, LAYERS)}
    assert len(sizes) == 1  # the same ops in every call past the first


def test_helpers_called_in_each_call_are_numbered_inside_it(args):
    g = traced(model, *args)
    root = tree(g)
    inside = ("layer", "layer #1")
    for k, w in enumerate(("wq", "wk", "wv")):  # attention calls dense three times
        [dot] = readers(g, param(g, f"params[1]['{w}']"), "dot_general")
        assert path_of(root, dot)[:5] == (*inside, "attention", "dense", f"dense #{k}")
    for k, w in enumerate(("w1", "w2")):  # mlp twice (mlp is all dense: one group)
        [dot] = readers(g, param(g, f"params[1]['{w}']"), "dot_general")
        assert path_of(root, dot)[:4] == (*inside, "mlp", "dense")
        assert path_of(root, dot)[4] == f"dense #{k}"


def test_the_backward_pass_numbers_its_calls_as_the_forward_pass(args):
    g = traced(jax.grad(model), *args)
    root = tree(g)
    by_path = groups(root)
    assert names(by_path[("layer (transpose)",)]) == [  # the backward pass runs backwards
        f"layer #{k} (transpose)" for k in reversed(range(LAYERS))]
    assert names(by_path[("layer",)]) == [f"layer #{k}" for k in range(LAYERS)]
    # the gradient of layer k's weights is made in the backward part of call k
    leaves = sorted(f"params[{k}]['{w}']" for k in range(LAYERS)
                   for w in ("w1", "w2", "wk", "wq", "wv"))
    for name, out in zip(leaves, g.outputs):
        k = name[7]
        assert f"layer #{k} (transpose)" in path_of(root, g[out]), (name, path_of(root, g[out]))


def test_a_list_comprehension_and_a_jitted_model_keep_the_calls(args):
    for fn in (model_comprehension, jax.jit(model)):
        root = tree(traced(fn, *args))
        found = {name for p in groups(root) for name in p}
        assert {f"layer #{k}" for k in range(LAYERS)} <= found, (fn, found)
        assert not any("listcomp" in p or "<locals>" in p for p in found)


def test_a_jitted_helper_in_a_loop_is_one_group_per_call(args):
    params, x = args
    ws = [p["wq"] for p in params]
    root = tree(traced(blocks, ws, x))
    by_path = groups(root)
    assert names(by_path[("block",)]) == [  # the jit's scope "block" is the function's group
        f"block #{k}" for k in range(LAYERS)]
    root = tree(traced(jax.grad(blocks), ws, x))
    found = {name for p in groups(root) for name in p}
    assert {f"block #{k} (transpose)" for k in range(LAYERS)} <= found, found


def test_a_named_scope_around_a_call_stays_around_it(args):
    g = traced(scoped, *args)
    root = tree(g)
    for scope, k in (("encoder", 0), ("decoder", 1)):
        [dot] = readers(g, param(g, f"params[{k}]['wq']"), "dot_general")
        # one call of layer in each scope: no number
        assert path_of(root, dot)[:3] == (scope, "layer", "attention"), path_of(root, dot)


def test_more_calls_than_fit_are_cut_into_blocks_of_calls():
    g = traced(many_steps, np.ones(4, np.float32))
    root = hierarchy(g, budget=10)
    by_path = groups(root)
    assert names(by_path[("step",)]) == [f"step #{k}…#{k + 3}" for k in range(0, 20, 4)]
    block = by_path[("step", "step #4…#7")]
    assert names(block) == [f"step #{k}" for k in range(4, 8)]
    layout = plan_layout(g, budget=10)  # blocks are opened in the first view, unlike runs
    assert layout.boxes <= 10
    assert [e.group.path for e in layout.entries if isinstance(e, Cluster)] == [("step",)]


def test_many_parameters_are_grouped_by_their_pytree_paths(args):
    g = traced(model, *args)
    assert len(g.params) > 8
    by_path = groups(tree(g))
    inputs = by_path[("inputs",)]
    assert [getattr(c, "path", None) or c.attrs["name"] for c in inputs.children] == [
        ("inputs", "params"), "x"]
    assert names(by_path[("inputs", "params")]) == [f"params[{k}]" for k in range(LAYERS)]
    leaves = by_path[("inputs", "params", "params[2]")].nodes()
    assert [n.attrs["name"] for n in leaves] == [
        f"params[2]['{w}']" for w in ("w1", "w2", "wk", "wq", "wv")]


def test_call_groups_keep_their_keys_through_the_pipeline(args):
    trace = gx.explore(model, *args)
    first = {g.key: p[-1] for p, g in groups(tree(trace.stages[0].graph)).items() if "#" in p[-1]}
    assert len(first) >= LAYERS * 6
    for stage in trace.stages[1:]:
        later = {g.key: p[-1] for p, g in groups(tree(stage.graph)).items() if "#" in p[-1]}
        layers = {k: v for k, v in first.items() if v.startswith("layer #")}
        assert layers.items() <= later.items(), stage.name


def test_calls_are_metadata_the_ir_text_does_not_carry(args):
    g = traced(model, *args)
    assert all(n.source.calls for n in g.nodes if n.op == "dot_general")
    text = str(g)
    back = gx.parse(text)
    assert str(back) == text and back == g  # not printed, not compared
    assert "layer #" not in text
    assert not any(n.source and n.source.calls for n in back.nodes)


def test_the_first_view_of_the_12_layer_model_shows_its_layers():
    fn, args = mlp_attention_grad(12)
    g = traced(fn, *args)
    layout = plan_layout(g, BUDGET)
    assert layout.boxes <= BUDGET
    svg = render(g).svg
    for k in range(12):
        assert f"▸ _layer #{k} · " in svg and f"▸ _layer #{k} (transpose) · " in svg, k
    assert "▸ params · 84 ops" in svg  # its 84 weights are one box
