# %% [markdown]
# # 09 · Why not, which pass changed my numbers, and what if
#
# The other notebooks show what each pass did. This one answers the questions that come
# next, which compiler tools rarely answer inside the notebook:
#
# - **Why not?** A pass records what it did *not* do, and why: `stage.report.remarks`,
#   LLVM-style optimization remarks for our passes (and for yours).
# - **Which pass changed my numbers?** `trace.numerics()` runs every stage at the program's
#   precision and in float64 and says how far each stage's outputs, and each node, are from
#   the program as written computed in float64; `first_change()` names the stage, and for a
#   rule pass the one firing and your line, that moved them.
# - **What if?** The widget's controls re-plan the program under another memory limit or
#   another pipeline.

# %%
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.ir.rewrite import Rule, const, pat, var
from explorer.passes import DEFAULT_PIPELINE
from explorer.passes.base import RewritePass

rng = np.random.default_rng(0)

# %% [markdown]
# ## Why not?
#
# Notebook 07 wrote a rule that pulls a constant factor out of a sum: `sum(3 * x)` becomes
# `3 * sum(x)`. Here the rule also says why it declines when it does: `ctx.miss(reason)`
# records a *missed* remark on the matched node, with the rule's name and your line. Where the
# scaled tensor is read elsewhere too, it must be computed anyway, so nothing would be saved.

# %%
def scalar(node):
    return node.type.size == 1


def pull_scale(ctx, root, product, x, c):
    if ctx.users(product) != (root.id,):
        ctx.miss(f"the scaled tensor %{product.id} has {len(ctx.users(product))} readers: "
                 f"it is computed anyway, so pulling the factor out saves nothing")
        return None
    return ctx.emit("mul", [ctx.emit("reduce_sum", [x], root.attrs), c])


PULL_SCALE = Rule(
    "pull-scale-out-of-sum",
    pat("reduce_sum", pat("mul", var("x"), const(name="c", where=scalar), name="product",
                          commute=True), name="root"),
    pull_scale,
)


def scaled_sums(x, y):
    total = jnp.sum(3.0 * x)  # read once: the factor comes out
    z = 0.5 * y
    return total + jnp.sum(z) + z.max()  # z is read twice: declined


x = rng.standard_normal(1000).astype(np.float32)
y = rng.standard_normal((100, 10)).astype(np.float32)
trace = gx.explore(scaled_sums, x, y,
                   pipeline=[RewritePass("pull-scale", [PULL_SCALE]), *DEFAULT_PIPELINE])
report = trace.stage("pull-scale").report
for rw in report.rewrites:
    print("fired:   ", rw.rule, "at", rw.source)
for remark in report.remarks:
    print("remark:  ", remark)
print("one firing and one remark:", len(report.rewrites) == 1 and len(report.remarks) == 1)

# %% [markdown]
# Each remark names its pass, its kind (`missed`: an optimization that did not happen;
# `analysis`: a decision with the figures behind it), the rule or decision, the node ids, the
# reason in words and your line. `remark.to_json()` is the form the widget and a saved page
# keep. The built-in passes record theirs the same way; these are the ones they made here:

# %%
builtin = [(s.name, r) for s in trace.stages[1:] if s.name != "pull-scale"
           for r in s.report.remarks]
for name, r in builtin:
    print(f"{name:>20}: {r}")
print(len(builtin), "remarks from the built-in passes")

# %% [markdown]
# ## Which pass changed my numbers?
#
# Notebook 02's `euclidean-distance` pass rewrites the pairwise squared distance
# `sum((a[:, None] - b[None, :])**2, -1)` into the quadratic form `|a|² + |b|² - 2 a·b`. The
# form is not bit-exact: where two points are close next to their norms, the three terms
# nearly cancel and the rounding of each is left over. Near-tied points, 64 coordinates each,
# clustered within 1e-3 of one point:

# %%
def distances(a, b):
    return jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1)


