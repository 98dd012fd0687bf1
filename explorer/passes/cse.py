"""cse: common-subexpression elimination. Two nodes with the same op, inputs, attributes and
type compute the same value, so the later one is replaced by the earlier one.

Structural and exact: no commutativity (add(a, b) and add(b, a) stay two nodes, a rewrite
rule would have to canonicalise first), and parameters are never merged. Constants merge when
their literals are bit-identical (`Literal` compares bytes, so 0.0 and -0.0 stay apart).
Because the graph is in topological order, one forward sweep that maps each node's inputs to
their survivors first finds every duplicate, chains of them included. Replaced nodes stay in
the graph, dead (dce removes them), and each merge is logged as a `same-value` rewrite;
duplicates that nothing reads are left alone (merging them would change nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..ir.graph import Graph, Node
from ..ir.rewrite import Rewrite
from .base import PassReport
from .bodies import descend


def _key(n: Node) -> tuple[Any, ...]:
    return (n.op, n.inputs, n.attrs, n.type)


@dataclass(frozen=True)
class CSE:
    name: str = "cse"

    def __call__(self, graph: Graph) -> tuple[Graph, PassReport]:
        out, log = descend(graph, _cse)
        return out, PassReport(changed=out is not graph, rewrites=tuple(log))


def _cse(graph: Graph) -> tuple[Graph, list[Rewrite]]:
    read = {i for n in graph.nodes for i in n.inputs} | set(graph.outputs)
    survivor: dict[int, int] = {}  # replaced id -> the earlier equal node's id
    seen: dict[tuple[Any, ...], int] = {}
    nodes: list[Node] = []
    log: list[Rewrite] = []
    for n in graph.nodes:
        if any(i in survivor for i in n.inputs):
            n = replace(n, inputs=tuple(survivor.get(i, i) for i in n.inputs))
        if n.op != "parameter":
            first = seen.setdefault(_key(n), n.id)
            if first != n.id and n.id in read:  # an unread duplicate changes nothing
                survivor[n.id] = first  # the duplicate goes; its readers read `first`
                log.append(Rewrite("same-value", (n.id,), (first,),
                                   str(n.source) if n.source else None))
                continue
        nodes.append(n)
    if not log:
        return graph, []
    outputs = tuple(survivor.get(o, o) for o in graph.outputs)
    return Graph(nodes, graph.params, outputs, graph.name), log
