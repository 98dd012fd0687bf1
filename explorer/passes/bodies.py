"""Passes run inside the bodies of control-flow regions (`while`, `conditional`, `scan`,
`call`; ir/ops/regions.CONTROL_FLOW): a body is a graph like any other, so a pass runs on it
as it runs on the whole program, innermost bodies first, then on the graph that holds them.

A body's signature is fixed by its region (parameters in, results out, the carried state of
a loop), and every pass keeps a graph's parameters and the number and types of its outputs,
so whatever a pass does inside a body the region stays well typed. Firings inside a body are
logged with the body's own node ids and `Rewrite.region` naming the body ("%7.body"), and
so are remarks made there (`Remark.region`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

from ..ir.graph import Graph
from ..ir.ops.regions import CONTROL_FLOW, BodyKey, bodies, body_path, with_bodies
from ..ir.remarks import in_region
from ..ir.rewrite import Rewrite

Run = Callable[[Graph], "tuple[Graph, Sequence[Rewrite]]"]


def descend(graph: Graph, run: Run, enter: Collection[str] = CONTROL_FLOW,
            ) -> tuple[Graph, list[Rewrite]]:
    """`run` (Graph -> (Graph, firings)) on every body of the regions in `graph` whose op is
    in `enter`, recursively, then on `graph` itself; the graph is the same object when nothing
    changed."""
    nodes = list(graph.nodes)
    log: list[Rewrite] = []
    for k, n in enumerate(graph.nodes):
        if n.op not in enter:
            continue
        new: dict[BodyKey, Graph] = {}
        for key, body in bodies(n):
            where = body_path(n, key)
            with in_region(where):
                out, inner = descend(body, run, enter)
            log += [replace(r, region=f"{where}/{r.region}" if r.region else where) for r in inner]
            if out is not body:
                new[key] = out
        if new:
            nodes[k] = with_bodies(n, new)
    if log or any(a is not b for a, b in zip(nodes, graph.nodes)):
        graph = Graph(nodes, graph.params, graph.outputs, graph.name)
    out, top = run(graph)
    return out, log + list(top)
