"""split: run what does not fit in `memory_limit` chunk by chunk (a tensor splitter).

A splitter inside XLA that splits each tensor over a size threshold needs slack to stay under
its limit. Here the whole program is planned (analysis/memory.py): while a step's planned bytes
exceed the budget, the largest tensors live there are tried as seeds along each of their
axes; each seed grows into the region that splits with it (analysis/split_plan.py), which
becomes one `loop` node (split_rewrite.py). For each region the largest chunk whose loop
fits is found by bisection, then evened out (same number of iterations, a divisor of the size
when one fits). The candidate with the lowest estimated time wins (FLOPs, bytes moved and a
per-iteration charge, so larger chunks are preferred). A limit no split can meet raises
`InfeasibleMemoryLimit` with the smallest limit that works and the node that needs it.
A program fits when both it and its fused form (what the `fuse` pass, later in the pipeline,
makes of it) plan under the budget: fusing moves a group's ops to its root's place, and a
backend that runs a kernel's body node by node holds its temporaries there.

A seed left whole gets a `missed` remark (explorer/ir/remarks.py) with the bytes it keeps
live: "barrier-op" (its op does not split: a scan, a sort along the axis, an opaque op),
"no-splittable-axis" (no axis grows a region, with each axis's reason) or "no-chunk-fits"
(regions grew, but no chunk of them brings the peak down).

A per-device limit (`memory-limit=16MiB/device`, `CompileOptions.per_device`) is checked
against the planned peak of one device of a sharded program (MemoryPlan.device_peak); the
loops are still sought where all devices together exceed it, until one device's share fits.
A shard_map's body runs per device and is not split: a shard_map left whole says so
("shard-map-body").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar, NamedTuple

from ..analysis.cost import graph_cost
from ..analysis.memory import DEFAULT_BACKEND, MemoryPlan, plan
from ..analysis.split_plan import Region, grow
from ..ir.graph import Graph, Node, TensorType
from ..ir.ops import OPS
from ..ir.remarks import collecting, disabled, enabled, missed, settled
from ..ir.rewrite import Rewrite
from ..ir.traits import Split as SplitTrait
from ..options import parse_limit
from ..units import format_bytes
from . import register
from .base import PassReport
from .dce import DCE
from .fuse import fuse_graph
from .split_rewrite import Loop, build_loop

RULE = "split-into-loop"
RESERVE = 32 * 1024  # bytes kept back for the interpreter's own objects (arrays, frames,
# dicts: about 20 KiB measured inside a loop body on the reference interpreter); under small
# limits a quarter of the limit, but up to a third to keep RESERVE_FLOOR (a loop of 16 chunks
# on the reference interpreter measured 7 KiB of such objects at once)
RESERVE_FLOOR = 8 * 1024
SEEDS = 4  # largest live tensors tried per round
MAX_ROUNDS = 16
# The time model that ranks candidates: seconds per FLOP, per byte moved, per body node run.
FLOP_S, BYTE_S, NODE_RUN_S = 1 / 2e9, 1 / 5e9, 5e-6


class InfeasibleMemoryLimit(ValueError):
    """No split brings the program under the limit; says the smallest limit that works."""

    def __init__(self, limit: int, needed: int, node: Node, per_device: bool = False) -> None:
        self.limit, self.needed, self.node = limit, needed, node
        self.per_device = per_device
        line = node.source.line_text if node.source else ""
        where = f" at {node.source}" + (f": {line}" if line else "") if node.source else ""
        each = " per device" if per_device else ""
        super().__init__(
            f"memory_limit={format_bytes(limit)}{each} ({limit:,} bytes) cannot be met: the "
            f"smallest feasible limit is {format_bytes(needed)}{each} ({needed:,} bytes), "
            f"needed by %{node.id} ({node.op}){where}")


def budget_of(limit: int) -> int:
    return limit - min(RESERVE, max(limit // 4, min(RESERVE_FLOOR, limit // 3)))


def split_for_limit(graph: Graph, limit: int, backend: str = DEFAULT_BACKEND,
                    per_device: bool = False) -> tuple[Graph, PassReport]:
    """The split pass as a function; raises InfeasibleMemoryLimit. `per_device`: the limit
    bounds one device's share of a sharded program."""
    out = _split(graph, limit, backend, per_device)
    if out is None:
        raise _infeasible(graph, limit, backend, per_device)
    return out


