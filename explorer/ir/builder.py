"""Builds graphs node by node, inferring each node's type from the op table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .graph import Attrs, Graph, Literal, Node, Source, TensorType, Type
from .ops import infer_type


class GraphBuilder:
    """Appends nodes with fresh ids; `build(outputs)` freezes them into a Graph."""

    def __init__(self, name: str = "main", first_id: int = 0) -> None:
        self.name = name
        self.nodes: list[Node] = []
        self.params: list[int] = []
        self.types: dict[int, Type] = {}
        self._by_id: dict[int, Node] = {}
        self._next = first_id

    def _fresh(self) -> int:
        nid = self._next
        self._next += 1
        return nid

    def append(self, node: Node) -> int:
        """Keep an existing node as it is (same id); passes use this for untouched nodes."""
        self.nodes.append(node)
        self.types[node.id] = node.type
        self._by_id[node.id] = node
        self._next = max(self._next, node.id + 1)
        if node.op == "parameter":
            self.params.append(node.id)
        return node.id

    def param(self, type: TensorType, name: str = "", source: Source | None = None) -> int:
        attrs = Attrs({"index": len(self.params), "name": name or f"arg{len(self.params)}"})
        return self.append(Node(self._fresh(), "parameter", (), attrs, type, source))

    def add(self, op: str, inputs: Sequence[int], attrs: Mapping[str, Any] | None = None,
            source: Source | None = None) -> int:
        a = attrs if isinstance(attrs, Attrs) else Attrs(attrs or {})
        typ = infer_type(op, [self.types[i] for i in inputs], a)
        return self.append(Node(self._fresh(), op, tuple(inputs), a, typ, source))

    def constant(self, value: Any, dtype: str | None = None, source: Source | None = None) -> int:
        return self.add("constant", (), {"value": Literal(value, dtype)}, source)

    def set_attr(self, node_id: int, key: str, value: Any) -> None:
        """Give a node already added one more attribute (a parameter's sharding, known once
        the jit around the function is read); its type stays."""
        k = next(k for k, n in enumerate(self.nodes) if n.id == node_id)
        n = self.nodes[k]
        self.nodes[k] = self._by_id[n.id] = Node(n.id, n.op, n.inputs,
                                                 n.attrs.replace(**{key: value}), n.type, n.source)

    def type_of(self, node_id: int) -> Type:
        return self.types[node_id]

    def node(self, node_id: int) -> Node:
        return self._by_id[node_id]

    def build(self, outputs: Iterable[int]) -> Graph:
        return Graph(self.nodes, self.params, outputs, self.name)