def near_tied(k, n=40, m=30):
    centre = rng.standard_normal((1, k))
    return ((centre + 1e-3 * rng.standard_normal((n, k))).astype(np.float32),
            (centre + 1e-3 * rng.standard_normal((m, k))).astype(np.float32))


A, B = near_tied(64)
trace = gx.explore(distances, A, B)
numbers = trace.numerics()

# %% [markdown]
# `trace.numerics()` runs every stage on the reference interpreter twice on the same inputs
# (the traced arguments here; others like them, or `seed=` for random ones): as it is, in
# float32, and widened to float64. The reference is the *traced* stage in float64: your
# program as written, computed in float64, rounded to float32. For each stage the table gives
# the outputs' largest error relative to their magnitude, the largest error in units in the
# last place (ULPs: how many float32 values lie between the result and the correctly rounded
# one), how far the stage's own float64 run drifted from the reference (the pass changed the
# mathematics, not only the rounding), and how many nodes survive from the traced stage with
# their own errors (the widget colours nodes by them). The last digits depend on the CPU, so
# the checks below the table print comparisons.

# %% tags=nbval-ignore-output
print(numbers)

# %%
for s in numbers.stages:
    print(f"{s.index} {s.name:>20}: within 16 ULPs of float64: {s.max_ulps <= 16},"
          f" more than 10,000 ULPs off: {s.max_ulps > 1e4}")

# %% [markdown]
# The program as written is within a few roundings of float64; from `euclidean-distance` on,
# the distances are off by many thousands of ULPs. `first_change` names the first stage whose
# outputs moved past a tolerance: whose error against float64 exceeds the traced program's own
# by more than `rtol` (relative to the outputs' magnitude). For a rule pass it then bisects the
# pass's firings (`trace.after_firing`) to the one after which the outputs are past it, and
# gives its rule, its nodes and your line:

# %%
change = numbers.first_change(rtol=1e-6)
print("stage:  ", change.stage, change.name)
print("firing: ", change.firing + 1, "of", change.firings, "-", change.rule)
print("nodes:  ", change.before, "->", change.after[:3], "...")
print("line:   ", change.source, "|", change.line)
print("the distance rewrite moved the numbers:", change.name == "euclidean-distance")

# %% [markdown]
# ## The exact wide form
#
# The pass knows this: with few features it computes the quadratic form in the next wider type
# (float32 points: float64), and rounds to float32 once at the end. The cancellation then
# falls far below float32's own rounding, and the result is the correctly rounded distance
# almost everywhere (the pass's module doc gives the bound). Up to 32 features (its option
# `wide-max-features`) it does so by default, where the product's cost is writing its N×M result anyway;
# beyond, the form stays in the points' type. The same near-tied points in 16 dimensions get
# the wide form, and no stage moves the numbers:

# %%
print("wide up to", gx.passes.get("euclidean-distance").wide_max_features, "features")
A16, B16 = near_tied(16)
wide = gx.explore(distances, A16, B16)
print("float64 nodes in the rewrite:",
      any(n.type.dtype == "f64" for n in wide.stage("euclidean-distance").graph.nodes))
wide_numbers = wide.numerics()
print("euclidean-distance within 16 ULPs of float64:",
      wide_numbers["euclidean-distance"].max_ulps <= 16)
print("no stage moved the numbers:", wide_numbers.first_change(rtol=1e-6) is None)

# %% [markdown]
# The 64-feature points of the first trace get the same fix when the pass's option is raised
# to 64 in the pipeline (`euclidean-distance{wide-max-features=64}`), at twice the
# arithmetic's cost in the matrix product:

# %%
pipeline = [("euclidean-distance{wide-max-features=64}" if p == "euclidean-distance" else p)
            for p in DEFAULT_PIPELINE]
fixed = gx.explore(distances, A, B, pipeline=pipeline).numerics()
print("64 features, wide form: within 16 ULPs of float64:",
      fixed["euclidean-distance"].max_ulps <= 16)
