# %% [markdown]
# # 01 · Matrix chains: `(A @ B) @ v` versus `A @ (B @ v)`
#
# Matrix multiplication is associative, so `(A @ B) @ v` and `A @ (B @ v)` compute the same
# vector. Their costs are very different. With `A` of shape N×M, `B` of shape M×D and `v` a
# vector of length D:
#
# * `(A @ B) @ v` first builds the N×D matrix `A @ B`: **2·N·M·D** FLOPs plus 2·N·D for the
#   matrix-vector product, and an N×D temporary.
# * `A @ (B @ v)` does two matrix-vector products: **2·M·D + 2·N·M** FLOPs, and its only
#   temporary is a vector of length M.
#
# Python (and JAX, and XLA) evaluate `A @ B @ v` left to right, as written. This is the first
# example of the gambit project (seed 000): a compiler pass, `dot-order`, that re-associates
# chains of products into the cheapest order. This notebook traces the chain, finds the
# rewrite, and checks the FLOP counts against the formulas above.

# %%
import jax.numpy as jnp
import numpy as np

import explorer as gx

rng = np.random.default_rng(0)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


N, M, D = 400, 300, 200
A, B, v = rand(N, M), rand(M, D), rand(D)

# %% [markdown]
# ## Trace the chain and run the standard pipeline
#
# `gx.explore` traces the function with these example arguments into the explorer's graph IR
# and runs the default pipeline one pass at a time, keeping a snapshot (a *stage*) after
# every pass. The summary shows, per stage, the number of nodes, the FLOPs, the bytes moved,
# the planned peak of live temporaries, and how many rewrites fired.

# %%
def chain(a, b, v):
    return a @ b @ v


trace = gx.explore(chain, A, B, v)
print(trace.summary())

# %% [markdown]
# Only `dot-order` changed anything, and the FLOPs dropped by two orders of magnitude. Each
# rewrite is logged with the rule that fired and the line of *your* code it rewrote: `In[N]`
# is the notebook cell that defined `chain`, as Jupyter numbers it.

# %%
for stage in trace.stages:
    for rw in stage.report.rewrites:
        print(f"{stage.name}: {rw.rule} at {rw.source}")

# %% [markdown]
# The IR text of the traced program and of the final stage shows the new order: `B @ v`
# (node `%5`, a vector of length M) first, then `A @ (B @ v)`.

# %%
print(trace.stages[0].graph)
print(trace.final.graph)

# %% [markdown]
# ## Check the claims
#
# The cost model counts 2 FLOPs per multiply-add of a `dot_general`. It must agree with the
# formulas from the introduction, and both programs must compute the same vector.

# %%
before, after = trace.stages[0].cost, trace.final.cost
print("FLOPs before:", f"{before.flops:,}", before.flops == 2 * N * M * D + 2 * N * D)
print("FLOPs after: ", f"{after.flops:,}", after.flops == 2 * M * D + 2 * N * M)
print(f"{before.flops / after.flops:.1f}x fewer FLOPs")
print("peak temporaries before:", before.peak_bytes, "bytes =", N * D, "floats")
print("peak temporaries after: ", after.peak_bytes, "bytes")


def close(got, want, tol=1e-5):
    """Equal up to float32 rounding, relative to the size of the values."""
    return bool(np.abs(got - want).max() <= tol * np.abs(want).max())


expected = (A.astype(np.float64) @ B) @ v  # in double precision
for k in (0, -1):
    got = trace.run(stage=k).value  # the reference interpreter: NumPy, one op at a time
    print(f"stage {trace.stages[k].name!r} matches NumPy:", close(got, expected))

# %% [markdown]
# The gap grows with the matrices: the naive order is cubic, the good one quadratic.

# %%
print(f"{'N=M=D':>6} {'(A@B)@v FLOPs':>16} {'A@(B@v) FLOPs':>15} {'ratio':>7}")
for n in (50, 100, 200, 400, 800):
    t = gx.explore(chain, rand(n, n), rand(n, n), rand(n))
    b, a = t.stages[0].cost.flops, t.final.cost.flops
    print(f"{n:>6} {b:>16,} {a:>15,} {b / a:>7.1f}")

# %% [markdown]
# FLOPs are a model; the clock is the test. Running the traced and the final stage on the
# reference interpreter (plain NumPy) shows the same story in milliseconds. Timings change
# from run to run, so the tests of this notebook mask them.

# %%
import time


def best_ms(fn, repeats=5):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


print(f"traced (A@B)@v: {best_ms(lambda: trace.run(stage=0)):.2f} ms")
print(f"final  A@(B@v): {best_ms(lambda: trace.run(stage=-1)):.2f} ms")

# %% [markdown]
# ## Longer chains
#
# `dot-order` solves the classic matrix-chain problem: for a chain of any length it finds the
# cheapest parenthesisation by dynamic programming. Here four matrices with a thin middle
# (`B` has only 5 columns) are best multiplied as `(A @ B) @ (C @ E)`, which neither
# left-to-right nor right-to-left evaluation gives.

# %%
def chain4(a, b, c, e):
    return a @ b @ c @ e


t4 = gx.explore(chain4, rand(10, 100), rand(100, 5), rand(5, 80), rand(80, 60))
print(t4.final.graph)
print("FLOPs:", f"{t4.stages[0].cost.flops:,}", "->", f"{t4.final.cost.flops:,}")
print("same values as the traced order:", close(t4.run().value, t4.run(stage=0).value))

# %% [markdown]
# And a chain that is already in its best order is left alone: `x @ A @ B @ x` (the quadratic
# form xᵀABx) evaluated left to right only ever multiplies a vector by a matrix. The pass
# fires only on a strict improvement, so it reports no change.

# %%
def quadratic_form(x, a, b):
    return x @ a @ b @ x


tq = gx.explore(quadratic_form, rand(50), rand(50, 50), rand(50, 50))
print("dot-order changed the graph:", tq.stage("dot-order").report.changed)
print("FLOPs:", f"{tq.stages[0].cost.flops:,}", "->", f"{tq.final.cost.flops:,}")

# %% [markdown]
# ## What XLA does with the same chain
#
# `jax.jit` hands the chain to XLA, which keeps the order as written. XLA's own cost
# analysis of its compiled program counts the cubic FLOPs; ours counts the quadratic ones.

# %%
import jax

xla_flops = jax.jit(chain).lower(A, B, v).compile().cost_analysis()["flops"]
print(f"XLA (jax.jit) FLOPs: {int(xla_flops):,}")
print(f"ours (final stage):  {trace.final.cost.flops:,}")

# %% [markdown]
# ## Step through it
#
# `trace.widget()` is the interactive view: step through the passes, see each graph before
# and after, the IR diff and the rewrites. On GitHub you see its static summary instead.

# %%
trace.widget()
