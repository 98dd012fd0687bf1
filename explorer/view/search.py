"""Search by op or name: the words a node is found by, and the matching rule.

The widget's search box runs the same rule in the browser (extension/src/search.ts) over the
words Python ships with each stage, so a saved HTML export searches without a kernel.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..ir.graph import Graph, Node


def node_words(n: Node) -> str:
    """'%5 mul x In[3]:4 f': id, op, parameter name, source location and function."""
    words = [f"%{n.id}", n.op]
    name = n.attrs.get("name") if n.attrs else None
    if isinstance(name, str):
        words.append(name)
    if n.source is not None:
        words += [str(n.source), n.source.function]
    return " ".join(w for w in words if w).lower()


def matches(words: str, query: str) -> bool:
    """Every term of the query must match: '%5' the id exactly, any other term a substring."""
    terms = query.lower().split()
    if not terms:
        return False
    tokens = words.split()
    for term in terms:
        if term.startswith("%"):
            if term not in tokens:
                return False
        elif not any(term in t for t in tokens):
            return False
    return True


def match_nodes(graph: Graph, query: str | Iterable[int] | None) -> set[int]:
    """Ids of the top-level nodes a query finds; a collection of ids is taken as it is."""
    if query is None:
        return set()
    if not isinstance(query, str):
        return set(query)
    return {n.id for n in graph.nodes if matches(node_words(n), query)}
