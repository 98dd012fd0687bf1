# %% [markdown]
# # 03 · Memory-safe programs: `memory_limit` and the split loops
#
# Notebook 02 removed the N×M×K temporary of a distance computation. The N×M matrix that
# remains can still be too big: a Gaussian kernel matrix over 10⁵ points is 40 GB in float32.
# The gambit project (seed 000) taught XLA to *split* such programs: cut the large tensors
# into slices along one axis and run the program slice by slice, so that only one slice of
# each large temporary is alive at a time. It costs a loop; it buys a program that runs
# under a fixed memory budget.
#
# In the explorer this is the `split` pass. It joins the pipeline when you pass a
# `memory_limit` (bytes, or a string such as `"256MiB"`). The limit bounds the peak of live
# *temporaries*: everything the program allocates except its inputs and its outputs. The
# planner's estimate and the peak measured while running must both respect it.

# %%
import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.units import format_bytes, parse_bytes

rng = np.random.default_rng(0)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)

# %% [markdown]
# ## A kernel-vector product
#
# The Gaussian kernel matrix K[i, j] = exp(-|x_i - y_j|² / 2) times a vector: the core of
# kernel methods and Gaussian processes, written the naive way (the seed's benchmark).

# %%
def kernel_vector(x, y, v):
    return jnp.exp(-0.5 * jnp.sum((x[:, None] - y[None]) ** 2, -1)) @ v


N, D = 6_000, 3
x, y, v = rand(N, D), rand(N, D), rand(N)

trace = gx.explore(kernel_vector, x, y, v, memory_limit="16MiB")
print(trace.summary())

# %% [markdown]
# Read the `peak` column from the top. The traced program plans 824 MiB of temporaries:
# the N×N×D difference and its square. `euclidean-distance` (notebook 02) brings that down
# to a few N×N matrices, still far over 16 MiB. Then `split` turns the program into a loop
# whose planned peak fits. Its report says how it cut the work:

# %%
split = trace.stage("split")
for rw in split.report.rewrites:
    print(f"{rw.rule} at {rw.source}")
for note in split.report.notes:
    print(note)

# %% [markdown]
# The loop is a node of the graph, `loop`, with the per-slice program as its `body` (and a
# `tail` for the last, shorter slice). `split_inputs` says which inputs are sliced along
# which axis; `combine` how the slices' results are put together (here each slice's
# contribution to `K @ v` is added up). The body works on N×chunk slices of the kernel
# matrix:

# %%
loop = next(n for n in split.graph.nodes if n.op == "loop")
print({k: loop.attrs[k] for k in ("size", "chunk", "split_inputs", "combine")})
print(loop.attrs["body"])

# %% [markdown]
# ## Planned against measured
#
# Running the final stage on the reference interpreter measures the real peak of
# temporaries (with `tracemalloc`, allocation by allocation). For three limits: the chunk
# the pass chose, the planned peak of the split program, the measured peak, and whether
# both are within the limit. The values must not depend on the limit.

