# %% [markdown]
# # 07 · Write your own pass
#
# Every pass in the explorer is a pure function `Graph -> (Graph, PassReport)` with a
# kebab-case name. Most are written as *rewrite rules*: a pattern to look for, and a
# function that builds the replacement. The rewrite engine applies the rules until none
# fires and logs every firing with the rule's name and the user's source line; that log is
# what the explorer shows. This notebook writes a rule, makes a pass of it, registers it,
# and steps through it like any built-in pass. Then it writes a pass as a plain class.
#
# ## The idea: pull a constant factor out of a sum
#
# `sum(3.0 * x)` multiplies every element of `x` by 3 and then adds them up: N
# multiplications and an N-element temporary. `3.0 * sum(x)` does one multiplication and
# needs no temporary. (It is not bit-identical: the rounding of the sum changes slightly.)

# %%
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.ir.rewrite import Rule, const, pat, var
from explorer.passes.base import PassReport, RewritePass

rng = np.random.default_rng(0)
x = rng.standard_normal(1000).astype(np.float32)
y = rng.standard_normal((100, 10)).astype(np.float32)


def scaled_sums(x, y):
    total = jnp.sum(3.0 * x)
    columns = jnp.sum(y * 0.5, axis=0)
    return total + columns.max()


traced = gx.explore(scaled_sums, x, y, pipeline=[])  # no passes: just the traced program
print(traced.final.graph)

# %% [markdown]
# The two scalings are `mul` nodes of a tensor by a scalar `constant`, each read only by a
# `reduce_sum`. Note the operand order differs: `3.0 * x` puts the constant first.
#
# ## The rule
#
# A pattern is built from `pat(op, *inputs)`, `var()` (any node) and `const()` (a constant);
# `name=` captures a node, and the replacement function receives the captures as keyword
# arguments. `commute=True` lets a binary pattern match its inputs in either order. The
# function builds new nodes with `ctx.emit(op, inputs, attrs)` (types are inferred from the
# op table) and returns the node that replaces the matched root, or `None` to decline.

# %%
def scalar(node):
    return node.type.size == 1


def pull_scale(ctx, root, product, x, c):
    if ctx.users(product) != (root.id,) or c.dtype != root.dtype:
        return None  # the product is needed elsewhere too: nothing would be saved
    summed = ctx.emit("reduce_sum", [x], root.attrs)
    return ctx.emit("mul", [summed, c])


PULL_SCALE = Rule(
    "pull-scale-out-of-sum",
    pat("reduce_sum", pat("mul", var("x"), const(name="c", where=scalar), name="product",
                          commute=True), name="root"),
    pull_scale,
)

# %% [markdown]
# ## A pass, registered
#
# `RewritePass(name, rules)` turns a rule list into a pass; `gx.passes.register` makes it
# available by name, in `gx.explore(..., pipeline=...)` and in `%%gambit --pipeline`.

# %%
gx.passes.register(RewritePass("pull-scale", [PULL_SCALE]))
print("registered:", "pull-scale" in gx.passes.names())

trace = gx.explore(scaled_sums, x, y, pipeline=["pull-scale", "dce"], check=True)
print(trace.summary())

# %% [markdown]
# `check=True` runs the IR verifier after every pass. The rule fired twice, once per sum.
# The engine leaves the nodes it replaced in the graph, dead (hence 14 nodes after
# `pull-scale`); `dce` removes them. Each firing names the line of `scaled_sums` it
# rewrote:

# %%
for rw in trace.stage("pull-scale").report.rewrites:
    print(f"{rw.rule} at {rw.source}: nodes {rw.before} -> {rw.after}")
print(trace.final.graph)

# %% [markdown]
# ## Check the claims
#
# The FLOPs drop by the multiplications that moved out of the sums, the planned peak by the
# two scaled temporaries, and the values agree up to float32 rounding.

# %%
before, after = trace.stages[0].cost, trace.final.cost
saved = before.flops - after.flops
print("FLOPs:", before.flops, "->", after.flops, "saved:", saved)
print("saved = 1000 + 1000 multiplications, less the 1 + 10 of the new ones:",
      saved == (x.size - 1) + (y.size - y.shape[1]))
print("planned peak:", before.peak_bytes, "->", after.peak_bytes, "bytes")
old, new = trace.run(stage=0).value, trace.run().value
print("same value up to rounding:", bool(np.isclose(old, new, rtol=1e-5, atol=1e-4)))
expected = 3.0 * x.astype(np.float64).sum() + (0.5 * y.astype(np.float64)).sum(0).max()
print("matches NumPy in double precision:", bool(np.isclose(new, expected, rtol=1e-5, atol=1e-4)))

# %% [markdown]
# ## The engine checks your replacement
#
# A replacement must have exactly the type of the node it replaces. A buggy rule, one that
# forgets to sum, is refused with a message that names the rule and the node:

# %%
from explorer.ir.rewrite import RewriteError


def forgot_to_sum(ctx, root, product, x, c):
    return ctx.emit("mul", [x, c])  # f32[1000], where the sum is f32[]


BROKEN = Rule("broken-pull-scale", PULL_SCALE.pattern, forgot_to_sum)
try:
    gx.explore(scaled_sums, x, y, pipeline=[RewritePass("broken", [BROKEN])])
except RewriteError as e:
    print("RewriteError:", e)

# %% [markdown]
# ## Your pass in the default pipeline
#
# A pass is just a name in a list, so it slots in anywhere. Here it runs after the standard
# clean-ups and before the final `dce` and `fuse`:

# %%
standard = list(gx.passes.DEFAULT_PIPELINE)
pipeline = [*standard[:-2], "pull-scale", *standard[-2:]]
print(pipeline)
full = gx.explore(scaled_sums, x, y, pipeline=pipeline)
print(full.summary())

# %% [markdown]
# ## A pass that is not a rewrite
#
# A pass can be any object with a `name` and a `__call__(graph) -> (graph, report)`. The
# convention (from xDSL) is a frozen dataclass whose fields are its options. This one
# changes nothing: it reports, in the stage's notes, every temporary larger than a
# threshold, with the line that created it. Returning the same graph object tells the
# explorer that nothing changed.

# %%
from dataclasses import dataclass

from explorer.units import format_bytes


@gx.passes.register
@dataclass(frozen=True)
class ReportBigTemporaries:
    name: str = "report-big-temporaries"
    threshold: int = 1024  # bytes

    def __call__(self, graph):
        notes = []
        outputs = set(graph.outputs)
        for node in graph.nodes:
            size = node.type.nbytes
            if node.op not in ("parameter", "constant") and node.id not in outputs \
                    and size > self.threshold:
                where = f"{node.source.file}:{node.source.line}" if node.source else "?"
                notes.append(f"%{node.id} {node.op} {node.type}: {format_bytes(size)} at {where}")
        return graph, PassReport(changed=False, notes=tuple(notes))


t = gx.explore(scaled_sums, x, y, pipeline=["report-big-temporaries", "pull-scale",
                                            "dce", "report-big-temporaries"])
for stage in t.stages[1:]:
    print(f"{stage.name}: changed={stage.report.changed}, notes={list(stage.report.notes)}")

# %% [markdown]
# ## Step through it
#
# The widget shows your pass like any other: the graph before and after, the IR diff, and
# the rewrites with their source lines.

# %%
trace.widget()
