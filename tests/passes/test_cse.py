"""cse: semantics on every test graph; it merges what the model repeats."""

from __future__ import annotations

import pytest

from explorer.frontend.jaxpr import trace
from explorer.passes.cse import CSE
from explorer.passes.dce import DCE
from tests.corpora.graphs import ALL
from tests.passes.semantic import check_semantics


@pytest.mark.parametrize("name", sorted(ALL))
def test_semantics_on_test_graphs(name: str) -> None:
    fn, args = ALL[name]
    check_semantics(CSE(), trace(fn, *args).graph, like=args)


def test_merges_repeated_work_in_the_model() -> None:
    fn, args = ALL["mlp_attention"]
    g = trace(fn, *args).graph
    merged, report = CSE()(g)
    assert report.changed and len(report.rewrites) > 0
    smaller, _ = DCE()(merged)
    assert len(smaller) < len(g)
    again, second = CSE()(merged)
    assert again == merged and not second.changed
