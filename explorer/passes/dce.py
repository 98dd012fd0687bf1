"""dce: drop the nodes no output depends on. Parameters always stay (they are the signature).
Inside control-flow bodies too (passes/bodies.py): a body's parameters and results, a loop's
carried state among them, are its region's signature and stay.

Other passes leave the nodes they replace in place, so that each stage shows what a rewrite
did; this pass is where they go away. Its report lists each removed node as a `dead-node`
rewrite (before=(id,), after=()), with the node's source line.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph
from ..ir.rewrite import Rewrite
from .base import PassReport
from .bodies import descend


def live_ids(graph: Graph) -> set[int]:
    """Ids of the nodes some output depends on, plus the parameters."""
    live = set(graph.outputs) | set(graph.params)
    for n in reversed(graph.nodes):
        if n.id in live:
            live.update(n.inputs)
    return live


@dataclass(frozen=True)
class DCE:
    name: str = "dce"

    def __call__(self, graph: Graph) -> tuple[Graph, PassReport]:
        out, log = descend(graph, _dce)
        return out, PassReport(changed=out is not graph, rewrites=tuple(log))


def _dce(graph: Graph) -> tuple[Graph, list[Rewrite]]:
    live = live_ids(graph)
    if len(live) == len(graph.nodes):
        return graph, []
    dead = [n for n in graph.nodes if n.id not in live]
    log = [Rewrite("dead-node", (n.id,), (), str(n.source) if n.source else None) for n in dead]
    kept = [n for n in graph.nodes if n.id in live]
    return Graph(kept, graph.params, graph.outputs, graph.name), log
