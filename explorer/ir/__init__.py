"""The compiler core: nodes, graphs, the op table, printing, parsing, verifying."""

from .builder import GraphBuilder
from .graph import (
    Attrs,
    Graph,
    Literal,
    Node,
    Source,
    TensorType,
    TupleType,
    device_types,
    print_graph,
)
from .ops import OPS, OpDef, OpError
from .parser import ParseError, parse
from .sharding import MeshSpec, Sharding, ShardingError, Spec
from .verify import VerifyError, verify

__all__ = [
    "OPS", "Attrs", "Graph", "GraphBuilder", "Literal", "MeshSpec", "Node", "OpDef", "OpError",
    "ParseError", "Sharding", "ShardingError", "Source", "Spec", "TensorType", "TupleType",
    "VerifyError", "device_types", "parse", "print_graph", "verify",
]
