# %% [markdown]
# # 10 · Sharded programs: a 2-layer MLP over 4 devices
#
# A program that outgrows one device is split over several: `jax.jit` with `in_shardings`
# over a `Mesh`, `with_sharding_constraint` inside, or `shard_map` with explicit
# collectives. XLA then turns the one global program into a per-device program (sharding
# propagation, then the SPMD partitioner) and inserts the communication it needs. This
# notebook takes a 2-layer MLP through **data parallelism** and **tensor parallelism** and
# asks, for each: what does the explorer's IR say about the shardings, does it still compute
# what `jax.jit` computes, where does XLA put the all-reduce, and what does each device hold?
#
# No accelerator is needed: XLA's CPU client can pretend to be several devices. The flag must
# be set **before JAX starts** (JAX reads `XLA_FLAGS` once, when it creates its backends), so
# it is the first thing the first cell does. A notebook's kernel is a fresh process, so this
# works under `make lab` and under nbval; in a kernel that has already imported JAX, restart
# it first. In a script, set `XLA_FLAGS=--xla_force_host_platform_device_count=4` in the shell.

# %%
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax
import jax.numpy as jnp
import numpy as np
from IPython.display import SVG
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import explorer as gx
from explorer.ir.graph import device_types
from explorer.view.render import render

print("devices:", jax.device_count(), "on", jax.default_backend())

# %% [markdown]
# ## The model
#
# Two dense layers with a `tanh` between them, a squared-error loss, and one SGD step that
# returns the updated weights. The batch has 64 rows of 32 features; the hidden layer has 128
# units.

# %%
rng = np.random.default_rng(0)


def rand(*shape):
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


x, y = rand(64, 32), rand(64, 16)
w1, w2 = rand(32, 128), rand(128, 16)


def mlp(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


def loss(w1, w2, x, y):
    return jnp.mean((mlp(x, w1, w2) - y) ** 2)


def sgd_step(w1, w2, x, y):
    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2, x, y)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


