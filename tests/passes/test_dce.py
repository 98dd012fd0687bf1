"""dce: semantics on every test graph; only unreachable nodes go."""

from __future__ import annotations

import pytest

from explorer.frontend.jaxpr import trace
from explorer.ir import GraphBuilder, TensorType
from explorer.passes.dce import DCE
from tests.corpora.graphs import ALL
from tests.passes.semantic import check_semantics


@pytest.mark.parametrize("name", sorted(ALL))
def test_semantics_on_test_graphs(name: str) -> None:
    fn, args = ALL[name]
    check_semantics(DCE(), trace(fn, *args).graph, like=args)


def test_keeps_parameters_and_outputs_drops_the_rest() -> None:
    b = GraphBuilder()
    x = b.param(TensorType((2,), "f32"))
    unused = b.param(TensorType((2,), "f32"))
    dead = b.add("exp", [x])
    b.add("log", [dead])
    y = b.add("neg", [x])
    out, report = DCE()(b.build([y, x]))
    assert [n.id for n in out.nodes] == [x, unused, y]
    assert out.params == (x, unused)
    assert sorted(r.before[0] for r in report.rewrites) == [dead, dead + 1]
    assert DCE()(out)[0] is out
