"""Memory planning: the schedule, buffer liveness, and the planned peak of live temporaries.

Temporaries are everything the program allocates except its inputs and its outputs (and the
constants baked into it). Ops that only re-index their input (broadcast, transpose, slice, ...)
alias it instead of allocating, as NumPy views do; a reshape of a strided view copies.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph

# Views: they allocate nothing and keep their input's buffer alive.
STRIDED_VIEW_OPS = frozenset({"broadcast_in_dim", "transpose", "rev", "slice"})
# These are views of a contiguous input, but copy a strided one.
RESHAPE_OPS = frozenset({"reshape", "squeeze", "expand_dims", "get_tuple_element"})
ALIASING_OPS = STRIDED_VIEW_OPS | RESHAPE_OPS


@dataclass(frozen=True)
class MemoryPlan:
    schedule: tuple[int, ...]  # node ids in execution order
    timeline: tuple[int, ...]  # live temporary bytes after each step of the schedule
    peak_bytes: int
    peak_node: int | None  # the node at whose step the peak is reached
    buffer_of: dict[int, int]  # node id -> the node id owning its buffer
    temporaries: dict[int, int]  # buffer owner id -> bytes, for buffers counted as temporaries


def plan(g: Graph) -> MemoryPlan:
    owner: dict[int, int] = {}
    contiguous: dict[int, bool] = {}
    for n in g.nodes:
        if n.op in STRIDED_VIEW_OPS:
            owner[n.id] = owner[n.inputs[0]]
            contiguous[n.id] = False
        elif n.op in RESHAPE_OPS and contiguous[n.inputs[0]]:
            owner[n.id] = owner[n.inputs[0]]
            contiguous[n.id] = True
        else:
            owner[n.id] = n.id
            contiguous[n.id] = True
    last_use: dict[int, int] = {}
    for step, n in enumerate(g.nodes):
        for i in n.inputs:
            last_use[owner[i]] = step
    external = {owner[p] for p in g.params} | {owner[o] for o in g.outputs}
    temps = {
        n.id: n.type.nbytes
        for n in g.nodes
        if owner[n.id] == n.id and n.id not in external and n.op not in ("parameter", "constant")
    }
    frees: dict[int, list[int]] = {}
    for buf in temps:
        step = last_use.get(buf)
        if step is not None:
            frees.setdefault(step, []).append(buf)
    live = 0
    peak, peak_node = 0, None
    timeline = []
    for step, n in enumerate(g.nodes):
        if n.id in temps:
            live += temps[n.id]
        if live > peak:
            peak, peak_node = live, n.id
        timeline.append(live)
        for buf in frees.get(step, ()):
            live -= temps[buf]
        if n.id in temps and n.id not in last_use:  # computed but never read
            live -= temps[n.id]
    return MemoryPlan(tuple(n.id for n in g.nodes), tuple(timeline), peak, peak_node, owner, temps)
