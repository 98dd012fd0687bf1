# %% [markdown]
# # 00 · A five-minute tour
#
# gambit-explorer shows what a compiler does to your JAX code, one pass at a time, inside
# Jupyter. You write a function; the explorer traces it into its own graph IR, runs a
# pipeline of passes, and keeps every intermediate program (a *stage*) so you can step
# through them: the graph before and after, the IR diff, which rewrite fired on which line
# of your code, and what the stage costs. Then it runs the stages and compares them with
# NumPy, JAX and `jax.jit`.
#
# This tour does all of that on one small function. The other notebooks take one idea each.
#
# ## Load the extension
#
# `%load_ext explorer` adds the `%%gambit` cell magic.

# %%
%load_ext explorer

import jax.numpy as jnp
import numpy as np

import explorer as gx

# Arrays print with 3 decimals: the distance rewrite below rounds differently from the
# program as written, and its last float32 digits depend on the CPU (its BLAS and vector
# units), so a saved output shows what every machine prints.
np.set_printoptions(precision=3, suppress=True)

rng = np.random.default_rng(0)
# small integer-valued inputs: the program as written computes every result exactly
a = rng.integers(-3, 4, (6, 3)).astype(np.float32)
b = rng.integers(-3, 4, (5, 3)).astype(np.float32)
w = rng.integers(-3, 4, (5, 4)).astype(np.float32)
v = rng.integers(-3, 4, (4,)).astype(np.float32)

# %% [markdown]
# ## Trace a cell
#
# A `%%gambit` cell runs as usual up to its last line, which must be a call. That call is
# traced instead of run eagerly; the widget appears, the optimised program runs (on the
# `cpu` backend when available), and its result is the cell's value. `--out tour` keeps the
# `Trace` in a variable.
#
# The function: squared distances between the rows of `a` and `b`, written the broadcast way,
# then two matrix products.

# %%
%%gambit --out tour
def scores(a, b, w, v):
    d = jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1)
    return d @ w @ v

scores(a, b, w, v)

# %% [markdown]
# ## The stages
#
# `tour.stages` holds one stage per pass, after `traced` (the program as JAX traced it).
# The summary shows the node count, FLOPs, bytes moved, planned peak of temporaries and the
# number of rewrites of each:

# %%
print(tour.summary())

# %% [markdown]
# ## Look at a rewrite
#
# Four passes changed the program. Each rewrite names its rule and the line of `scores` it
# rewrote (`In[N]` is the notebook cell; line 1 is the `%%gambit` line):

# %%
for stage in tour.stages:
    for rw in stage.report.rewrites:
        print(f"{stage.name:>20}: {rw.rule:<26} at {rw.source}")

# %% [markdown]
# Step to `dot-order` and diff its IR against the stage before: `(d @ w) @ v` became
# `d @ (w @ v)`, a matrix-vector product first.

# %%
from explorer.view.diff import ir_diff

k = next(i for i, s in enumerate(tour.stages) if s.name == "dot-order")
print(ir_diff(tour.stages[k - 1].graph, tour.stages[k].graph).to_text(width=70))

# %% [markdown]
# The widget does the same with buttons; in code, `widget.step(1)` moves to the next stage
# (with `hide_unchanged=True`, to the next one that changed something):

# %%
widget = tour.widget(hide_unchanged=True)
for _ in range(3):
    widget.step(1)
    print(widget.index, tour.stages[widget.index].name, "rewrites:", len(widget.rewrites))

# %% [markdown]
# ## Run
#
# Any stage runs on any backend: `reference` (the NumPy interpreter every pass is checked
# against), `cpu` (generated kernels), `jax` (our graph through XLA), and `gpu` (CUDA via
# CuPy, when a GPU is present; notebook 04). The inputs are small integers, so every backend
# must give exactly NumPy's answer:

# %%
d = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
expected = d @ w @ v
for backend in ("reference", "cpu", "jax"):
    for stage in ("traced", -1):
        got = tour.run(backend=backend, stage=stage).value
        print(f"{backend:>9} {tour.stage(stage).name:>7}: equal to NumPy: {np.array_equal(got, expected)}")

# %% [markdown]
# ## Compare
#
# `tour.compare()` times each changed stage on the backends and the baselines (NumPy op by
# op, JAX eager, `jax.jit`), with peak memory and a value check. At this size the times only
# show overheads (and they vary from run to run; the tests mask them); notebook 04 compares
# on real sizes. (`%%gambit --compare` does this from the magic.)

# %%
comparison = tour.compare(progress=False, plot=False)
for r in comparison.rows:
    print(f"{r.label:<26} {r.median * 1e3:8.3f} ms   values ok: {r.ok}")

# %% [markdown]
# ## Export
#
# `tour.to_html(path)` writes the whole exploration as one standalone page (no kernel
# needed), to share or to attach to a bug report.

# %%
import os
import tempfile

with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "scores.html")
    tour.to_html(path)
    page = open(path).read()
print("standalone page written:", page.lstrip().lower().startswith("<!doctype html"),
      "| stages in it:", all(s.name in page for s in tour.stages))

# %% [markdown]
# ## Where next
#
# * 01: matrix chains and `dot-order`; 02: the Euclidean distance rewrite;
# * 03: running under a `memory_limit`; 04: fusion and the generated kernels;
# * 05: recognising a matrix product; 06: XLA's own pipeline, pass by pass;
# * 07: writing your own pass.