def matches(a, b):
    """Every leaf of two results agrees to float32 rounding."""
    return all(np.allclose(p, q, rtol=1e-4, atol=1e-5)
               for p, q in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def sharded_lines(graph):
    """The IR lines that carry a sharding: parameters and sharding constraints."""
    for line in str(graph).splitlines():
        if "sharding=" in line:
            print(line.strip())

# %% [markdown]
# ## Data parallelism
#
# Each of the 4 devices takes a quarter of the batch (`P("data", None)`: rows split over the
# mesh axis `data`, columns whole); the weights are replicated (`P()`), and so are the
# updated weights that come out.

# %%
mesh = Mesh(np.array(jax.devices()), ("data",))
batch = NamedSharding(mesh, P("data", None))
replicated = NamedSharding(mesh, P())
dp_step = jax.jit(sgd_step, in_shardings=(replicated, replicated, batch, batch),
                  out_shardings=(replicated, replicated))

dp = gx.explore(dp_step, w1, w2, x, y)
sharded_lines(dp.stages[0].graph)

# %% [markdown]
# The shardings are attributes of the IR: each parameter carries its mesh and spec, the
# `out_shardings` became `sharding_constraint` nodes on the results, and every sharded line
# ends with what one device holds (`// per device: f32[16,32]` for a quarter of `x`). The
# program itself is still the global one, so the explorer's passes and backends run it as
# written; the reference interpreter, the generated CPU kernels and the JAX backend (which
# places the arguments on a mesh of the 4 devices) all agree with `jax.jit`:

# %%
expected = dp_step(w1, w2, x, y)
for backend in ("reference", "cpu", "jax"):
    print(f"{backend:<9} matches jax.jit:", matches(dp.run(backend=backend).value, expected))

# %% [markdown]
# ### Where XLA puts the all-reduce
#
# `gx.xla_pipeline` compiles the same jitted function with its shardings and keeps a stage
# for each XLA pass that changed the module. `trace.spmd()` tells the SPMD part of the
# story: which stage propagated the shardings, which one partitioned the module into one
# device's program, and the collectives, each with the stage that inserted it and the user's
# line it came from.

# %%
dp_xla = gx.xla_pipeline(dp_step, w1, w2, x, y)
dp_spmd = dp_xla.spmd()
print("devices:", dp_spmd.devices)
print("propagation:", ", ".join(dp_spmd.propagation))
print("partitioned in:", dp_spmd.partitioning)
for c in dp_spmd.inserted():
    print(f"\n{c.opcode} in {c.stage}\n  -> {c.type}, reduction={c.attrs.get('reduction')}")
    print(f"  at {c.source}, in {c.source.function}")

# %% [markdown]
# Each device computes the gradients of its quarter of the batch. The gradient of a weight
# is a matrix product that contracts over the batch (`x.T @ δ`), so each device holds only a
# partial sum of it: the SPMD partitioner adds an **all-reduce** (sum) after each weight
# gradient, with the line of `mlp` whose matrix products they differentiate
# (`return jnp.tanh(x @ w1) @ w2`). Later, XLA's
# CPU all-reduce combiner merges the two into one all-reduce of a tuple, which sends one
# message instead of two.
#
# What each device holds, global → per device, after partitioning:

# %%
for s in dp_spmd.shapes:
    print(s)
print(str(dp_spmd).splitlines()[-1])  # XLA's own memory figures, per device

# %% [markdown]
# `x` and `y` are split (16 of 64 rows each), while the weights and the updated weights are
# whole on every device: data parallelism saves activation memory, not parameter memory.

# %% [markdown]
# ## Tensor parallelism
#
# Now the hidden layer is split instead: `w1` by columns (`P(None, "model")`, 32 of the 128
# hidden units per device) and `w2` by rows (`P("model", None)`, the same 32 units). Each
# device computes its 32 hidden units for the whole batch; `with_sharding_constraint` says
# that the hidden activations stay split that way. The batch and the result are replicated.

# %%
tmesh = Mesh(np.array(jax.devices()), ("model",))
cols = NamedSharding(tmesh, P(None, "model"))
rows = NamedSharding(tmesh, P("model", None))
whole = NamedSharding(tmesh, P())


def tp_mlp(x, w1, w2):
    h = jnp.tanh(x @ w1)
    h = jax.lax.with_sharding_constraint(h, cols)
    return h @ w2


tp_fn = jax.jit(tp_mlp, in_shardings=(whole, cols, rows), out_shardings=whole)
tp = gx.explore(tp_fn, x, w1, w2)
print(tp.stages[0].graph)

# %% [markdown]
# The constraint is an op of its own (`sharding_constraint`, with its line), not an opaque
# node, and the passes leave it where it is: after `fuse`, the matmul and `tanh` are one
# kernel and the constraint still follows it.

# %%
print([n.op for n in tp.final.graph.nodes])
expected = tp_fn(x, w1, w2)
for backend in ("reference", "cpu", "jax"):
    print(f"{backend:<9} matches jax.jit:", matches(tp.run(backend=backend).value, expected))

# %% [markdown]
# The graph view shows each sharded value's per-device shape beside its global one, and its
# spec as you wrote it (the widget draws the same boxes; hover one for the mesh and where a
# constraint came from):

# %%
for n in tp.stages[0].graph.nodes:
    per = device_types(n)
    if per:
        print(f"%{n.id:<2} {n.attrs.get('name', n.op):<20} {str(n.type):>12} -> per device "
              f"{', '.join(map(str, per))}")
SVG(render(tp.stages[0].graph).svg)

# %% [markdown]
# ### Where the all-reduce goes now

# %%
tp_xla = gx.xla_pipeline(tp_fn, x, w1, w2)
tp_spmd = tp_xla.spmd()
print("partitioned in:", tp_spmd.partitioning)
for c in tp_spmd.inserted():
    print(f"\n{c.opcode} in {c.stage}\n  -> {c.type}, reduction={c.attrs.get('reduction')}")
    print(f"  at {c.source}, in {c.source.function}")
print()
for s in tp_spmd.shapes:
    print(s)

# %% [markdown]
# The first layer needs no communication: every device has all of `x` and its own columns
# of `w1`, so it computes its own 32 hidden units. The second product contracts over the
# hidden units, which are split, so each device holds a partial `[64, 16]` result, and the
# partitioner inserts one all-reduce on the line `return h @ w2`. Here the weights are what
# is split (a quarter of `w1` and of `w2` per device) and the activations are whole: the
# other way round from data parallelism.

# %% [markdown]
# ## The same all-reduce, written by hand: `shard_map`
#
# `shard_map` writes the per-device program directly: the body sees one device's blocks and
# calls the collective itself. The explorer reads it as a region with its mesh and specs,
# whose body has per-device types and a `psum` op; reference and cpu run the body once per
# device and sum across them.

# %%
def layer2(h, w2):
    return jax.lax.psum(h @ w2, "model")


sm_fn = jax.jit(jax.shard_map(layer2, mesh=tmesh, in_specs=(P(None, "model"), P("model", None)),
                              out_specs=P()))
h = np.tanh(x @ w1)
sm = gx.explore(sm_fn, h, w2)
region = next(n for n in sm.stages[0].graph.nodes if n.op == "shard_map")
print(region.attrs["mesh"], "in_specs:", *region.attrs["in_specs"], "out_specs:",
      *region.attrs["out_specs"])
print(region.attrs["body"])
expected = sm_fn(h, w2)
for backend in ("reference", "cpu", "jax"):
    print(f"{backend:<9} matches jax.jit:", matches(sm.run(backend=backend).value, expected))

# %% [markdown]
# In XLA's pipeline this all-reduce is not inserted by the partitioner: it is in the traced
# module already, so `spmd()` lists it as written by the program.

# %%
sm_spmd = gx.xla_pipeline(sm_fn, h, w2).spmd()
for c in sm_spmd.collectives:
    print(c.opcode, "->", c.type, "|",
          "written by the program" if c.stage == "traced" else f"inserted in {c.stage}")
print("XLA inserted none:", not sm_spmd.inserted())
