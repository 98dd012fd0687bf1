"""The verifier names the broken node."""

from __future__ import annotations

import pytest

from explorer.ir import Attrs, Graph, GraphBuilder, Node, TensorType, VerifyError, verify
from explorer.ir.graph import Source

F3 = TensorType((3,), "f32")


def _good() -> Graph:
    b = GraphBuilder("g")
    x = b.param(F3, "x")
    y = b.add("exp", [x], source=Source("model.py", 7, "f"))
    return b.build([b.add("mul", [x, y])])


def _replace(g: Graph, k: int, node: Node) -> Graph:
    nodes = list(g.nodes)
    nodes[k] = node
    return Graph(nodes, g.params, g.outputs, g.name)


def test_good_graph_passes() -> None:
    g = _good()
    assert verify(g) is g


def test_wrong_type_names_node_and_line() -> None:
    g = _good()
    bad = _replace(g, 1, Node(1, "exp", (0,), Attrs(), TensorType((4,), "f32"),
                              Source("model.py", 7, "f")))
    with pytest.raises(VerifyError, match=r"%1 \(exp at model.py:7\) has type f32\[4\].*f32\[3\]"):
        verify(bad)


def test_dangling_edge() -> None:
    g = _good()
    bad = _replace(g, 2, Node(2, "mul", (0, 9), Attrs(), F3))
    with pytest.raises(VerifyError, match=r"%2 \(mul\) reads %9, which does not exist"):
        verify(bad)


def test_not_topological() -> None:
    g = _good()
    bad = Graph([g.nodes[0], g.nodes[2], g.nodes[1]], g.params, g.outputs, g.name)
    with pytest.raises(VerifyError, match="used before it is defined"):
        verify(bad)


def test_duplicate_ids_unknown_ops_and_outputs() -> None:
    g = _good()
    with pytest.raises(VerifyError, match="defined twice"):
        verify(Graph([*g.nodes, g.nodes[1]], g.params, g.outputs))
    with pytest.raises(VerifyError, match="unknown op 'frobnicate'"):
        verify(_replace(g, 1, Node(1, "frobnicate", (0,), Attrs(), F3)))
    with pytest.raises(VerifyError, match="output %7 does not exist"):
        verify(Graph(g.nodes, g.params, (7,)))
    with pytest.raises(VerifyError, match="params"):
        verify(Graph(g.nodes, (), g.outputs))


def test_bad_attributes_name_the_node() -> None:
    g = _good()
    bad = _replace(g, 1, Node(1, "reduce_sum", (0,), Attrs({"axes": (3,)}), TensorType((), "f32")))
    with pytest.raises(VerifyError, match=r"%1 \(reduce_sum\): axes \(3,\) out of range"):
        verify(bad)
