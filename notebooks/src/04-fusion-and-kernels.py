# %% [markdown]
# # 04 · Fusion and the generated kernels
#
# Run `jnp.sum(x + y * z)` op by op, as NumPy or JAX's eager mode do, and you get three
# kernels: one for the multiply, one for the add, one for the sum. Each writes its whole
# result to memory and the next reads it back. *Fusion* (XLA's most important optimisation,
# seeds 001 and 004) generates **one** kernel that reads `x`, `y` and `z` once and keeps
# `y * z` and `x + y * z` in registers. On hardware where memory bandwidth is the scarce
# resource, removing the round trips is most of the speed-up.
#
# The explorer's `fuse` pass (last in the default pipeline) groups element-wise ops, and
# the reduction that consumes them, into `kernel` regions. The `cpu` backend generates a
# loop nest for each region (compiled with numba); the `gpu` backend generates CUDA (run with
# CuPy) when a GPU is present. This notebook looks at the fused programs, the generated
# code, and the time and memory against NumPy, JAX eager and `jax.jit`.

# %%
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.units import format_bytes

rng = np.random.default_rng(0)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def measured(nbytes):
    """A measured peak for printing. Below 16 KiB it is NumPy's own bookkeeping, which
    varies a little from run to run (first runs compile kernels); above, it is the arrays."""
    if nbytes is None:
        return "n/a"
    return "under 16 KiB" if nbytes < 16 * 1024 else format_bytes(nbytes)


print("backends on this machine:", ", ".join(gx.backends.available()))

# %% [markdown]
# ## Seed 004: `reduce_sum(x + y * z)`

# %%
def sum_xyz(x, y, z):
    return jnp.sum(x + y * z)


n = 1_000_000
x, y, z = rand(n), rand(n), rand(n)
trace = gx.explore(sum_xyz, x, y, z)
print(trace.summary())
for rw in trace.final.report.rewrites:
    print(f"{trace.final.name}: {rw.rule} at {rw.source}, nodes {rw.before} -> {rw.after}")

# %% [markdown]
# Only `fuse` changed the program: the `mul`, the `add` and the `reduce_sum` are now the
# body of one `kernel` node (`kind="input"`: a reduction kernel, in XLA's vocabulary).

# %%
print(trace.final.graph)

# %% [markdown]
# The cost model counts the bytes each top-level node reads and writes. Op by op, the
# program moves 28 bytes per element: `mul` reads y and z and writes y·z (12), `add` reads
# x and y·z and writes the sum (12), `reduce_sum` reads it (4). The fused kernel reads x, y
# and z once: 12 bytes per element, and no temporary at all.

# %%
traced, fused = trace.stages[0].cost, trace.final.cost
print("bytes moved, op by op:", f"{traced.bytes:,}", traced.bytes == 28 * n + 4)
print("bytes moved, fused:   ", f"{fused.bytes:,}", fused.bytes == 12 * n + 4)
print("planned peak of temporaries:", format_bytes(traced.peak_bytes), "->",
      format_bytes(fused.peak_bytes))

# %% [markdown]
# ## The CPU kernel
#
# `trace.run(backend="cpu")` compiles each kernel region to a numba function (cached on
# disk, so the second run of a notebook does not compile again) and runs the rest of the
# graph with NumPy. The result lists the kernels with their generated source:

# %%
result = trace.run(backend="cpu")
for kernel in result.kernels:
    print(f"# ---- {kernel.name}")
    print(kernel.source)
exact = x.astype(np.float64).sum() + (y.astype(np.float64) * z).sum()
print("value matches NumPy (float64):", bool(np.isclose(result.value, exact, rtol=1e-5)))
print("measured peak of temporaries:", measured(result.peak_bytes))

# %% [markdown]
# One loop reads `in0`, `in1` and `in2` (y, z and x, in the order the kernel's inputs
# appear) and accumulates in float64, as the reference interpreter does. The sizes (`n0`)
# and any constants are arguments, listed in the first line: numba never frees compiled
# code, so one compiled function serves every kernel of this structure, whatever its shapes.
# The measured peak is a kilobyte or two of NumPy scalars and bookkeeping, where the
# op-by-op program allocates two n-element arrays.
#
# ## The GPU kernel
#
# The same region becomes a CUDA kernel on the `gpu` backend. It needs CuPy and a GPU; the
# cell says so and skips when they are not there. (Its output depends on the machine, so
# the notebook tests do not compare it.)

# %% tags=nbval-ignore-output
if "gpu" in gx.backends.available():
    gpu_result = trace.run(backend="gpu")
    for kernel in gpu_result.kernels:
        print(f"// ---- {kernel.name}")
        print(kernel.source)
    print("GPU value matches NumPy:", bool(np.isclose(gpu_result.value, exact, rtol=1e-4)))
else:
    print("No GPU backend here, skipping the GPU kernels:", gx.backends.unavailable_reason("gpu"))

# %% [markdown]
# ## Against NumPy, JAX eager and `jax.jit`
#
# `trace.compare()` times each row (median and minimum of 5 runs after a warm-up), measures
# its peak of temporaries as each runtime allows, and checks every value against the
# reference interpreter. The rows: NumPy op by op; JAX without `jit` (one dispatch per op);
# `jax.jit` (XLA, which fuses too); and our traced and fused stages on the `cpu` backend.
# Times vary from run to run and machine to machine (the tests mask them); the peaks and
# the checks do not.

# %%
backends = [b for b in ("cpu", "gpu") if b in gx.backends.available()]


def show(comparison):
    for r in comparison.rows:
        print(f"{r.label:<16} median {r.median * 1e3:8.3f} ms   min {r.minimum * 1e3:8.3f} ms"
              f"   peak {measured(r.peak_bytes):>12} ({r.peak_how})   values ok: {r.ok}")


comparison = trace.compare(backends=backends, progress=False)
show(comparison)

# %% [markdown]
# The plot of the same table (bars: median time; ticks: minimum; right: peak temporaries).

# %%
import io

from IPython.display import Image

png = io.BytesIO()
comparison.figure.savefig(png, format="png", bbox_inches="tight")
Image(png.getvalue())

# %% [markdown]
# ## Seed 001: `mean(x**2 * 3 + y)`
#
# The running example of the XLA talk in seed 001. `simplify` first rewrites `x ** 2` as
# `x * x`; `fuse` then folds the squares, the scaling, the addition, the sum and the
# division by the element count into one kernel.

# %%
def mean_square(x, y):
    return jnp.mean(x**2 * 3 + y)


a, b = rand(1000, 1000), rand(1000, 1000)
trace2 = gx.explore(mean_square, a, b)
print(trace2.summary())
result2 = trace2.run(backend="cpu")
print(result2.kernels[0].source)
exact2 = (3 * a.astype(np.float64) ** 2 + b).mean()
print("value matches NumPy (float64):", bool(np.isclose(result2.value, exact2, rtol=1e-5)))

# %% [markdown]
# XLA fuses the same work: `gx.compare_with_xla` reads XLA's optimised module back into
# our IR and counts its fusions next to our kernels. XLA's reduction fusion holds the
# squares, the scaling, the addition and the sum; the division by the element count is a
# second, scalar fusion, where ours keeps it in the same kernel.

# %%
print(gx.compare_with_xla(mean_square, a, b))

# %%
show(trace2.compare(backends=backends, progress=False, plot=False))

# %% [markdown]
# ## Step through it

# %%
trace2.widget()
