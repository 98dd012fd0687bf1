"""Memory planning: the schedule, buffer liveness, and the planned peak of live temporaries.

Temporaries are everything the program allocates except its inputs and its outputs (and the
constants baked into it). Ops that only re-index their input (broadcast, transpose, slice, ...)
alias it instead of allocating, as NumPy views do; a reshape of a strided view copies.
At each step the op's own transient allocations are added on top of the live buffers: what a
backend's implementation of an op allocates beyond its result is that backend's to know, so
each backend declares it (`declare_temporaries`, done by the backend registry) and a plan is
made for one backend's temporaries (the reference interpreter's unless said otherwise).
Region-aware: a `loop` node's step holds its result buffers plus one iteration's temporaries
(its body's peak, results included) plus what the backend allocates to merge a chunk; a
control-flow region's step holds its results plus its dearest body's peak (a scan's stacked
results are allocated once and filled row by row, so one iteration is live at a time). A
`kernel` or `call` node that the backend runs node by node (each backend says which, with
`runs_body`: the reference interpreter runs every kernel's body, the CPU backend only those
it cannot generate code for) holds its body's peak: the inputs that die at that node are
handed to the body (the interpreter core drops its own references first) and freed at their
last use inside, so a fused program plans, and measures, as its unfused form does.
A `shard_map` step holds its body's peak once per device of its mesh (reference and cpu run
every device's body on one host).

Sharded programs: a stage whose values carry shardings (or that holds a shard_map) is also
planned per device (analysis/device_bytes.py says what one device holds of each value; a
shard_map body is per device as it stands): `per_device_peak`, over `devices` devices. It
plans for a device as XLA runs it: every buffer rounded up to DEVICE_ALIGNMENT, and a
collective's step holding a send buffer the size of its operands (XLA packs the blocks an
all_to_all or reduce-scatter sends into one contiguous buffer before sending). The global
figures (`peak_bytes`, `timeline`) stay what all devices hold together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from ..ir.graph import Graph, Node, TupleType
from ..ir.ops import OPS
from ..ir.ops.regions import CONTROL_FLOW, bodies
from ..ir.traits import OpKind, View
from .device_bytes import device_bytes

# (graph, node, contiguous: node id -> is its buffer contiguous) -> transient bytes the node's
# step allocates beyond its result (for a loop: beyond one iteration's body peak).
Workspace = Callable[[Graph, Node, Mapping[int, bool]], int]
# kernel or call node -> does the backend run its body node by node (not as one compiled kernel)?
RunsBody = Callable[[Node], bool]
# a split loop's body -> the peak of running it as the backend compiles it, or None: planned
# node by node (a backend that runs some bodies as one fused kernel says what those hold)
BodyPeak = Callable[[Graph], "int | None"]
REGION_CALLS = frozenset({"kernel", "call"})
# A per-device plan rounds each buffer up to this: XLA's buffer assignment aligns every buffer
# to 64 bytes on CPU and GPU devices, which is most of what small sharded programs hold.
DEVICE_ALIGNMENT = 64
COLLECTIVES = frozenset(n for n, r in OPS.items() if r.kind == OpKind.COLLECTIVE)


def _nothing(g: Graph, n: Node, contiguous: Mapping[int, bool]) -> int:
    return 0


def _never(n: Node) -> bool:
    return False


def _unknown(body: Graph) -> int | None:
    return None


@dataclass(frozen=True)
class Temporaries:
    """What one backend declares: an op's workspace, and which region calls run their body."""

    workspace: Workspace = _nothing
    runs_body: RunsBody = _never
    loop_body: BodyPeak = _unknown


_TEMPORARIES: dict[str, Temporaries] = {}
DEFAULT_BACKEND = "reference"


def declare_temporaries(backend: str, workspace: Workspace | None,
                        runs_body: RunsBody | None = None,
                        loop_body: BodyPeak | None = None) -> None:
    """Backend `backend` allocates `workspace(...)` bytes beyond each result (None: nothing),
    runs the bodies of the kernel/call nodes for which `runs_body(node)` holds, and holds
    `loop_body(body)` bytes while a split loop's body runs (None: plan it node by node)."""
    if workspace is None and runs_body is None and loop_body is None:
        _TEMPORARIES.pop(backend, None)
    else:
        _TEMPORARIES[backend] = Temporaries(workspace or _nothing, runs_body or _never,
                                            loop_body or _unknown)


def temporaries(backend: str) -> Temporaries:
    return _TEMPORARIES.get(backend, Temporaries())

# Views (the op table's `view` trait): they allocate nothing and keep their input's buffer
# alive; the reshaping ones are views of a contiguous input, but copy a strided one.
STRIDED_VIEW_OPS = frozenset(n for n, r in OPS.items() if r.view == View.STRIDED)
RESHAPE_OPS = frozenset(n for n, r in OPS.items() if r.view == View.RESHAPE)
ALIASING_OPS = STRIDED_VIEW_OPS | RESHAPE_OPS


