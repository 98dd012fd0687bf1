"""Ours vs XLA's: our pipeline's final stage next to XLA's final module, for one function.

Both sides are Graphs, so the same cost model and memory planner measure both; XLA's own
numbers (`cost_analysis()` FLOPs, `memory_analysis()` temporary bytes) stand beside them,
because our planner's view of XLA's module is not what XLA's buffer assignment decides.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..analysis.cost import graph_cost
from ..frontend.hlo_graph import from_hlo
from ..ir.graph import Graph
from ..trace import explore
from .pipeline import compile_with_dumps


@dataclass(frozen=True)
class Side:
    label: str
    nodes: int
    kernels: int  # our `kernel` regions; on XLA's side, its fusions
    ops: dict[str, int]  # op -> count, inside kernels too; XLA ops we lack end in '*'
    flops: int  # our cost model (opaque nodes count 0)
    planned_peak: int  # our planner's peak of live temporaries
    reported_flops: float | None = None  # XLA's cost_analysis()
    reported_temp_bytes: int | None = None  # XLA's memory_analysis().temp_size_in_bytes


def _count_ops(g: Graph, acc: dict[str, int]) -> int:
    """Count ops into `acc` (recursing into regions); return how many kernels there are."""
    kernels = 0
    for n in g.nodes:
        name = f"{n.attrs['opcode']}*" if n.op == "opaque" else n.op
        if n.op != "parameter":
            acc[name] = acc.get(name, 0) + 1
        kernels += n.op == "kernel"
        for v in n.attrs.values():
            for body in v if isinstance(v, tuple) else (v,):
                if isinstance(body, Graph):
                    kernels += _count_ops(body, acc)
    return kernels


def describe(label: str, g: Graph, reported_flops: float | None = None,
             reported_temp_bytes: int | None = None) -> Side:
    ops: dict[str, int] = {}
    kernels = _count_ops(g, ops)
    cost = graph_cost(g)
    return Side(label, len(g.nodes), kernels, dict(sorted(ops.items())), cost.flops,
                cost.peak_bytes, reported_flops, reported_temp_bytes)


@dataclass(frozen=True)
class Comparison:
    fn_name: str
    ours: Side
    xla: Side

    def rows(self) -> list[tuple[str, str, str]]:
        def num(v: float | None) -> str:
            return "-" if v is None else f"{int(v):,}"

        o, x = self.ours, self.xla
        rows = [("top-level nodes", num(o.nodes), num(x.nodes)),
                ("kernels / fusions", num(o.kernels), num(x.kernels)),
                ("FLOPs (our cost model)", num(o.flops), num(x.flops)),
                ("FLOPs (XLA cost_analysis)", "-", num(x.reported_flops)),
                ("peak temporaries, bytes (our plan)", num(o.planned_peak), num(x.planned_peak)),
                ("temporaries, bytes (XLA memory_analysis)", "-", num(x.reported_temp_bytes))]
        for op in sorted(set(o.ops) | set(x.ops)):
            rows.append((f"op {op}", num(o.ops.get(op, 0)), num(x.ops.get(op, 0))))
        return rows

    def table(self) -> str:
        head = ("", self.ours.label, self.xla.label)
        rows = [head, *self.rows()]
        w = [max(len(r[k]) for r in rows) for k in range(3)]
        lines = [f"{a:<{w[0]}}  {b:>{w[1]}}  {c:>{w[2]}}" for a, b, c in rows]
        lines.insert(1, "-" * (sum(w) + 4))
        tail = "\n(* an XLA op our op table lacks, imported as an opaque node)"
        return f"{self.fn_name}: ours vs XLA's\n" + "\n".join(lines) + tail

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{esc(c)}</th>" for c in ("", self.ours.label, self.xla.label))
        body = "".join(f"<tr><td>{esc(a)}</td><td style='text-align:right'>{esc(b)}</td>"
                       f"<td style='text-align:right'>{esc(c)}</td></tr>"
                       for a, b, c in self.rows())
        return (f"<table><caption>{esc(self.fn_name)}: ours vs XLA's</caption>"
                f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def compare_with_xla(fn: Callable[..., Any], *args: Any,
                     pipeline: str | Sequence[Any] | None = None,
                     backend: str = "cpu") -> Comparison:
    """Our pipeline's final stage of `fn(*args)` next to XLA's final module for `backend`."""
    ours = explore(fn, *args, pipeline=pipeline).final
    comp = compile_with_dumps(fn, *args, backend=backend)
    memory = comp.memory
    temp = getattr(memory, "temp_size_in_bytes", None) if memory is not None else None
    flops = comp.cost.get("flops")
    return Comparison(
        comp.fn_name,
        describe(f"ours ({ours.name})", ours.graph),
        describe(f"XLA ({backend}{per_device(comp.devices)})", from_hlo(comp.final.text),
                 flops, temp))


def per_device(devices: int) -> str:
    """', per device of 4' for a program partitioned over several devices: XLA's final module,
    its cost and memory analyses are one device's."""
    return f", per device of {devices}" if devices > 1 else ""
