"""The pass registry and the pipeline: names, specs, errors, the verifier after every pass,
user rule sets stepping like built-in passes, and the seeds through explore()."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import explorer as gx
from explorer import examples as ex
from explorer.ir import Graph, GraphBuilder, TensorType, VerifyError
from explorer.ir.rewrite import Rule, pat, var
from explorer.passes import DEFAULT_PIPELINE
from explorer.passes.base import PassReport, RewritePass
from explorer.passes.pipeline import PipelineError, resolve, run_pipeline


@pytest.mark.parametrize("name", gx.passes.names())
def test_registry_keys_equal_pass_names(name: str) -> None:
    p = gx.passes.get(name)
    assert p.name == name
    assert name == name.lower() and "_" not in name and " " not in name
    if dataclasses.is_dataclass(p):
        assert type(p).__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_default_pipeline_lists_registered_passes_in_order() -> None:
    want = ("simplify", "cse", "recognize-dot", "euclidean-distance", "dot-order", "simplify",
            "dce", "fuse")
    assert DEFAULT_PIPELINE == tuple(p for p in want if p in gx.passes.names())
    assert {"simplify", "cse", "dce"} <= set(DEFAULT_PIPELINE)


def test_spec_strings_and_lists() -> None:
    assert [p.name for p in resolve("simplify, cse,dce")] == ["simplify", "cse", "dce"]
    assert [p.name for p in resolve(["dce", gx.passes.get("cse")])] == ["dce", "cse"]
    assert resolve("") == [] and resolve([]) == []


@pytest.mark.parametrize("spec,message", [
    ("simplfy", "did you mean 'simplify'"),
    ("simplify,,dce", "empty pass name"),
    ([42], "neither a pass name nor a pass"),
])
def test_bad_pipelines_say_what_is_wrong(spec, message: str) -> None:
    with pytest.raises(PipelineError, match=message):
        resolve(spec)


@dataclasses.dataclass(frozen=True)
class _Breaks:
    """A broken pass: it points the output at a node that does not exist."""

    name: str = "breaks-things"

    def __call__(self, graph: Graph) -> tuple[Graph, PassReport]:
        return Graph(graph.nodes, graph.params, (999,), graph.name), PassReport(True)


def test_the_verifier_names_the_failing_pass() -> None:
    b = GraphBuilder()
    x = b.param(TensorType((2,), "f32"))
    g = b.build([b.add("neg", [x])])
    with pytest.raises(VerifyError, match="after pass 'breaks-things'"):
        run_pipeline(g, [gx.passes.get("simplify"), _Breaks()])  # check is on under pytest


def test_explore_records_a_stage_per_pass() -> None:
    fn, args = ex.make_mean_square()
    trace = gx.explore(fn, *args, pipeline="simplify,cse,dce")
    assert [s.name for s in trace.stages] == ["traced", "simplify", "cse", "dce"]
    simplify = trace.stage("simplify")
    (fired,) = [r for r in simplify.report.rewrites if r.rule == "pow-two"]
    assert fired.source is not None and fired.source.startswith(ex.__file__)
    line = int(fired.source.rsplit(":", 1)[1])
    assert "x**2" in open(ex.__file__).read().splitlines()[line - 1]
    assert "integer_pow" not in trace.final.graph.ops()
    np.testing.assert_allclose(trace.run().value, fn(*args), rtol=1e-5)


def test_a_user_rule_set_steps_like_a_builtin_pass() -> None:
    rules = [Rule("exp-log", pat("exp", pat("log", var("x"))), lambda ctx, x: x)]
    gx.passes.register(RewritePass("exp-of-log", rules))
    try:
        assert "exp-of-log" in gx.passes.names()
        x = np.linspace(0.5, 2, 6, dtype=np.float32)
        trace = gx.explore(lambda v: np.float32(2) * gx_exp_log(v), x,
                           pipeline="exp-of-log,dce")
        stage = trace.stage("exp-of-log")
        assert [r.rule for r in stage.report.rewrites] == ["exp-log"]
        assert stage.report.rewrites[0].source.endswith(":" + str(_EXP_LOG_LINE))
        assert "exp" not in trace.final.graph.ops()
    finally:
        gx.passes._REGISTRY.pop("exp-of-log", None)


def gx_exp_log(v):
    import jax.numpy as jnp

    return jnp.exp(jnp.log(v))  # the line the rewrite must point at


_EXP_LOG_LINE = gx_exp_log.__code__.co_firstlineno + 3


def test_register_rejects_bad_names() -> None:
    with pytest.raises(ValueError, match="kebab-case"):
        gx.passes.register(RewritePass("Not_Kebab", []))


@pytest.mark.parametrize("make", [ex.make_matrix_chain, ex.make_sum_xyz, ex.make_mean_square])
def test_seeds_through_the_default_pipeline(make) -> None:
    fn, args = make()
    trace = gx.explore(fn, *args)
    assert [s.name for s in trace.stages] == ["traced", *DEFAULT_PIPELINE]
    assert trace.final.cost.flops <= trace.stages[0].cost.flops
    for s in trace.stages[1:]:
        for r in s.report.rewrites:
            assert r.rule and (r.source is None or r.source.startswith(ex.__file__))
    np.testing.assert_allclose(trace.run().value, fn(*args), rtol=1e-4, atol=1e-5)