def _peak(p: MemoryPlan, per_device: bool) -> int:
    return p.device_peak if per_device else p.peak_bytes


def _planned(g: Graph, backend: str, per_device: bool) -> MemoryPlan:
    """The plan the limit is checked against: one device's steps and peak for a per-device
    limit on a sharded program (the whole program's otherwise)."""
    p = plan(g, backend)
    if not per_device or p.per_device_peak is None:
        return p
    return replace(p, steps=p.device_steps, peak_bytes=p.per_device_peak)


@dataclass(frozen=True)
class Split:
    """Options: `memory-limit` (bytes, "64MiB", or "16MiB/device": per device), `backend`
    (whose declared temporaries the plan counts). Both default to the compile options'."""

    name: str = "split"
    memory_limit: int | None = None
    backend: str | None = None
    per_device: bool | None = None
    # The compile options this pass reads, the one that calls for it, and where it goes then.
    options_read: ClassVar[tuple[str, ...]] = ("memory_limit", "backend", "per_device")
    called_for_by: ClassVar[str] = "memory_limit"
    slot_after: ClassVar[str] = "dot-order"

    def __post_init__(self) -> None:
        if self.memory_limit is not None and not isinstance(self.memory_limit, int):
            limit, per_device = parse_limit(self.memory_limit)
            object.__setattr__(self, "memory_limit", limit)
            if per_device:
                object.__setattr__(self, "per_device", True)

    def __call__(self, graph: Graph) -> tuple[Graph, PassReport]:
        if self.memory_limit is None:
            return graph, PassReport(False, notes=("no memory_limit: nothing to split",))
        with collecting() as said:  # the remarks of the plan that is kept (_split)
            out, report = split_for_limit(graph, self.memory_limit,
                                          self.backend or DEFAULT_BACKEND, bool(self.per_device))
        return out, replace(report, remarks=settled(said, self.name))


register(Split)


def _split(g: Graph, limit: int, backend: str, per_device: bool = False,
           ) -> tuple[Graph, PassReport] | None:
    budget, log, notes = budget_of(limit), [], []
    whole: dict[int, tuple[str, str]] = {}  # seeds left whole: rule, reason
    if _peak(plan(g, backend), per_device) > budget:  # dead values would keep region nodes as outputs
        _shard_maps_whole(g)
        g, dropped = DCE()(g)
        log += list(dropped.rewrites)
    each = " per device" if per_device else ""
    for _ in range(MAX_ROUNDS):
        p = _planned(g, backend, per_device)
        if _peak(p, per_device) <= budget and _fused_peak(g, backend, per_device) <= budget:
            notes.append(f"planned peak {format_bytes(_peak(p, per_device))}{each} <= budget "
                         f"{format_bytes(budget)} (limit {format_bytes(limit)}{each})")
            for seed, (rule, reason) in whole.items():
                if seed in g.by_id:  # not taken into a loop later
                    missed("split", rule, reason, [seed], g)
            return g, PassReport(bool(log), tuple(log), tuple(notes))
        best = _best(g, p, budget, backend, whole if enabled() else None, per_device)
        if best is None:
            return None
        seed, found = best
        loop = found.graph[found.loop]
        log.append(Rewrite(RULE, tuple(sorted(set(g.by_id) - set(found.graph.by_id))),
                           found.new_ids, str(g[seed].source) if g[seed].source else None))
        notes.append(f"%{found.loop}: {math.ceil(loop.attrs['size'] / loop.attrs['chunk'])} "
                     f"iterations of {loop.attrs['chunk']} (of {loop.attrs['size']})")
        g = found.graph
    return None


def _excess(p: MemoryPlan, budget: int) -> int:
    return sum(max(0, s - budget) for s in p.steps)


def _fused_peak(g: Graph, backend: str, per_device: bool = False) -> int:
    """The planned peak of `g` once fused (one device's, with `per_device`)."""
    with disabled():  # fuse's remarks are the fuse pass's, not this plan's
        return _peak(plan(fuse_graph(g)[0], backend), per_device)


