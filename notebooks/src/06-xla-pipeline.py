# %% [markdown]
# # 06 · XLA's own pipeline, pass by pass
#
# The usual way to see what XLA does to a program (seed 003) is to set process-wide flags,
# run, and read a folder of text files:
#
# ```bash
# XLA_FLAGS="--xla_dump_to=./xla-dump --xla_dump_hlo_as_text --xla_dump_hlo_pass_re=.*" python prog.py
# ls xla-dump/   # module_0000.jit_f.0006.simplification.after_tree_reduction_rewriter...txt, ...
# ```
#
# Every compilation in the process is dumped, after every pass, and you diff the files by
# hand. `gx.xla_pipeline(fn, *args)` asks for the same dumps for **one** compilation
# (`compiler_options` of that `jax.jit(fn).lower(...).compile(...)` call, no global
# flags), reads them back into the explorer's IR, and keeps a stage for each pass that
# changed the module. The result is a `Trace`, so everything that works on our pipeline
# (summary, IR text, costs, the widget) works on XLA's.

# %%
import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx

rng = np.random.default_rng(0)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


print("XLA backend:", jax.default_backend())


def table(trace):
    """Stage, nodes, FLOPs and planned peak: trace.summary() with room for XLA's long names."""
    print(f"{'stage':<58} {'nodes':>5} {'FLOPs':>11} {'peak bytes':>11}")
    for s in trace.stages:
        print(f"{s.name:<58} {len(s.graph):>5} {s.cost.flops:>11,} {s.cost.peak_bytes:>11,}")

# %% [markdown]
# ## Seed 004's `reduce_sum(x + y * z)` through XLA's CPU pipeline

# %%
def sum_xyz(x, y, z):
    return jnp.sum(x + y * z)


n = 1000
x, y, z = rand(n), rand(n), rand(n)
xla = gx.xla_pipeline(sum_xyz, x, y, z)
table(xla)

# %% [markdown]
# Each stage is named `<XLA pipeline>.<pass>`; its report notes which XLA pass produced it.
# Between `traced` (the module before optimisation) and `after-optimizations` (the module
# XLA runs), only the passes that changed something are kept:

# %%
for stage in xla.stages:
    print(f"{stage.name:<58} {stage.report.notes[0]}")

# %% [markdown]
# ## Where XLA fuses
#
# Before the `fusion` pass the multiply and the add are separate instructions; after it they
# are one `kernel` (XLA's `kLoop` fusion) whose body is drawn from the same op table as ours:

# %%
names = [s.name for s in xla.stages]
fusion = next(k for k, name in enumerate(names) if name.endswith(".fusion"))
print(xla.stages[fusion - 1].graph)
print(xla.stages[fusion].graph)

# %% [markdown]
# Notice the earlier `tree-reduction-rewriter`: XLA's CPU compiler splits a long sum into
# partial sums over windows of 32 (a `reduce-window`, which our op table does not have: it
# comes in as an `opaque` node that keeps XLA's text), then sums the partials. It is done
# for accuracy, and it is why XLA ends with three fusions where our `fuse` makes one kernel:

# %%
def kernels(graph):
    return sum(node.op == "kernel" for node in graph.nodes)


ours = gx.explore(sum_xyz, x, y, z)
print("XLA's final module:", kernels(xla.final.graph), "fusions;",
      "ours:", kernels(ours.final.graph), "kernel")
opaque = sorted({m.attrs["opcode"] for node in xla.final.graph.nodes if node.op == "kernel"
                 for m in node.attrs["body"].nodes if m.op == "opaque"})
print("XLA ops imported as opaque:", opaque)

# %% [markdown]
# ## Ours against XLA's
#
# `gx.compare_with_xla` puts our final stage next to XLA's final module: node and kernel
# counts, FLOPs by our cost model and by XLA's own `cost_analysis()`, planned temporaries
# and XLA's `memory_analysis()`, and op counts.

# %%
print(gx.compare_with_xla(sum_xyz, x, y, z))

# %% [markdown]
# ## What XLA does not do: re-associate a matrix chain
#
# Notebook 01's `(A @ B) @ v`. Not one of XLA's passes changes the FLOPs: the order of the
# products stays as written, where our `dot-order` makes it 134 times cheaper.

# %%
def chain(a, b, v):
    return a @ b @ v


A, B, v = rand(400, 300), rand(300, 200), rand(200)
xla_chain = gx.xla_pipeline(chain, A, B, v)
flops = {s.cost.flops for s in xla_chain.stages}
print("XLA stages:", len(xla_chain.stages), " distinct FLOP counts:", sorted(flops))
print("no XLA pass changed the FLOPs:", len(flops) == 1)
print("ours after dot-order:", gx.explore(chain, A, B, v).final.cost.flops)

# %% [markdown]
# ## And what it does well: the naive Euclidean distance
#
# Notebook 02's broadcast form. XLA does not rewrite it into the quadratic form, but it
# computes the difference, the square and the sum in one fused loop (in this version of
# XLA's CPU pipeline, the stage that builds it is `dot-library-rewriter`), so the N×M×K
# temporary never exists: XLA's own memory analysis reports no temporaries at all. Our
# pipeline gets there by a different road: the quadratic form, with a matrix product, in
# fewer FLOPs.

# %%
def distances(a, b):
    return jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1)


P, Q = rand(300, 16), rand(200, 16)
xla_dist = gx.xla_pipeline(distances, P, Q)
table(xla_dist)
versus = gx.compare_with_xla(distances, P, Q)
print(versus)
print("XLA keeps no N*M*K temporary:", versus.xla.reported_temp_bytes < 300 * 200 * 16 * 4)

# %% [markdown]
# ## On a GPU
#
# The same call with `backend="gpu"` steps through XLA's GPU pipeline, which has different
# passes and fuses more aggressively. It needs a CUDA build of jaxlib and a GPU; the cell
# says so and skips when they are not there (its output depends on the machine, so the
# notebook tests do not compare it).

# %% tags=nbval-ignore-output
try:
    gpu_trace = gx.xla_pipeline(sum_xyz, x, y, z, backend="gpu")
except ValueError as e:
    print("No GPU for XLA here, skipping:", str(e).splitlines()[0])
else:
    table(gpu_trace)

# %% [markdown]
# ## Step through XLA's passes
#
# The widget works on XLA's trace as on ours: step from pass to pass, with the graph and the
# IR diff of each.

# %%
xla.widget()
