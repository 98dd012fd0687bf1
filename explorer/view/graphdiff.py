"""Which nodes a pass added, removed or changed, matched by node id.

Passes keep the id of every node they leave alone (see ir/graph.py), so two stages are
compared id by id: an id only in the later stage was added, one only in the earlier stage was
removed, and one in both whose op, inputs, attributes or type differ was changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph, Node

ADDED, REMOVED, CHANGED = "added", "removed", "changed"


@dataclass(frozen=True)
class GraphDiff:
    added: frozenset[int]
    removed: frozenset[int]
    changed: frozenset[int]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def status_before(self) -> dict[int, str]:
        """Colours for the earlier stage: what disappeared or was rewritten."""
        return {**{i: REMOVED for i in self.removed}, **{i: CHANGED for i in self.changed}}

    def status_after(self) -> dict[int, str]:
        """Colours for the later stage: what is new or was rewritten."""
        return {**{i: ADDED for i in self.added}, **{i: CHANGED for i in self.changed}}

    def counts(self) -> dict[str, int]:
        return {ADDED: len(self.added), REMOVED: len(self.removed), CHANGED: len(self.changed)}


def same_node(a: Node, b: Node) -> bool:
    """Equal as far as the reader of a graph can see (a moved source line is no change)."""
    return a.op == b.op and a.inputs == b.inputs and a.attrs == b.attrs and a.type == b.type


def graph_diff(before: Graph, after: Graph) -> GraphDiff:
    old, new = before.by_id, after.by_id
    return GraphDiff(
        added=frozenset(new.keys() - old.keys()),
        removed=frozenset(old.keys() - new.keys()),
        changed=frozenset(i for i in old.keys() & new.keys() if not same_node(old[i], new[i])),
    )
