# %% [markdown]
# # 05 · Recognising a matrix product written three ways
#
# Seed 002 writes the same matrix product C = A·B three ways and asks what XLA makes of each:
#
# 1. `gemm1`: the API call, `jnp.matmul(a, b)`;
# 2. `gemm2`: broadcast, multiply, reduce: tile `a` to N×K×M and `b` to N×K×M, multiply
#    element-wise, sum over K. Mathematically a matmul; computationally an N×K×M temporary;
# 3. `gemm3`: Python loops over scalars: the traced graph grows with N·K·M.
#
# The seed's finding: XLA turns only the first into a `dot`; for the second it fuses the
# broadcast, the multiply and the reduction into one loop, but never calls the matrix-multiply
# kernel. The explorer's `recognize-dot` pass reads through the broadcasts and tiles of
# `gemm2` and emits a `dot_general`. This notebook compares both compilers on all three.

# %%
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx

rng = np.random.default_rng(0)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def gemm1(a, b):
    return jnp.matmul(a, b)


def gemm2(a, b):
    a3 = jnp.tile(a[:, :, None], (1, 1, b.shape[1]))  # N x K x M
    b3 = jnp.tile(b[None, :, :], (a.shape[0], 1, 1))  # N x K x M
    return jnp.sum(a3 * b3, axis=1)


def gemm3(a, b):
    rows = []
    for i in range(a.shape[0]):
        row = []
        for j in range(b.shape[1]):
            acc = a[i, 0] * b[0, j]
            for k in range(1, a.shape[1]):
                acc = acc + a[i, k] * b[k, j]
            row.append(acc)
        rows.append(jnp.stack(row))
    return jnp.stack(rows)


n = 4
A, B = rand(n, n), rand(n, n)

# %% [markdown]
# ## Both compilers, side by side
#
# For each version: the nodes of the traced program and of our final stage, how many
# `dot_general`s each side ends with, and which rewrites fired. `gx.compare_with_xla`
# compiles the function with `jax.jit` and reads XLA's final module back into the same IR,
# so the ops can be counted the same way.

# %%
def dots(graph):
    return sum(node.op == "dot_general" for node in graph.nodes)


traces = {}
print(f"{'':>6} {'traced':>7} {'final':>6} {'our dots':>9} {'XLA dots':>9} {'XLA fusions':>12}")
for fn in (gemm1, gemm2, gemm3):
    t = traces[fn.__name__] = gx.explore(fn, A, B)
    xla = gx.compare_with_xla(fn, A, B).xla
    print(f"{fn.__name__:>6} {len(t.stages[0].graph):>7} {len(t.final.graph):>6}"
          f" {dots(t.final.graph):>9} {xla.ops.get('dot_general', 0):>9} {xla.kernels:>12}")

for name, t in traces.items():
    fired = Counter(f"{s.name}/{rw.rule}" for s in t.stages for rw in s.report.rewrites)
    print(f"{name}: {dict(fired)}")

# %% [markdown]
# * `gemm1` is a dot on both sides; nothing to do.
# * `gemm2` becomes a dot in our pipeline (`recognize-dot`) and stays a fused
#   broadcast-multiply-reduce in XLA: no dot.
# * `gemm3` is 16 separate dot products of length 4 spelled out in scalars; neither compiler
#   recovers the matmul. Our `cse` merges the scalar slices the loops take more than once
#   (192 of them), and `fuse` groups each output element's arithmetic into a kernel; XLA
#   fuses the lot into one loop.
#
# ## `gemm2` before and after `recognize-dot`
#
# The traced program materialises the two tiled N×K×M operands and their product; after the
# pass, all that is left is one `dot_general` with the user's source line.

# %%
t2 = traces["gemm2"]
print(t2.stage("cse").graph)
print(t2.stage("recognize-dot").graph)
for rw in t2.stage("recognize-dot").report.rewrites:
    print(f"{rw.rule} at {rw.source}: replaced nodes {rw.before} with {rw.after}")

# %% [markdown]
# ## Check the values
#
# All three programs, before and after our passes, compute A·B (the reference interpreter
# against NumPy's matmul in double precision).

# %%
exact = A.astype(np.float64) @ B
for name, t in traces.items():
    ok = [np.allclose(t.run(stage=k).value, exact, rtol=1e-5, atol=1e-5) for k in (0, -1)]
    print(f"{name}: traced {ok[0]}, final {ok[1]}")

# %% [markdown]
# ## Why it matters: the size of `gemm2`'s temporary, and the time
#
# Before the pass, `gemm2`'s program holds three N·K·M tensors at once: the two tiled
# operands and their product. For N = K = M = 256 that is 64 MiB each, for a 256 KiB result;
# after the pass there is no temporary at all.

# %%
from explorer.units import format_bytes

m = 256
A2, B2 = rand(m, m), rand(m, m)
big = gx.explore(gemm2, A2, B2)
print("planned peak, traced:       ", format_bytes(big.stages[0].cost.peak_bytes))
print("planned peak, recognize-dot:", format_bytes(big.stage("recognize-dot").cost.peak_bytes))
print("three N*K*M float32 tensors:", big.stages[0].cost.peak_bytes == 3 * m**3 * 4)

# %% [markdown]
# XLA does not materialise those tensors either: it fuses the tiles, the product and the
# sum into one loop over N·K·M elements. What it gives up is the matrix-multiply kernel,
# with its cache blocking; how much that costs depends on the machine (seed 002 measured it
# on accelerators). Here are the times on the machine that ran this notebook (they vary from
# run to run, so the tests mask them). The last line runs our final stage of `gemm2` through
# the `jax` backend, which hands our graph to XLA: the same runtime, after our rewrite.

# %%
import time


def best_ms(fn, repeats=7):
    fn()  # warm up (jax.jit compiles on the first call)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


jit1, jit2 = jax.jit(gemm1), jax.jit(gemm2)
print(f"jax.jit(gemm1), a dot:                    {best_ms(lambda: jit1(A2, B2)):.3f} ms")
print(f"jax.jit(gemm2), fused multiply-reduce:    {best_ms(lambda: jit2(A2, B2)):.3f} ms")
if "jax" in gx.backends.available():
    ours = 1e3 * min(big.run(backend="jax").seconds for _ in range(7))
    print(f"ours, gemm2 after our passes, on XLA:     {ours:.3f} ms")
else:
    print("the jax backend is not available here: no timing of our final stage on XLA")

# %% [markdown]
# ## `gemm3` grows with the matrix
#
# Python loops are unrolled by tracing: the traced graph has about 6 nodes per multiply-add,
# so it grows as N³. This is a limit of tracing, not of any pass: write the loop as a
# matmul (or as `gemm2`, which our pipeline does recognise).

# %%
print(f"{'N':>3} {'traced nodes':>13} {'final nodes':>12} {'our dots':>9}")
for k in (2, 3, 4, 6):
    t = gx.explore(gemm3, rand(k, k), rand(k, k))
    print(f"{k:>3} {len(t.stages[0].graph):>13} {len(t.final.graph):>12} {dots(t.final.graph):>9}")

# %% [markdown]
# ## Step through `gemm2`

# %%
t2.widget()