@dataclass(frozen=True)
class MemoryPlan:
    schedule: tuple[int, ...]  # node ids in execution order
    timeline: tuple[int, ...]  # live temporary bytes after each step of the schedule
    peak_bytes: int
    peak_node: int | None  # the node at whose step the peak is reached
    buffer_of: dict[int, int]  # node id -> the node id owning its buffer
    temporaries: dict[int, int]  # buffer owner id -> bytes, for buffers counted as temporaries
    steps: tuple[int, ...] = ()  # planned bytes at each step: live buffers plus the op's workspace
    # a sharded stage: the planned peak of one device (its share of each value, the shard_map
    # bodies once), over `devices` devices; None for an unsharded one
    per_device_peak: int | None = None
    devices: int | None = None
    device_steps: tuple[int, ...] = ()  # a sharded stage: one device's planned bytes per step

    @property
    def device_peak(self) -> int:
        """What one device holds at the peak: `per_device_peak` where the stage is sharded,
        else the peak itself (one device holds everything)."""
        return self.peak_bytes if self.per_device_peak is None else self.per_device_peak


def plan(g: Graph, backend: str = DEFAULT_BACKEND) -> MemoryPlan:
    """The plan of a whole program on `backend`: its inputs and outputs are not temporaries.
    A sharded program is planned per device too (`per_device_peak`, `devices`)."""
    ws = temporaries(backend)
    whole = _plan(g, False, frozenset(), ws)
    sharded = device_bytes(g)
    if sharded is None:
        return whole
    one = _plan(g, False, frozenset(), ws, sizes=sharded.sizes, align=DEVICE_ALIGNMENT)
    return replace(whole, per_device_peak=one.peak_bytes, devices=sharded.devices,
                   device_steps=one.steps)


def body_peak(body: Graph, strided: frozenset[int] = frozenset(),
              backend: str = DEFAULT_BACKEND) -> int:
    """The peak of one run of a region body, its results included (they are the enclosing
    op's temporaries until combined); `strided` parameters are non-contiguous views."""
    return _plan(body, True, strided, temporaries(backend)).peak_bytes


def _call_step(g: Graph, n: Node, step: int, contiguous: Mapping[int, bool],
               owner: Mapping[int, int], last_use: Mapping[int, int], temps: Mapping[int, int],
               ws: Temporaries) -> int:
    """Bytes a kernel/call run node by node adds to the live bytes before it (its result not
    included): its body's peak, with the inputs that die here handed over (counted in the
    body until their last use there, so subtracted here)."""
    body: Graph = n.attrs["body"]
    owners = [owner[i] for i in n.inputs]
    handed: dict[int, int] = {}
    for p, o in zip(body.params, owners):
        if o in temps and last_use.get(o) == step and owners.count(o) == 1:
            handed[p] = temps[o]
    strided = frozenset(p for p, i in zip(body.params, n.inputs) if not contiguous.get(i, True))
    peak = _plan(body, True, strided, ws, handed).peak_bytes
    return peak - sum(handed.values())


def _loop_body_peak(g: Graph, n: Node, contiguous: Mapping[int, bool], ws: Temporaries) -> int:
    """The larger peak of a loop's body and tail; a strided input, or one sliced along an axis
    after a non-unit one, is a strided view inside."""
    split = dict(n.attrs["split_inputs"])
    peak = 0
    for body in (n.attrs["body"], n.attrs.get("tail")):
        if body is None:
            continue
        compiled = ws.loop_body(body)
        if compiled is not None:
            peak = max(peak, compiled)
            continue
        strided = frozenset(p for k, p in enumerate(body.params) if not contiguous.get(
            n.inputs[k], True) or (k in split and any(
                d > 1 for d in g[n.inputs[k]].type.shape[:split[k]])))  # type: ignore[union-attr]
        peak = max(peak, _plan(body, True, strided, ws).peak_bytes)
    return peak


def _control_body_peak(n: Node, ws: Workspace, result_counted: bool) -> int:
    """What a control-flow region holds beyond its result while a body runs. A `while` or
    `scan` body makes the new state beside the old one (the region's result buffers, counted
    by the enclosing plan unless they are the program's outputs, when the old state is still
    a temporary), so its peak counts its results; a `call` or `conditional` body's results are
    the region's result, so its peak does not. The dearest body is the one that counts."""
    loop = n.op in ("while", "scan")
    peak = max((_plan(body, loop, frozenset(), ws).peak_bytes for _, body in bodies(n)),
               default=0)
    if loop and not result_counted:
        carried = n.type.elements if isinstance(n.type, TupleType) else (n.type,)
        if n.op == "scan":
            carried = carried[:n.attrs["num_carry"]]
        peak += sum(t.nbytes for t in carried)
    return peak


