"""Trace.replanned: the same traced program under another limit or pipeline, without tracing
again, each stage run once per (pass, input graph), and refused whole where explore() would
refuse."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.passes.pipeline import PipelineError
from explorer.passes.split import InfeasibleMemoryLimit

R = np.random.default_rng(1)


def pairwise(x, y, b):
    d = jnp.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
    return jnp.exp(-d) @ b


ARGS = (R.standard_normal((300, 3)), R.standard_normal((200, 3)), R.standard_normal((200, 2)))


@pytest.fixture(scope="module")
def trace() -> gx.Trace:
    return gx.explore(pairwise, *ARGS)


def names(trace: gx.Trace) -> list[str]:
    return [s.name for s in trace.stages]


def test_a_new_limit_plans_as_explore_does_and_reuses_the_stages_before_the_split(trace):
    again = trace.replanned(memory_limit="48KiB")
    fresh = gx.explore(pairwise, *ARGS, memory_limit="48KiB")
    assert names(again) == names(fresh)
    assert [str(s.graph) for s in again.stages] == [str(s.graph) for s in fresh.stages]
    assert again.traced is trace.traced and again.memory_limit == 48 * 1024
    k = names(again).index("split")
    assert all(a is b for a, b in zip(again.stages[:k], trace.stages[:k]))
    assert any(n.op == "loop" for n in again.final.graph.nodes)
    assert again.final.cost.peak_bytes <= 48 * 1024
    np.testing.assert_allclose(again.run().value, trace.run().value, rtol=1e-9)
    # back to no limit: the first trace's stages, every one
    back = again.replanned(memory_limit=None)
    assert back.memory_limit is None and names(back) == names(trace)
    assert all(a is b for a, b in zip(back.stages[:k], trace.stages[:k]))
    assert trace.memory_limit is None and "split" not in names(trace)


def test_a_limit_that_splits_nothing_reuses_what_follows_the_split(trace):
    again = trace.replanned(memory_limit="1GiB")
    k = names(again).index("split")
    assert again.stages[k].graph is again.stages[k - 1].graph  # nothing to split
    assert again.stages[k + 1:] == trace.stages[k:]  # so the passes after it ran before


def test_the_stages_of_other_plans_are_reused(trace):
    short = trace.replanned(pipeline="simplify,dce")
    assert names(short) == ["traced", "simplify", "dce"]
    assert short.stages[1] is trace.stages[1]
    assert [p.name for p in short.pipeline] == ["simplify", "dce"]
    assert [p.name for p in short.replanned(memory_limit="64KiB").pipeline] == ["simplify", "dce"]
    back = short.replanned(pipeline=trace.pipeline, reuse=[trace.stages])
    assert back.stages == trace.stages


def test_refusals_leave_the_trace_as_it_was(trace):
    stages = list(trace.stages)
    with pytest.raises(InfeasibleMemoryLimit, match="smallest feasible limit") as e:
        trace.replanned(memory_limit="2KiB")
    assert e.value.needed > 2048 and e.value.node.source is not None
    with pytest.raises(PipelineError, match=r"no pass named 'nope'.*registered: simplify"):
        trace.replanned(pipeline=["simplify", "nope"])
    assert trace.stages == stages and trace.memory_limit is None
