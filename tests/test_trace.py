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


def test_a_new_limit_plans_as_explore_does_and_reuses_the_stages_before_the_split(trace):
    again = trace.replanned(memory_limit="48KiB")
    fresh = gx.explore(pairwise, *ARGS, memory_limit="48KiB")
    assert [s.name for s in again.stages] == [s.name for s in fresh.stages]
    assert all(str(a.graph) == str(b.graph) for a, b in zip(again.stages, fresh.stages))
    assert again.traced is trace.traced and again.memory_limit == 48 * 1024
    k = [s.name for s in again.stages].index("split")
    assert all(a is b for a, b in zip(again.stages[:k], trace.stages[:k]))
    assert again.final.cost.peak_bytes <= 48 * 1024
    np.testing.assert_allclose(again.run().value, trace.run().value, rtol=1e-9)
    # back to no limit: the first trace's stages, every one
    assert all(a is b for a, b in zip(again.replanned(memory_limit=None).stages, trace.stages))
    assert again.replanned(memory_limit=None).memory_limit is None
    assert trace.memory_limit is None and "split" not in [s.name for s in trace.stages]


def test_a_limit_that_splits_nothing_reuses_what_follows_the_split(trace):
    again = trace.replanned(memory_limit="1GiB")
    k = [s.name for s in again.stages].index("split")
    assert again.stages[k].graph is again.stages[k - 1].graph  # nothing to split
    assert again.stages[k + 1:] == trace.stages[k:]


def test_another_pipeline(trace):
    again = trace.replanned(pipeline="simplify,dce")
    assert [s.name for s in again.stages] == ["traced", "simplify", "dce"]
    assert again.stages[1] is trace.stages[1]
    assert [p.name for p in again.pipeline] == ["simplify", "dce"]
    assert [p.name for p in again.replanned(memory_limit="64KiB").pipeline] == ["simplify", "dce"]


def test_refusals_leave_the_trace_as_it_was(trace):
    stages = list(trace.stages)
    with pytest.raises(InfeasibleMemoryLimit, match="smallest feasible limit") as e:
        trace.replanned(memory_limit="2KiB")
    assert e.value.needed > 2048 and e.value.node.source is not None
    with pytest.raises(PipelineError, match=r"no pass named 'nope'.*registered: simplify"):
        trace.replanned(pipeline=["simplify", "nope"])
    assert trace.stages == stages and trace.memory_limit is None