print("no stage moved the numbers:", fixed.first_change(rtol=1e-6) is None)

# %% [markdown]
# ## What if
#
# The widget can also answer "what if the limit were 64 KiB?" and "what if `cse` did not
# run?" without tracing the program again. Above the graphs, the **what if** panel has a
# memory-limit slider (from the smallest limit the split can meet to the one from which
# nothing needs splitting) with a text box, and a pipeline editor: tick passes on and off,
# move them earlier or later, or add any registered pass, your own included. Each change
# plans the traced program again in Python and redraws; a change that cannot be planned is
# refused, and the plan on show stays.
#
# Both controls are traits, so a notebook (or marimo) cell can set them and read the
# outcome: `w.memory_limit` ("" for none, "64KiB" or a number of bytes), `w.pipeline` (pass
# names, or specs such as `"split{memory-limit=64KiB}"`) and the read-only `w.whatif`. A
# saved page shows the plan but needs a kernel to change it.

# %%
from explorer.units import format_bytes


def kernel_sum(x, y, b):
    d = jnp.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
    return jnp.exp(-d) @ b


rng = np.random.default_rng(0)
x, y, b = (rng.standard_normal(s).astype(np.float32) for s in ((400, 3), (300, 3), (300, 2)))
w = gx.explore(kernel_sum, x, y, b).widget()
w.index = len(w.stages) - 1  # show the final stage; a new plan keeps it in view
w

# %% [markdown]
# With no limit the final stage plans 2 MiB of temporaries: the 400×300×3 differences,
# the distances and their exponentials. Set a limit from the cell, and the `split` pass joins the pipeline
# and cuts the program into a loop; `w.whatif` gives the planned peak and the iterations of
# each split loop (by node id):


# %%
def show(w):
    s = w.whatif
    if s["error"]:
        print("refused:", s["error"])
        return
    limit = "none" if s["limit"] is None else format_bytes(s["limit"])
    loops = ", ".join(f"%{k}: {n} iterations" for k, n in s["chunks"].items()) or "no loop"
    print(f"limit {limit}: planned peak {format_bytes(s['planned_peak'])}; {loops}")
    print("stages:", " → ".join(st["name"] for st in w.stages))


show(w)
w.memory_limit = "256KiB"
show(w)
w.memory_limit = "64KiB"
show(w)

# %% [markdown]
# A smaller limit means smaller chunks and more iterations. How small can it go? Opening
# the panel finds the range the slider spans; from a cell, `w.find_limits()`: the smallest
# limit the split can meet, the node that needs it (with your line), and the limit from
# which nothing needs splitting.

# %%
s = w.find_limits()
print("smallest feasible limit:", format_bytes(s["smallest_limit"]))
print("needed by:", s["needed_by"])
print("nothing to split from:", format_bytes(s["unsplit_limit"]))

# %% [markdown]
# A limit below the smallest is refused with that limit and the node, and nothing changes:
# the trait goes back to the plan on show.

# %%
w.memory_limit = "4KiB"
show(w)
print("memory_limit is still", repr(w.memory_limit))

# %% [markdown]
# The run tab's runs feed the panel too: after a run of the final stage, `w.whatif` has its
# measured peak of temporaries and its time, next to the plan.

# %%
w.run(["reference"], stage=len(w.stages) - 1, baselines=False)
s = w.whatif
print("measured:", s["measured"], "| within the limit:", s["measured_peak"] <= s["limit"],
      "| timed:", s["seconds"] > 0)

# %% [markdown]
# The pipeline editor offers every registered pass (`gx.passes.names()`, so a pass you
# registered with `gx.passes.register` is there too). Setting `w.pipeline` recomputes the
# stages; a name that is not registered is refused with the names that are.

# %%
print("registered:", ", ".join(w.pass_names))
w.pipeline = ["simplify", "dot-order", "dce", "fuse"]  # split joins after dot-order
show(w)
w.pipeline = ["simplify", "dot-order", "dce", "fusion"]
show(w)
