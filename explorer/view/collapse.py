"""Keep big graphs readable: collapse region bodies, then repeated lines, then blocks.

Graphviz lays out about a thousand boxes in a second; beyond that a picture is neither fast
nor readable. So past `max_nodes`, region bodies (kernels) are drawn as one box each; if that
is not enough, the nodes traced from one source line become one box (an unrolled Python loop
is one line run many times, so this folds repeated structure), and as a last resort runs of
consecutive nodes are boxed together.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from ..ir.graph import Graph, Node


@dataclass(frozen=True)
class Item:
    """One box of the picture: a node, or several nodes drawn as one (a group)."""

    key: str
    nodes: tuple[Node, ...]

    @property
    def is_group(self) -> bool:
        return len(self.nodes) > 1

    def summary(self) -> str:
        counts = Counter(n.op for n in self.nodes).most_common()
        shown = ", ".join(f"{op}×{k}" for op, k in counts[:3])
        return shown + (", …" if len(counts) > 3 else "")


@dataclass(frozen=True)
class Layout:
    items: tuple[Item, ...]
    item_of: dict[int, str]  # node id -> key of the item drawing it
    expand_regions: bool
    note: str  # what was collapsed, for the reader; "" when nothing was


def count_nodes(graph: Graph) -> int:
    """Nodes including those inside region bodies, at any depth."""
    total = 0
    for n in graph.nodes:
        total += 1
        body = n.attrs.get("body") if n.attrs else None
        if isinstance(body, Graph):
            total += count_nodes(body)
    return total


def _singles(nodes: tuple[Node, ...]) -> list[Item]:
    return [Item(f"n{n.id}", (n,)) for n in nodes]


def _keep_alone(n: Node, graph: Graph) -> bool:
    return n.op == "parameter" or n.id in graph.outputs


def _by_source_line(graph: Graph) -> list[Item]:
    groups: dict[tuple[str, int], list[Node]] = {}
    for n in graph.nodes:
        if n.source is not None and not _keep_alone(n, graph):
            groups.setdefault((n.source.file, n.source.line), []).append(n)
    items: list[Item] = []
    done: set[int] = set()
    for n in graph.nodes:
        if n.id in done:
            continue
        group = groups.get((n.source.file, n.source.line)) if n.source else None
        if group is None or len(group) == 1 or _keep_alone(n, graph):
            items.append(Item(f"n{n.id}", (n,)))
            done.add(n.id)
        else:
            items.append(Item(f"g{group[0].id}", tuple(group)))
            done.update(m.id for m in group)
    return items


def _by_blocks(items: list[Item], graph: Graph, max_items: int) -> list[Item]:
    """Merge consecutive single nodes into blocks until the count fits."""
    size = max(2, math.ceil(len(items) / max(1, max_items // 2)))
    out: list[Item] = []
    run: list[Node] = []

    def flush() -> None:
        if len(run) == 1:
            out.append(Item(f"n{run[0].id}", (run[0],)))
        elif run:
            out.append(Item(f"g{run[0].id}", tuple(run)))
        run.clear()

    for item in items:
        if item.is_group or _keep_alone(item.nodes[0], graph):
            flush()
            out.append(item)
            continue
        run.append(item.nodes[0])
        if len(run) >= size:
            flush()
    flush()
    return out


def plan_layout(graph: Graph, max_nodes: int) -> Layout:
    if count_nodes(graph) <= max_nodes:
        return _layout(_singles(graph.nodes), True, "")
    if len(graph) <= max_nodes:
        return _layout(_singles(graph.nodes), False, "regions collapsed")
    items = _by_source_line(graph)
    note = "regions and repeated source lines collapsed"
    if len(items) > max_nodes:
        items = _by_blocks(items, graph, max_nodes)
        note = "regions, repeated source lines and runs of nodes collapsed"
    return _layout(items, False, note)


def _layout(items: list[Item], expand: bool, note: str) -> Layout:
    item_of = {n.id: it.key for it in items for n in it.nodes}
    return Layout(tuple(items), item_of, expand, note)