# %%
def kernel_vector_numpy(x, y, v, rows=500):
    """The same product in float64 NumPy, by hand in slices of rows (the manual way)."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    out = np.empty(len(x))
    for s in range(0, len(x), rows):
        d = ((x[s:s + rows, None] - y[None]) ** 2).sum(-1)
        out[s:s + rows] = np.exp(-0.5 * d) @ v
    return out


expected = kernel_vector_numpy(x, y, v)
print(f"{'limit':>7} {'chunk':>6} {'loops':>6} {'planned':>10} {'measured':>10}"
      f" {'within':>7} {'values ok':>10}")
for limit in ("8MiB", "16MiB", "64MiB"):
    t = gx.explore(kernel_vector, x, y, v, memory_limit=limit)
    loop = next(n for n in t.stage("split").graph.nodes if n.op == "loop")
    planned = t.stage("split").cost.peak_bytes
    result = t.run()
    within = planned <= parse_bytes(limit) and result.peak_bytes <= parse_bytes(limit)
    ok = np.allclose(result.value, expected, rtol=1e-3, atol=1e-3 * np.abs(expected).max())
    iterations = -(-loop.attrs["size"] // loop.attrs["chunk"])
    print(f"{limit:>7} {loop.attrs['chunk']:>6} {iterations:>6} {format_bytes(planned):>10}"
          f" {format_bytes(result.peak_bytes):>10} {str(within):>7} {str(ok):>10}")

# %% [markdown]
# A larger budget buys larger slices and fewer iterations. A budget too small for any split
# is refused up front, with the smallest limit that would work and the line that needs it:

# %%
from explorer.passes.split import InfeasibleMemoryLimit

try:
    gx.explore(kernel_vector, x, y, v, memory_limit="100KiB")
except InfeasibleMemoryLimit as e:
    print(e)

# %% [markdown]
# ## k nearest neighbours in 128 dimensions
#
# For each of 1,000 queries, the 10 nearest of 20,000 points. Written the naive way, the
# program would need **19 GiB** of temporaries (two 1,000×20,000×128 tensors): it cannot run
# unsplit on most machines. After `euclidean-distance` it is a matrix product plus
# 1,000×20,000 distance matrices, a few hundred MiB; under `memory_limit="32MiB"` it runs in
# slices of points. The top-10 of each slice is merged with the running top-10 (the
# `combine` of this loop).

# %%
def knn(queries, points):
    distances = jnp.sum((queries[:, None] - points[None]) ** 2, -1)
    return jax.lax.top_k(-distances, 10)[1]


Q, P, F = 1_000, 20_000, 128
queries, points = rand(Q, F), rand(P, F)
knn_trace = gx.explore(knn, queries, points, memory_limit="32MiB")
for name in ("traced", "euclidean-distance", "split"):
    print(f"{name:>20}: planned peak {format_bytes(knn_trace.stage(name).cost.peak_bytes)}")
print("naive peak = two Q*P*F float32 tensors:",
      knn_trace.stages[0].cost.peak_bytes == 2 * Q * P * F * 4)
loop = next(n for n in knn_trace.stage("split").graph.nodes if n.op == "loop")
print("combine:", loop.attrs["combine"])

# %%
result = knn_trace.run()
print("measured peak:", format_bytes(result.peak_bytes), "within 32 MiB:",
      result.peak_bytes <= parse_bytes("32MiB"))

# NumPy in float64 on the first 50 queries: the same 10 neighbours (as sets; float32
# rounding could only swap near-ties)
q64, p64 = queries[:50].astype(np.float64), points.astype(np.float64)
d64 = (q64**2).sum(1)[:, None] + (p64**2).sum(1)[None, :] - 2 * q64 @ p64.T
exact = np.argsort(d64, axis=1)[:, :10]
agree = sum(set(a) == set(b) for a, b in zip(result.value[:50], exact))
print(f"queries whose 10 nearest neighbours agree with NumPy: {agree} of 50")

# %% [markdown]
# ## The chunks on a cluster: `backend="dask"`
#
# A split loop's chunks are independent until their results are combined, so they can run
# on many processes or machines. `backend="dask"` (`pip install gambit-explorer[distributed]`)
# hands them to [Dask](https://distributed.dask.org): the loop's inputs are scattered once
# to every worker; its chunks, in ranges of consecutive chunks, become tasks that run the
# CPU backend's generated kernels; their partial results are combined by a tree reduction
# with the same combiners every backend uses; the result is gathered. Everything outside the
# split loops runs here, in this process, on the CPU backend.
#
# Runs use the active `distributed.Client` (or `client=` a client or a scheduler address);
# without one, a run starts a `LocalCluster` on 127.0.0.1 and closes it afterwards. Here we
# start a small cluster of 2 worker processes ourselves, so that both runs below share it.

# %%
import logging

from distributed import Client

from explorer.backends.dask import local_cluster

cluster = local_cluster(2, silence_logs=logging.ERROR)  # 2 processes x 1 thread, loopback
client = Client(cluster)  # the active client from now on

on_dask = trace.run(backend="dask", progress=False)
on_cpu = trace.run(backend="cpu")
gap = np.max(np.abs(on_dask.value - on_cpu.value)) / np.max(np.abs(on_cpu.value))
print("same values as the CPU backend (float32 sums in another order):", gap < 1e-5)
print("ran on this cluster's workers:",
      set(on_dask.workers) <= set(client.scheduler_info()["workers"]))
print("largest measured peak, any task or this process, within 16 MiB:",
      on_dask.peak_bytes <= parse_bytes("16MiB"))
print("the run reports its dashboard:", on_dask.dashboard.endswith("/status"))

# %% [markdown]
# `peak_bytes` is now the largest peak measured in any task (tracemalloc in the worker, one
# thread per worker) or in this process. Each task holds one chunk's temporaries and its
# running results, so the limit is a bound per worker thread; a cluster whose workers' Dask
# `memory_limit` is below that is refused before anything runs. `progress=False` keeps this
# notebook's output stable: by default a run still going after 2 s shows Dask's progress bar.
# `%%gambit --backend dask --scheduler tcp://HOST:8786` and
# `gx.compile(f, memory_limit=..., backend="dask", client=...)` do the same from a cell or a
# compiled function. A worker that dies mid-run is replaced and its tasks rerun by Dask.

# %%
client.close()
cluster.close()

# %% [markdown]
# ## Step through the kernel-vector product
#
# In the widget, step to `split` to see the loop appear; its body is drawn inside it.

# %%
trace.widget()
