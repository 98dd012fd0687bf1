# %% [markdown]
# # 08 · A real model and its gradient
#
# The seeds' examples are a few lines each. The programs people actually have are
# transformers and their gradients, written with `jax.nn`, equinox or flax, with random
# numbers, control flow and linear algebra. This notebook opens one — a small GPT block
# with a token embedding, causal attention and an MLP — and its gradient, steps through the
# passes, and runs the result on every CPU-side backend against JAX.

# %%
import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx

rng = np.random.default_rng(0)
VOCAB, SEQ, DIM, HEADS = 64, 16, 32, 4


def normal(*shape):
    return (rng.standard_normal(shape) * 0.2).astype(np.float32)


params = {"embed": normal(VOCAB, DIM), "pos": normal(SEQ, DIM),
          "qkv": normal(DIM, 3 * DIM), "proj": normal(DIM, DIM),
          "w1": normal(DIM, 4 * DIM), "w2": normal(4 * DIM, DIM),
          "ln": {"g": np.ones(DIM, np.float32), "b": np.zeros(DIM, np.float32)}}
tokens = rng.integers(0, VOCAB, SEQ).astype(np.int32)
targets = np.roll(tokens, -1)

# %% [markdown]
# The model is ordinary JAX. `jax.named_scope` and `jax.jit`-ed helpers are how JAX users
# name the parts of a model; the explorer keeps those names as each node's **scope**.

# %%
@jax.jit
def layer_norm(x, ln):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * ln["g"] + ln["b"]


def attention(p, x):
    t, d = x.shape
    q, k, v = (a.reshape(t, HEADS, d // HEADS).transpose(1, 0, 2)
               for a in jnp.split(x @ p["qkv"], 3, axis=-1))
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(d // HEADS)
    scores = jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, -1e9)
    return (jax.nn.softmax(scores, -1) @ v).transpose(1, 0, 2).reshape(t, d) @ p["proj"]


def gpt(p, tokens):
    x = p["embed"][tokens] + p["pos"]               # an embedding lookup: a gather
    with jax.named_scope("attention"):
        x = x + attention(p, layer_norm(x, p["ln"]))
    with jax.named_scope("mlp"):
        x = x + jax.nn.gelu(layer_norm(x, p["ln"]) @ p["w1"]) @ p["w2"]
    return x @ p["embed"].T


def loss(p, tokens, targets):
    logp = jax.nn.log_softmax(gpt(p, tokens), -1)
    return -jnp.take_along_axis(logp, targets[:, None], -1).mean()

# %% [markdown]
# ## The gradient, explored
#
# `jax.grad(loss)` is a program of a few hundred operations. The arguments are passed as
# JAX users pass them: a dict of parameters (a pytree) and integer token arrays.

# %%
grad = jax.grad(loss)
trace = gx.explore(grad, params, tokens, targets)
print(trace.summary())

# %% [markdown]
# Every node keeps the line of this cell it came from and the scope it sits in. The
# backward pass of a scope shows as `name (transpose)`:

# %%
from collections import Counter

scopes = Counter(n.source.scope or "(top level)" for n in trace.stages[0].graph.nodes
                 if n.source is not None)
for scope, count in sorted(scopes.items()):
    print(f"{count:>4}  {scope}")

# %% [markdown]
# ## What runs as JAX's own implementation
#
# Primitives that have a row in the op table are first-class: passes rewrite them, the
# code generators fuse them. A primitive without a row is never refused: it becomes an
# `opaque` node that keeps the primitive, its parameters and its source line, passes leave
# it alone, and every backend runs it through JAX. Here is what this program has of each:

# %%
traced = trace.stages[0].graph
ops = Counter(n.op for n in traced.nodes)
opaque = Counter(n.attrs["opcode"] for n in traced.nodes if n.op == "opaque")
print(f"{len(traced)} nodes, {len(ops)} distinct ops; opaque primitives: {dict(opaque) or 'none'}")

# %% [markdown]
# ## Stepping through the passes
#
# The rewrites each pass made, with the line of the cell they came from (the widget shows
# the same, with the graphs before and after and the IR diff):

# %%
for stage in trace.stages[1:]:
    rules = Counter(r.rule for r in stage.report.rewrites)
    print(f"{stage.name:<20} {len(stage.graph):>5} nodes  {dict(rules.most_common(3))}")

# %%
trace.widget()

# %% [markdown]
# A rule-driven pass can also be stepped **rewrite by rewrite**: `trace.after_firing(stage, k)`
# is the graph after the pass's first `k` firings, in the order its report logs them (the
# driver is deterministic), so you can watch a pass work one rule at a time. The widget does
# the same: on a rule pass's stage, shift+→ and shift+← step through its firings (the graph
# just before and after each, the rule and the line), and Esc goes back to the whole pass.
# After every firing the graph still computes the same values:

# %%
at = next(i for i, s in enumerate(trace.stages) if s.name == "simplify")
fired = trace.stages[at].report.rewrites
flat = trace.flat_args(trace.example_args)
before = gx.backends.registry.run_graph(trace.stages[at - 1].graph, flat, "reference").outputs
for k in range(1, 4):
    g = trace.after_firing(at, k)
    now = gx.backends.registry.run_graph(g, flat, "reference").outputs
    same = all(np.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(now, before))
    print(f"after firing {k}: {fired[k - 1].rule:<22} at {fired[k - 1].source}  "
          f"{len(g)} nodes, same values: {same}")
print("all firings give the stage itself:",
      str(trace.after_firing(at, len(fired))) == str(trace.stages[at].graph))

# %% [markdown]
# ## The same numbers on every backend
#
# The final stage runs on the reference interpreter, the CPU backend (generated kernels)
# and the JAX backend; each matches `jax.grad` evaluated by JAX itself.

# %%
expected = grad(params, tokens, targets)
for backend in ("reference", "cpu", "jax"):
    got = trace.run(backend=backend).value
    err = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
              for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)))
    print(f"{backend:<10} max |ours - jax| = {'< 1e-5' if err < 1e-5 else f'{err:.1e}'}",
          "within 1e-4:", err < 1e-4)

# %% [markdown]
# ## Modules as arguments
#
# An equinox model carries its activation functions as leaves of the pytree; those (and
# strings, bools and Python numbers inside containers) are **static**, as
# `equinox.filter_jit` treats them, so a model that branches on its configuration in
# Python traces. Its modules show as scopes too.

# %%
import equinox as eqx

mlp = eqx.nn.MLP(4, 2, 16, 2, activation=jax.nn.gelu, key=jax.random.PRNGKey(0))
x = normal(8, 4)
mlp_trace = gx.explore(lambda model, x: jax.vmap(model)(x), mlp, x)
print(mlp_trace.traced.arg_names)
print(sorted({n.source.scope for n in mlp_trace.stages[0].graph.nodes if n.source and n.source.scope}))
print("matches the model:", bool(np.allclose(mlp_trace.run(backend="cpu").value, jax.vmap(mlp)(x),
                                             atol=1e-5)))
