"""FLOPs and bytes moved, per node and per graph, from the op table's cost rules."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph, Node
from ..ir.ops import OPS
from .memory import ALIASING_OPS, plan


@dataclass(frozen=True)
class Cost:
    flops: int
    bytes: int  # bytes read and written by the nodes that compute
    peak_bytes: int  # planned peak of live temporaries (see analysis.memory)

    def __str__(self) -> str:
        return f"{self.flops:,} FLOPs, {self.bytes:,} bytes, peak {self.peak_bytes:,} bytes"


def node_flops(g: Graph, n: Node) -> int:
    if OPS[n.op].kind == "source":
        return 0
    return int(OPS[n.op].flops([g[i].type for i in n.inputs], n.type, n.attrs))  # type: ignore[arg-type]


def node_bytes(g: Graph, n: Node) -> int:
    """Bytes read plus written; ops that only re-index their input move nothing."""
    if OPS[n.op].kind == "source" or n.op in ALIASING_OPS:
        return 0
    return sum(g[i].type.nbytes for i in n.inputs) + n.type.nbytes


def graph_cost(g: Graph) -> Cost:
    return Cost(
        flops=sum(node_flops(g, n) for n in g.nodes),
        bytes=sum(node_bytes(g, n) for n in g.nodes),
        peak_bytes=plan(g).peak_bytes,
    )