def _seeds(g: Graph, p: MemoryPlan, budget: int) -> list[int]:
    """The largest tensors alive at the worst step."""
    worst = max(range(len(p.steps)), key=lambda k: p.steps[k])
    last: dict[int, int] = {}
    for k, n in enumerate(g.nodes):
        for i in n.inputs:
            last[p.buffer_of[i]] = k
    alive = [n for k, n in enumerate(g.nodes)
             if isinstance(n.type, TensorType) and n.op not in ("parameter", "constant", "iota")
             and (k == worst or (k < worst <= last.get(p.buffer_of[n.id], -1)))]
    worst_node = g.nodes[worst]
    alive += [g[i] for i in worst_node.inputs if isinstance(g[i].type, TensorType)]
    alive.sort(key=lambda n: -n.type.nbytes)
    return list(dict.fromkeys(n.id for n in alive))[:SEEDS]


def _regions(g: Graph, seeds: list[int], why: dict[int, list[str]] | None = None,
             grown: set[int] | None = None) -> list[tuple[int, Region]]:
    """The regions the seeds grow; `why[seed]` gets the reasons of those that did not, and
    `grown` the seeds that grew one (also one another seed grew first)."""
    out, seen = [], set()
    for s in seeds:
        if g[s].op in ("parameter", "constant", "iota"):
            continue
        for axis in range(g[s].type.rank):  # type: ignore[union-attr]
            for pull in (True, False):
                r = grow(g, s, axis, pull, None if why is None else why.setdefault(s, []))
                if r is not None and grown is not None:
                    grown.add(s)
                key = None if r is None else (r.size, frozenset(r.steps.items()))
                if r is not None and key not in seen:
                    seen.add(key)
                    out.append((s, r))
    return out


def _fits(g: Graph, r: Region, seed: int, chunk: int, budget: int, excess: int,
          backend: str, per_device: bool = False) -> Loop | None:
    found = build_loop(g, r, chunk, seed)
    p = _planned(found.graph, backend, per_device)
    step = p.steps[p.schedule.index(found.loop)]
    if step > budget or _excess(p, budget) >= excess:
        return None
    with disabled():
        fused = _planned(fuse_graph(found.graph)[0], backend, per_device)
    return found if fused.steps[fused.schedule.index(found.loop)] <= budget else None


def _chunk(g: Graph, r: Region, seed: int, budget: int, excess: int,
           backend: str, per_device: bool = False) -> Loop | None:
    lo = max([g[i].attrs["k"] for i in r.steps if g[i].op == "top_k" and r.steps[i].axis is None],
             default=1)
    hi = (r.size + 1) // 2
    if lo > hi or _fits(g, r, seed, lo, budget, excess, backend, per_device) is None:
        return None
    while lo < hi:  # the largest chunk that fits
        mid = (lo + hi + 1) // 2
        if _fits(g, r, seed, mid, budget, excess, backend, per_device) is not None:
            lo = mid
        else:
            hi = mid - 1
    iterations = math.ceil(r.size / lo)
    even = math.ceil(r.size / iterations)
    divisors = [d for d in range(even, lo + 1) if r.size % d == 0]
    chunk = divisors[0] if divisors else even
    return (_fits(g, r, seed, chunk, budget, excess, backend, per_device)
            or _fits(g, r, seed, lo, budget, excess, backend, per_device))


def _seconds(found: Loop) -> float:
    c = graph_cost(found.graph)
    loop = found.graph[found.loop]
    runs = math.ceil(loop.attrs["size"] / loop.attrs["chunk"]) * len(loop.attrs["body"].nodes)
    return c.flops * FLOP_S + c.bytes * BYTE_S + runs * NODE_RUN_S


def _best(g: Graph, p: MemoryPlan, budget: int, backend: str,
          whole: dict[int, tuple[str, str]] | None = None,
          per_device: bool = False) -> tuple[int, Loop] | None:
    """The fastest loop found from this round's seeds; `whole` gets the seeds that made none
    (with the remark's rule and reason)."""
    excess = _excess(p, budget) or 1  # 1: only the fused form is over
    best: tuple[float, int, Loop] | None = None
    why: dict[int, list[str]] | None = None if whole is None else {}
    seeds = _seeds(g, p, budget)
    made: set[int] = set()
    grown: set[int] = set()
    for seed, r in _regions(g, seeds, why, grown):
        found = _chunk(g, r, seed, budget, excess, backend, per_device)
        if found is not None:
            made.add(seed)
            t = _seconds(found)
            if best is None or t < best[0]:
                best = (t, seed, found)
    if whole is not None and why is not None:
        for seed in seeds:
            if seed in made or seed not in why:
                continue
            whole[seed] = _left_whole(g, seed, why[seed], seed in grown, budget)
    return None if best is None else (best[1], best[2])


