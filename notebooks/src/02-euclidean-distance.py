# %% [markdown]
# # 02 · Euclidean distance: the broadcast form and the quadratic form
#
# The squared distance between every row of `A` (N points in K dimensions) and every row of
# `B` (M points) is often written the NumPy way, with broadcasting:
#
# ```python
# D = sum((A[:, None, :] - B[None, :, :]) ** 2, axis=-1)      # D[i, j] = |A[i] - B[j]|²
# ```
#
# It reads well, but the difference `A[:, None, :] - B[None, :, :]` is an **N×M×K** tensor:
# K times larger than the N×M answer. On a GPU this is what runs out of memory first
# (seed 000). Expanding the square gives the *quadratic form*
#
# ```
# |a - b|² = |a|² + |b|² - 2 a·b
# ```
#
# whose only large piece is the matrix product `A @ B.T`, with N×M output. The explorer's
# `euclidean-distance` pass finds the broadcast form and rewrites it into the quadratic one.
# This notebook shows the rewrite and measures what it saves.

# %%
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.units import format_bytes

rng = np.random.default_rng(0)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


N, M, K = 300, 200, 16
A, B = rand(N, K), rand(M, K)

# %% [markdown]
# ## The naive program

# %%
def distances(a, b):
    return jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1)


trace = gx.explore(distances, A, B)
print(trace.stages[0].graph)

# %% [markdown]
# Nodes `%4` (the difference) and `%5` (its square) are both `f32[300,200,16]`. The memory
# planner schedules the graph and finds the largest total of live temporaries (everything
# but the inputs and outputs). At the moment `%5` is computed, `%4` is still alive, so the
# planned peak is two N×M×K float32 tensors:

# %%
traced = trace.stages[0]
print("planned peak:", f"{traced.cost.peak_bytes:,}", "bytes =",
      format_bytes(traced.cost.peak_bytes))
print("two N*M*K float32 tensors:", traced.cost.peak_bytes == 2 * N * M * K * 4)

# %% [markdown]
# ## The pipeline
#
# The summary lists every stage. `simplify` first turns `x ** 2` into `x * x`;
# `euclidean-distance` then rewrites the whole expression. (`fuse`, at the end, groups
# element-wise work into kernels for the CPU and GPU backends: notebook 04.)

# %%
print(trace.summary())
print()
for stage in trace.stages:
    for rw in stage.report.rewrites:
        print(f"{stage.name:>20}: {rw.rule} at {rw.source}")

# %% [markdown]
# The program after `euclidean-distance`: two row norms (`reduce_sum` of `mul`), one
# `dot_general` with `B` scaled by -2(1 + c), and additions of N×M size. A final
# `max(..., 0)` keeps rounding from producing a negative distance; the tiny c (2(K+2) units of
# roundoff) makes the form slightly negative where two points coincide, so the clamp turns a
# point's distance to itself into an exact 0 rather than rounding noise (README, "Numerics
# and bad input"). With K = 16 features (at most 32) the whole form is computed in float64
# (the `convert_element_type` nodes) and rounded to float32 once at the end: its
# cancellation then stays far below float32's own rounding, and with so few features the
# product's cost is writing its N×M result anyway. No node is N×M×K any more.

# %%
rewritten = trace.stage("euclidean-distance")
print(rewritten.graph)
biggest = max(n.type.size for n in rewritten.graph.nodes)
print("largest tensor:", biggest, "elements =", "N*M" if biggest == N * M else "?")

# %% [markdown]
# ## Check the claims: memory, FLOPs, values
#
# The planned peak drops from two N×M×K tensors to a few N×M ones. The reference interpreter
# runs each stage op by op with NumPy and measures its real peak with `tracemalloc`; the
# measurement agrees with the plan within NumPy's own bookkeeping and ufunc buffers (the plan
# counts the buffers in full: up to 64 KiB for a broadcast float64 add;
# `trace.memory_timeline()` shows both step by step).

# %%
for stage in ("traced", "euclidean-distance"):
    planned = trace.stage(stage).cost.peak_bytes
    measured = trace.run(stage=stage).peak_bytes
    print(f"{stage:>20}: planned {format_bytes(planned):>9}, measured {format_bytes(measured):>9},"
          f" within 64 KiB of the plan: {abs(measured - planned) < 64 * 1024}")
ratio = traced.cost.peak_bytes / rewritten.cost.peak_bytes
print(f"planned peak is {ratio:.1f}x smaller")
print("FLOPs:", f"{traced.cost.flops:,}", "->", f"{rewritten.cost.flops:,}")

# %% [markdown]
# The quadratic form is not bit-identical: `|a|² + |b|² - 2a·b` cancels when two points are
# close, so in a type of its own it is accurate relative to the norms, not to the distance
# itself. Computed in float64 for float32 points, the cancellation falls below float32's
# rounding: compared with a float64 NumPy computation of the broadcast form, both programs
# are within a few units of float32 rounding of the distances themselves:

# %%
a64, b64 = A.astype(np.float64), B.astype(np.float64)
exact = ((a64[:, None, :] - b64[None, :, :]) ** 2).sum(-1)
for stage in ("traced", "euclidean-distance"):
    err = np.abs(trace.run(stage=stage).value - exact) / np.maximum(exact, 1e-30)
    print(f"{stage:>20}: error relative to the distance below 1e-6: {bool(err.max() < 1e-6)}")
print("no negative distances:", bool((trace.run().value >= 0).all()))

# %% [markdown]
# ## The saving grows with K
#
# The naive peak grows with the number of features K, the quadratic form's barely does.

# %%
print(f"{'K':>5} {'naive peak':>12} {'rewritten peak':>15}")
for k in (4, 16, 64, 256):
    t = gx.explore(distances, rand(N, k), rand(M, k))
    print(f"{k:>5} {format_bytes(t.stages[0].cost.peak_bytes):>12}"
          f" {format_bytes(t.stage('euclidean-distance').cost.peak_bytes):>15}")

# %% [markdown]
# ## Writing the quadratic form by hand
#
# If you write the quadratic form yourself, the pass has nothing to do, and the program
# costs about what the rewritten naive one costs: the FLOPs agree within 10% (the rewrite
# also converts to float64 and back), and the planned peaks are a few N×M float32 tensors
# either way (the rewrite's are float64 ones, and its clamp at zero keeps one more alive
# until `fuse` merges the element-wise tail into one kernel). The hand-written float32 form
# is the less accurate of the two where points are close.

# %%
def distances_quadratic(a, b):
    return jnp.sum(a**2, axis=-1)[:, None] + jnp.sum(b**2, axis=-1)[None, :] - 2 * a @ b.T


tq = gx.explore(distances_quadratic, A, B)
print("euclidean-distance fired on the hand-written form:",
      tq.stage("euclidean-distance").report.changed)
NM = N * M * 4  # bytes of one N×M float32 tensor
print(f"{'':>13} {'FLOPs':>10} {'peak before fuse':>17} {'peak after fuse':>16}")
for label, t in (("hand-written", tq), ("rewritten", trace)):
    print(f"{label:>13} {t.final.cost.flops:>10,} {t.stage('dce').cost.peak_bytes / NM:>13.1f} N×M"
          f" {t.final.cost.peak_bytes / NM:>12.1f} N×M")

# ## Step through it

# %%
trace.widget()