def _external_bytes(g: Graph, owner: dict[int, int],
                    nbytes: Callable[[Node], int]) -> dict[int, int | None]:
    """buffer owner -> bytes of it that are program outputs (None: all of it). Only some
    elements of a tuple (a loop's or top_k's results) may be outputs."""
    ext: dict[int, int | None] = {}
    for o in g.outputs:
        buf = owner[o]
        if isinstance(g[buf].type, TupleType) and g[o].op == "get_tuple_element" and buf != o:
            if ext.get(buf, 0) is not None:
                ext[buf] = (ext.get(buf) or 0) + nbytes(g[o])
        else:
            ext[buf] = None
    return ext


def _share(workspace: int, n: Node, sizes: Mapping[int, int]) -> int:
    """A node's workspace on one device: its share of the global workspace is its result's."""
    if n.id not in sizes or not n.type.nbytes:
        return workspace
    return workspace * sizes[n.id] // n.type.nbytes


def _body_share(peak: int, g: Graph, n: Node, sizes: Mapping[int, int]) -> int:
    """A kernel's (or call's) body peak on one device: the share of it that one device holds
    of the region's largest input (its body's values are mostly of that input's shape)."""
    if not sizes or not n.inputs:
        return peak
    big = max(n.inputs, key=lambda i: g[i].type.nbytes)
    whole = g[big].type.nbytes
    return peak if not whole else peak * sizes.get(big, whole) // whole


def _shard_map_body_peak(n: Node, ws: Temporaries, per_device: bool, align: int) -> int:
    """A shard_map body's peak (its per-device results included, until put together into the
    region's result): on one device, or on every device of its mesh at once."""
    peak = _plan(n.attrs["body"], True, frozenset(), ws, align=align).peak_bytes
    return peak if per_device else peak * n.attrs["mesh"].size


def _plan(g: Graph, outputs_are_temporaries: bool, strided: frozenset[int],
          ws: Temporaries, handed: Mapping[int, int] | None = None,
          sizes: Mapping[int, int] | None = None, align: int = 1) -> MemoryPlan:
    """`handed`: parameters whose buffers the body owns (bytes), freed at their last use.
    `sizes`: node id -> bytes of its result on one device (a per-device plan of a sharded
    program; the others are whole). `align`: each buffer is rounded up to it."""
    handed = handed or {}
    per_device = sizes is not None
    sized = sizes or {}

    def nbytes(n: Node) -> int:
        return -(-sized.get(n.id, n.type.nbytes) // align) * align

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
            contiguous[n.id] = n.id not in strided
    last_use: dict[int, int] = {}
    for step, n in enumerate(g.nodes):
        for i in n.inputs:
            last_use[owner[i]] = step
    if outputs_are_temporaries:
        end = len(g.nodes)
        for o in g.outputs:
            last_use[owner[o]] = end  # alive past the last step
    external: dict[int, int | None] = {owner[p]: None for p in g.params if p not in handed}
    if not outputs_are_temporaries:
        external.update(_external_bytes(g, owner, nbytes))
    temps: dict[int, int] = {}
    for n in g.nodes:
        if owner[n.id] != n.id or n.op in ("parameter", "constant"):
            continue
        ext = external.get(n.id, 0)
        if ext is not None and nbytes(n) > ext:
            temps[n.id] = nbytes(n) - ext
    for p, nbytes in handed.items():
        temps[p] = nbytes
    frees: dict[int, list[int]] = {}
    for buf in temps:
        step = last_use.get(buf)
        if step is not None:
            frees.setdefault(step, []).append(buf)
    live = sum(handed.values())
    peak, peak_node = live, None
    timeline, steps = [], []
    for step, n in enumerate(g.nodes):
        if n.id in temps and n.id not in handed:
            live += temps[n.id]
        if n.op in REGION_CALLS and ws.runs_body(n):
            at_step = live - temps.get(n.id, 0) + _body_share(_call_step(
                g, n, step, contiguous, owner, last_use, temps, ws), g, n, sized)
        else:
            at_step = live + _share(ws.workspace(g, n, contiguous), n, sized)
        if n.op == "loop":
            at_step += _loop_body_peak(g, n, contiguous, ws)
        elif n.op in CONTROL_FLOW:
            at_step += _control_body_peak(n, ws, n.id in temps)
        elif n.op == "shard_map":
            at_step += _shard_map_body_peak(n, ws, per_device, align)
        elif align > 1 and n.op in COLLECTIVES:  # a device's send buffer (module doc)
            at_step += sum(nbytes(g[i]) for i in n.inputs)
        if at_step > peak:
            peak, peak_node = at_step, n.id
        timeline.append(live)
        steps.append(at_step)
        for buf in frees.get(step, ()):
            live -= temps[buf]
        if n.id in temps and n.id not in last_use and n.id not in handed:  # never read
            live -= temps[n.id]
    return MemoryPlan(tuple(n.id for n in g.nodes), tuple(timeline), peak, peak_node, owner, temps,
                      tuple(steps))
