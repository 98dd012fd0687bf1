"""Remarks across the passes (explorer/ir/remarks.py): a user's `RewritePass` makes them the way
the built-in passes do, they reach `stage.report.remarks` named for their pass, and making
them changes nothing a pass does (with remarks off, every stage is the same graph)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.examples import mlp_attention
from explorer.ir.graph import Node
from explorer.ir.remarks import KINDS, disabled, enabled, missed
from explorer.ir.rewrite import RewriteContext, Rule, pat, var
from explorer.passes.base import RewritePass
from tests.corpora.zoo import zoo


def _user_program(x):  # type: ignore[no-untyped-def]
    y = jnp.exp(jnp.log(x))  # fires: exp(log(x)) -> x
    return jnp.exp(jnp.sin(y))  # declines: exp(sin(.)) is no identity


def _exp_of(ctx: RewriteContext, root: Node, inner: Node, x: Node) -> int | None:
    if inner.op == "log":
        return x.id
    ctx.miss(f"exp of {inner.op} is no identity")  # through the rule's context
    missed("", "inner-op", f"%{inner.id} is {inner.op}, not log", [inner.id],
           source=str(inner.source) if inner.source else None)  # through the module
    return None


def test_a_user_pass_makes_remarks_through_ctx_miss_and_missed() -> None:
    rules = [Rule("exp-log", pat("exp", pat(("log", "sin"), var("x"), name="inner"),
                                 name="root"), _exp_of)]
    gx.passes.register(RewritePass("exp-of-log", rules))
    try:
        tr = gx.explore(_user_program, np.linspace(0.5, 2, 6, dtype=np.float32),
                        pipeline="exp-of-log,dce")
        stage = tr.stage("exp-of-log")
        assert [r.rule for r in stage.report.rewrites] == ["exp-log"]
        by_rule = {r.rule: r for r in stage.report.remarks}
        assert set(by_rule) == {"exp-log", "inner-op"}
        line = _user_program.__code__.co_firstlineno + 2
        for r in by_rule.values():
            assert r.pass_ == "exp-of-log" and r.kind == "missed"
            assert r.source is not None and r.source.endswith(f":{line}")
        graph = tr.stages[0].graph
        assert graph[by_rule["exp-log"].nodes[0]].op == "exp"
        assert graph[by_rule["inner-op"].nodes[0]].op == "sin"
        assert by_rule["exp-log"].reason == "exp of sin is no identity"
        # the exp(log(.)) the rule rewrote has no remark left on it
        assert all(graph[i].op != "log" for r in stage.report.remarks for i in r.nodes)
    finally:
        gx.passes._REGISTRY.pop("exp-of-log", None)


@pytest.mark.parametrize("name", ["gpt_grad", "rnn_grad", "gp_likelihood"])
def test_remarks_change_nothing_a_pass_does(name: str) -> None:
    fn, args = zoo()[name]
    on = gx.explore(fn, *args)
    with disabled():
        assert not enabled()
        off = gx.explore(fn, *args)
    assert [s.name for s in on.stages] == [s.name for s in off.stages]
    for a, b in zip(on.stages, off.stages, strict=True):
        assert a.graph == b.graph, a.name
        assert a.report.rewrites == b.report.rewrites, a.name
        assert b.report.remarks == ()
    said = [r for s in on.stages for r in s.report.remarks]
    assert said and all(r.kind in KINDS and r.pass_ and r.rule and r.reason for r in said)
    assert all(s.name == r.pass_ for s in on.stages for r in s.report.remarks)
    json.dumps([r.to_json() for r in said])


def test_no_remark_names_a_node_its_graph_lacks() -> None:
    """A remark's nodes are ids of the graph the pass read (or of the body it names)."""
    fn, args = mlp_attention(layers=2)
    tr = gx.explore(fn, *args)
    for before, after in zip(tr.stages, tr.stages[1:]):
        for r in after.report.remarks:
            if not r.region:
                assert all(i in before.graph.by_id for i in r.nodes), str(r)


def test_the_environment_switch_turns_them_off() -> None:
    code = ("import numpy as np, jax.numpy as jnp, explorer as gx\n"
            "from explorer.ir.remarks import enabled\n"
            "t = gx.explore(lambda x: (x * 0.0, x - x), np.ones(3, np.float32))\n"
            "print(enabled(), sum(len(s.report.remarks) for s in t.stages))\n")
    env = {**os.environ, "GAMBIT_REMARKS": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["False", "0"]
    env["GAMBIT_REMARKS"] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[0] == "True" and int(out[1]) >= 2