def _shard_maps_whole(g: Graph) -> None:
    """A program over its limit: each shard_map's body is left as it is (module doc)."""
    for n in g.nodes:
        if n.op == "shard_map":
            missed("split", "shard-map-body",
                   f"%{n.id} (shard_map) is not split inside: its body runs per device, and "
                   f"the split pass does not split a shard_map's body", [n.id], g)


def _left_whole(g: Graph, seed: int, reasons: list[str], grew: bool, budget: int,
                ) -> tuple[str, str]:
    n = g[seed]
    what = f"%{seed} ({n.op}, {n.type}) stays whole, keeping {format_bytes(n.type.nbytes)} " \
           f"live at the peak (budget {format_bytes(budget)})"
    if n.op == "shard_map":
        return "shard-map-body", (f"{what}: a shard_map's body runs per device, and the split "
                                  f"pass does not split inside it")
    if OPS[n.op].split == SplitTrait.NONE:
        return "barrier-op", f"{what}: {n.op} is a barrier, it does not run in chunks"
    if not grew:
        return "no-splittable-axis", (f"{what}: no axis splits "
                                      f"({'; '.join(dict.fromkeys(reasons))})")
    return "no-chunk-fits", (f"{what}: no chunk of the regions it grows brings the peak under "
                             f"the budget")


def _infeasible(g: Graph, limit: int, backend: str, per_device: bool = False,
                ) -> InfeasibleMemoryLimit:
    """The error for `limit`, with the smallest limit that works and the node that needs it."""
    needed, node, _ = smallest_limit(g, backend, per_device=per_device)
    if needed <= limit:  # the limits that work are not all above the smallest: look above
        needed, node, _ = smallest_limit(g, backend, above=limit, per_device=per_device)
    return InfeasibleMemoryLimit(limit, needed, node, per_device)


class Limits(NamedTuple):
    smallest: int  # the smallest limit the split pass meets
    node: Node  # the node whose step sets it: the peak of the program split for it
    unsplit: int  # a limit under which nothing needs splitting


def smallest_limit(g: Graph, backend: str = DEFAULT_BACKEND, above: int = 0,
                   per_device: bool = False) -> Limits:
    """The smallest memory limit the split pass can meet on `g` (above `above`, a limit
    known to fail), to within 1/64 of it (or 256 bytes), the node that needs it, and the
    limit from which nothing needs splitting (the planned peak of `g` and of its fused form,
    plus the reserve). The search starts there and gallops down, then bisects: an attempt
    just under a program's peak is the slowest to fail, and a program that no split makes
    smaller needs only one."""
    unsplit = max(_peak(plan(g, backend), per_device), _fused_peak(g, backend, per_device)) + RESERVE
    lo, hi, step = above, max(above + 1, unsplit), max(256, unsplit // 64)
    while hi - lo > max(256, hi // 64):
        mid = max((lo + hi) // 2, hi - step) if step else (lo + hi) // 2
        if _split(g, mid, backend, per_device) is None:
            lo, step = mid, 0  # under the smallest: bisect from here on
        else:
            hi, step = mid, step * 2
    done = _split(g, hi, backend, per_device)
    final = done[0] if done else g
    peak_node = plan(final, backend).peak_node
    return Limits(hi, final[peak_node] if peak_node is not None else g.nodes[-1], unsplit)


def check_limit(g: Graph, limit: int, backend: str = DEFAULT_BACKEND,
                per_device: bool = False) -> None:
    """Raise if the final program's planned peak (one device's, with `per_device`) exceeds
    `limit` (a later pass undid it)."""
    peak = plan(g, backend)
    if _peak(peak, per_device) > budget_of(limit):
        node = g[peak.peak_node] if peak.peak_node is not None else g.nodes[-1]
        raise InfeasibleMemoryLimit(limit, _peak(peak, per_device) + RESERVE, node, per_device)
