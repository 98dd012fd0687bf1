"""The compiler core: nodes, graphs, the op table, printing, parsing, verifying."""

from .builder import GraphBuilder
from .graph import Attrs, Graph, Literal, Node, Source, TensorType, TupleType, print_graph
from .ops import OPS, OpDef, OpError
from .parser import ParseError, parse
from .verify import VerifyError, verify

__all__ = [
    "OPS", "Attrs", "Graph", "GraphBuilder", "Literal", "Node", "OpDef", "OpError", "ParseError",
    "Source", "TensorType", "TupleType", "VerifyError", "parse", "print_graph", "verify",
]
