"""Every figure on show comes from one computation: the cost tab's chart and its planned peak,
loops' traffic and FLOPs, a rewrite's line and its text."""

from __future__ import annotations

import linecache

import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.analysis.cost import graph_bytes, graph_cost
from explorer.view.payload import cost_view, rewrite_rows

R = np.random.default_rng(0)


def kernel_sum(x, y, b):
    d = jnp.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
    k = jnp.exp(-d)
    return k @ b


def chain(a, b, c):
    ab = a @ b
    abc = ab @ c
    return abc.sum()


def _split_trace() -> gx.Trace:
    x, y, b = R.standard_normal((400, 3)), R.standard_normal((300, 3)), R.standard_normal((300, 2))
    return gx.explore(kernel_sum, x, y, b, memory_limit="64KiB")


def test_the_chart_is_the_plan_whose_maximum_is_the_planned_peak() -> None:
    tr = _split_trace()
    for i, stage in enumerate(tr.stages):
        view = cost_view(tr, i)
        assert max(view["timeline"]) == view["peak_bytes"] == stage.cost.peak_bytes, stage.name


def test_loops_count_their_traffic_iterations_times_body() -> None:
    tr = _split_trace()
    split = next(s for s in tr.stages if any(n.op == "loop" for n in s.graph.nodes))
    before = tr.stages[tr.stages.index(split) - 1]
    (loop,) = [n for n in split.graph.nodes if n.op == "loop"]
    a = loop.attrs
    per_chunk = a["size"] // a["chunk"] * graph_bytes(a["body"])
    tail = graph_bytes(a["tail"]) if a.get("tail") is not None else 0
    assert graph_bytes(split.graph) >= per_chunk + tail > 0
    # the split program moves what the unsplit one moves, give or take the chunks' seams
    assert graph_cost(split.graph).bytes >= 0.5 * before.cost.bytes
    assert graph_cost(split.graph).flops >= 0.9 * before.cost.flops


def test_a_rewrite_row_shows_the_text_of_the_line_it_names() -> None:
    a, b, c = (R.standard_normal(s).astype(np.float32) for s in ((40, 30), (30, 20), (20, 2)))
    tr = gx.explore(chain, a, b, c)
    rows = [row for i in range(1, len(tr.stages))
            for row in rewrite_rows(tr.stages[i - 1].graph, tr.stages[i].graph,
                                    tr.stages[i].report.rewrites, None, _NoKeys())]
    named = [row for row in rows if row["source"]]
    assert named, "the chain program must fire rules with a source line"
    for row in named:
        file, line = row["source"].rsplit(":", 1)
        assert row["line_text"] == linecache.getline(file, int(line)).strip(), row


class _NoKeys:
    def elements(self, ids: object, region: str = "") -> list[str]:
        return []
