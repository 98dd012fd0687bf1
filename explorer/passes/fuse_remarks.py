"""Why `fuse` left a producer out of its consumer's kernel: the words of its remarks.

The fuser (passes/fuse.py) records, at each decision that keeps a producer out of a group, a
`Refusal`: the decision's rule and a function that words it. Once every group is settled, each
value a kernel reads from outside (a producer-consumer edge the pass leaves between two
kernels, or between a lone op and a kernel) gets one `missed` remark naming the producer and
the kernel (explorer/ir/remarks.py), with the figures that decided it. Rules:

    producer-has-other-users   the producer's value is read outside this kernel too
    dot-has-other-readers      the same for a dot (it heads a kernel only when read by it alone)
    producer-is-output         the producer is an output of the graph (no multi-output kernels)
    producer-in-other-kernel   another kernel took the producer first
    read-by-copied-broadcast   the producer feeds a broadcast copied into another kernel
    broadcast-input            the producer is a broadcast's input: the kernel reads it whole
    copied-broadcast-input     the input of a broadcast copied into the kernel
    read-in-place-input        the input of a slice or pad the kernel reads in place
    not-read-in-place          a pad with a run-time padding value: read from memory
    shape-mismatch             the producer does not iterate over the kernel's space
    second-reduction           the kernel already holds its one reduction
    reduction-axes-differ      a row kernel's reductions all fold the same trailing axes
    broadcast-moves-axes       a row kernel reads no input through a broadcast that moves axes
    dot-operand                an operand of the kernel's head dot: the BLAS call reads it
    dot-not-head               a dot the kernel could not take as its head (and why)
    dot-in-body                inside a loop or branch body dots stay outside kernels
    opaque-producer            an opaque op (or a result of one) runs through JAX: no kernel
    region-boundary            a result of a control-flow region or split loop: fused inside,
                               not into the kernels around it
    not-elementwise            an op that is neither elementwise nor a reduction
    constant-array             a constant tensor is read, only scalar constants are copied in

and, as an `analysis` remark on the op itself, `lone-op-too-small`: an op no producer joined,
left to its NumPy form under the size at which a lone op becomes a kernel (fuse.LONE_MIN).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir.graph import Graph, Node, TensorType
from ..ir.ops import CONTROL_FLOW
from ..units import format_bytes

Words = Callable[[], str]


@dataclass(frozen=True)
class Refusal:
    """Why producer `producer` did not join the group at member `member`: the rule, and its
    reason in words (formed only when the remark is made)."""

    rule: str
    member: int
    words: Words


def value(g: Graph, i: int) -> str:
    """'%12 (mul, f32[512,512], 1.0 MiB)'."""
    t = g[i].type
    if isinstance(t, TensorType):
        return f"%{i} ({g[i].op}, {t}, {format_bytes(t.nbytes)})"
    return f"%{i} ({g[i].op})"


def op_refusal(g: Graph, p: Node, m: Node) -> Refusal:
    """Why `p`, neither elementwise nor a reduction, stays out of the kernel reading it."""
    if p.op == "dot_general":  # worded once the group's head is chosen (head_refusal)
        return Refusal("dot-not-head", m.id, lambda: "")
    if p.op == "get_tuple_element":  # one result of a region or an opaque op: say which
        src = g[p.inputs[0]]
        if src.op == "opaque" or src.op in CONTROL_FLOW or src.op in ("loop", "kernel"):
            rule, what = (("opaque-producer", "an opaque op (run through JAX)")
                          if src.op == "opaque" else ("region-boundary", f"a {src.op} region"))
            return Refusal(rule, m.id, lambda: (
                f"{value(g, p.id)} is result {p.attrs['index']} of %{src.id}, {what}: no "
                f"kernel outside it computes it, so %{m.id} reads it from memory"))
    if p.op == "opaque":
        return Refusal("opaque-producer", m.id, lambda: (
            f"{value(g, p.id)} is opaque ({p.attrs.get('opcode', '?')}, run through JAX): "
            f"no kernel can hold it, so %{m.id} reads its result from memory"))
    if p.op in CONTROL_FLOW or p.op in ("loop", "kernel"):
        return Refusal("region-boundary", m.id, lambda: (
            f"{value(g, p.id)} is a {p.op} region: its body is fused inside it, and its "
            f"result is read by %{m.id} from memory"))
    if p.op == "constant":
        return Refusal("constant-array", m.id, lambda: (
            f"{value(g, p.id)} is a constant tensor: only scalar constants are copied into "
            f"kernels, so %{m.id} reads it from memory"))
    return Refusal("not-elementwise", m.id, lambda: (
        f"{value(g, p.id)} is neither elementwise nor a reduction: no loop kernel "
        f"computes it, so %{m.id} reads its result from memory"))


def users_refusal(g: Graph, p: Node, owner: Callable[[int], int | None], inside: set[int],
                  ) -> str:
    """The words for a producer whose value is read outside the group too; `owner(u)` is the
    kernel (root id) that user `u` ended in, or None."""
    users = list(dict.fromkeys(g.users[p.id]))
    out = [u for u in users if u not in inside]
    where = [f"%{u} (kernel %{k})" if (k := owner(u)) is not None else
             f"%{u} ({g[u].op}, in no kernel)" for u in out]
    kernels = len({owner(u) for u in out} - {None})
    among = f" in {kernels} other kernel{'s' if kernels != 1 else ''}" if kernels else ""
    return (f"{value(g, p.id)} has {len(users)} users, {len(out)} outside this kernel{among}: "
            f"{', '.join(where)}; fusing it would compute it twice or store it anyway")


def head_refusal(g: Graph, d: Node, m: Node, *, heads: bool, reduce: Node | None,
                 loop_shape: tuple[int, ...], epilogue_shape: tuple[int, ...],
                 head: Node | None, members: set[int], inside: set[int], taken: set[int],
                 is_const: Callable[[int], bool]) -> Refusal:
    """Why dot `d`, read by member `m`, is not the head of the group (fuse._head's tests,
    in its order)."""
    v = value(g, d.id)
    if not heads:
        return Refusal("dot-in-body", m.id, lambda: (
            f"{v} is a dot inside a loop or branch body: bodies keep their dots outside "
            f"kernels (a compiled loop calls BLAS itself)"))
    if reduce is not None:
        return Refusal("dot-not-head", m.id, lambda: (
            f"{v} is read by a kernel with a reduction (%{reduce.id}): a reduction never "
            f"takes a dot in, only an elementwise kernel does (output fusion)"))
    if loop_shape != epilogue_shape or d.shape != loop_shape:
        return Refusal("shape-mismatch", m.id, lambda: (
            f"dot {v} does not have the kernel's iteration space "
            f"{list(loop_shape)}: only a dot of that shape can head it"))
    if head is not None and head.id != d.id:
        return Refusal("dot-not-head", m.id, lambda: (
            f"{v} is a second dot: the kernel already has dot %{head.id} as its head, and a "
            f"kernel holds one"))
    if d.id in g.outputs:
        return Refusal("producer-is-output", m.id, lambda: (
            f"dot {v} is an output of the graph: its value is stored whole"))
    if d.id in taken:
        return Refusal("producer-in-other-kernel", m.id, lambda: (
            f"dot {v} already heads another kernel"))
    others = [u for u in dict.fromkeys(g.users[d.id]) if u not in members]
    if others:
        return Refusal("dot-not-head", m.id, lambda: (
            f"dot {v} has {len(set(g.users[d.id]))} readers, {len(others)} outside this "
            f"kernel ({', '.join(f'%{u}' for u in others)}): a dot heads a kernel only when "
            f"that kernel alone reads it"))
    within = [j for j in d.inputs if j in inside or is_const(j)]
    return Refusal("dot-not-head", m.id, lambda: (
        f"dot {v} reads {', '.join(f'%{j}' for j in within)}, which the kernel computes or "
        f"copies: a head dot's operands must be the kernel's inputs"))


__all__ = ["Refusal", "head_refusal", "op_refusal", "users_refusal", "value"]
