"""Stepping a pass rewrite by rewrite (Trace.after_firing, RulePass.after_firings): the graph
after the first k firings, in the order the pass's report logs them; after all of them it is
the stage itself; every intermediate graph verifies and computes what the stage before does."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.ir import verify
from explorer.passes.base import RulePass
from tests.corpora.graphs import assert_tree_close
from tests.corpora.zoo import zoo

NAMES = ["gpt_block", "rnn_grad", "gp_likelihood"]


def _run(g: gx.Graph, flat: list[np.ndarray]) -> list[np.ndarray]:
    return gx.backends.registry.run_graph(g, flat, "reference").outputs


@pytest.mark.parametrize("name", NAMES)
def test_each_firing_is_a_step_and_the_last_is_the_stage(name: str) -> None:
    fn, args = zoo()[name]
    tr = gx.explore(fn, *args)
    flat = tr.flat_args(args)
    stepped = 0
    for index, stage in enumerate(tr.stages[1:], start=1):
        if not isinstance(stage.pass_, RulePass) or not stage.report.rewrites:
            continue
        n = len(stage.report.rewrites)
        before = tr.stages[index - 1].graph
        # all n firings through the stepper (not the shortcut for k == n): the stage itself
        assert str(stage.pass_.after_firings(before, n)) == str(stage.graph), stage.name
        assert str(tr.after_firing(index, 0)) == str(before)
        want = _run(before, flat)
        for k in sorted({1, n // 2, n - 1} - {0, n}):
            g = tr.after_firing(index, k)
            verify(g)
            assert str(g) not in (str(before), str(stage.graph)) or n == 1, (stage.name, k)
            assert_tree_close(_run(g, flat), want, rtol=2e-4, atol=2e-4)
            stepped += 1
    assert stepped, f"{name}: no rule pass fired twice, so nothing was stepped"


def test_firings_inside_bodies_step_too() -> None:
    def fn(xs):
        def step(c, x):
            c = c * 1.0 + jax.numpy.tanh(x * 2.0 + 0.0)
            return c, c * 1.0
        return jax.lax.scan(step, xs[0] * 0.0, xs)

    tr = gx.explore(fn, np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    inner = [(i, k) for i, s in enumerate(tr.stages) for k, r in enumerate(s.report.rewrites)
             if r.region and isinstance(s.pass_, RulePass)]
    assert inner, "the scan body must see rule firings"
    i, k = inner[0]
    g = tr.after_firing(i, k + 1)
    assert str(g) != str(tr.after_firing(i, k))  # that firing changed the body
    flat = tr.flat_args(tr.example_args)
    assert_tree_close(_run(g, flat), _run(tr.stages[i - 1].graph, flat))


def test_bad_steps_are_clear_errors() -> None:
    x = np.ones((3, 4), np.float32)
    tr = gx.explore(lambda x: jax.numpy.exp(x) * 1.0 + 0.0, x)
    simplify = next(i for i, s in enumerate(tr.stages) if s.name == "simplify")
    n = len(tr.stages[simplify].report.rewrites)
    with pytest.raises(IndexError, match=f"k must be 0..{n}"):
        tr.after_firing(simplify, n + 1)
    with pytest.raises(ValueError, match="traced program"):
        tr.after_firing(0, 0)
    fuse = next(i for i, s in enumerate(tr.stages) if s.name == "fuse")
    if tr.stages[fuse].report.rewrites:
        with pytest.raises(TypeError, match="not rule-driven"):
            tr.after_firing(fuse, 0)
