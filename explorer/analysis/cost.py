"""FLOPs and bytes moved, per node and per graph, from the op table's cost rules."""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph, Node
from ..ir.ops import OPS
from ..ir.ops.regions import CONTROL_FLOW, combine_bodies
from ..ir.traits import OpKind, View
from .memory import plan


@dataclass(frozen=True)
class Cost:
    flops: int
    bytes: int  # bytes read and written by the nodes that compute
    peak_bytes: int  # planned peak of live temporaries (see analysis.memory)

    def __str__(self) -> str:
        return f"{self.flops:,} FLOPs, {self.bytes:,} bytes, peak {self.peak_bytes:,} bytes"


def node_flops(g: Graph, n: Node) -> int:
    if OPS[n.op].kind == OpKind.SOURCE:
        return 0
    return int(OPS[n.op].flops([g[i].type for i in n.inputs], n.type, n.attrs))  # type: ignore[arg-type]


def node_bytes(g: Graph, n: Node) -> int:
    """Bytes read plus written; sources and views (which only re-index their input) move
    nothing; a control-flow region or a split loop moves what its bodies move, as often as
    they run (a fused kernel moves its inputs and results only: that is what fusion saves)."""
    if OPS[n.op].kind == OpKind.SOURCE or OPS[n.op].view != View.NONE:
        return 0
    if n.op in CONTROL_FLOW or n.op == "loop":
        return combine_bodies(n.op, n.attrs, graph_bytes)
    return sum(g[i].type.nbytes for i in n.inputs) + n.type.nbytes


def graph_bytes(g: Graph) -> int:
    return sum(node_bytes(g, n) for n in g.nodes)


def graph_cost(g: Graph) -> Cost:
    return Cost(
        flops=sum(node_flops(g, n) for n in g.nodes),
        bytes=graph_bytes(g),
        peak_bytes=plan(g).peak_bytes,
    )
