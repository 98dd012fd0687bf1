"""Control flow as region ops: the `scan` row (JAX's scan: RNNs, `fori_loop` with static
bounds, the transposed loops of their gradients), and the facts about region bodies that
passes, planners and costs read: which attributes hold bodies, which regions' bodies are the
user's own program (passes run inside them), and how a region's cost follows from its bodies'.

`while` and `conditional` (ir/hlo_rows.py) carry JAX's `while_loop` and `cond`/`switch` too:
the frontend (frontend/jax_control.py) passes a JAX while's constants as loop state that the
body returns unchanged, as XLA does, and gives every branch of a `cond` its own copy of the
shared operands.

    %r = (f32[3], f32[5]) scan(%W, %h0, %xs) {length=5, reverse=false, num_consts=1,
                                              num_carry=1, body=graph @step {...}}

Inputs: `num_consts` constants, `num_carry` initial carries, then the scanned inputs (`xs`),
each with `length` rows along axis 0. The body's parameters are the constants, the carries and
one row of each scanned input; its outputs are the new carries (same types) and one row of each
stacked output. Results: the final carries, then the stacked outputs (`length` rows each;
row i is iteration i's, also when `reverse` runs the iterations from the last row down).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .graph import Attrs, Graph, Node, TensorType, TupleType, Type
from .ops import OpDef, OpError, register
from .region_ops import _region_ref, combine_bodies, graph_flops
from .traits import Emit, OpKind

# Region ops whose bodies are the user's program, which passes rewrite in place (a pass's
# results inside a body are the body's), as opposed to the bodies passes build: a fused
# `kernel`'s and a split `loop`'s.
CONTROL_FLOW = frozenset({"while", "conditional", "scan", "call"})

BodyKey = tuple[str, int | None]  # (attribute, index in a tuple of bodies or None)


def bodies(n: Node) -> list[tuple[BodyKey, Graph]]:
    """The graph bodies in `n`'s attributes, in attribute order: a Graph, or a tuple of them
    (a conditional's branches)."""
    out: list[tuple[BodyKey, Graph]] = []
    for key, v in n.attrs.items():
        if isinstance(v, Graph):
            out.append(((key, None), v))
        elif isinstance(v, tuple) and v and all(isinstance(x, Graph) for x in v):
            out += [((key, k), x) for k, x in enumerate(v)]
    return out


def with_bodies(n: Node, new: Mapping[BodyKey, Graph]) -> Node:
    """`n` with some of its bodies replaced (keys as `bodies` gives them)."""
    changes: dict[str, object] = {}
    for (key, index), g in new.items():
        if index is None:
            changes[key] = g
        else:
            old = list(changes.get(key, n.attrs[key]))  # type: ignore[call-overload]
            old[index] = g
            changes[key] = tuple(old)
    return Node(n.id, n.op, n.inputs, n.attrs.replace(**changes), n.type, n.source)


def body_path(n: Node, key: BodyKey) -> str:
    """'%7.body' or '%7.branches[1]': where a body sits, for logs and messages."""
    attr, index = key
    return f"%{n.id}.{attr}" + ("" if index is None else f"[{index}]")


def region_flops(ins: Sequence[TensorType], out: Type, a: Attrs, op: str) -> int:
    return combine_bodies(op, a, graph_flops)


# ---------------------------------------------------------------- scan


def scan_groups(ts: Sequence[object], a: Mapping[str, object]) -> tuple[list, list, list]:
    """(constants, carries, scanned inputs) of a scan's inputs."""
    nc, nk = a["num_consts"], a["num_carry"]
    if not (isinstance(nc, int) and isinstance(nk, int) and nc >= 0 and nk >= 0
            and nc + nk <= len(ts)):
        raise OpError(f"scan: num_consts={nc} and num_carry={nk} do not fit {len(ts)} inputs")
    return list(ts[:nc]), list(ts[nc:nc + nk]), list(ts[nc + nk:])


def _scan_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    length, body = a["length"], a["body"]
    if not isinstance(length, int) or length < 0:
        raise OpError(f"scan: length must be a whole number, got {length!r}")
    if not isinstance(a["reverse"], bool):
        raise OpError(f"scan: reverse must be true or false, got {a['reverse']!r}")
    consts, carry, xs = scan_groups(ts, a)
    for x in xs:
        if x.rank == 0 or x.shape[0] != length:
            raise OpError(f"scan: scanned input {x} has no leading axis of length {length}")
    want = [*consts, *carry, *(TensorType(x.shape[1:], x.dtype) for x in xs)]
    have = [p.type for p in body.param_nodes]
    if have != want:
        raise OpError(f"scan: the body's parameters {', '.join(map(str, have))} do not match "
                      f"its constants, carries and one row of each scanned input "
                      f"{', '.join(map(str, want))}")
    outs = [body[o].type for o in body.outputs]
    if outs[:len(carry)] != carry or not all(isinstance(t, TensorType) for t in outs):
        raise OpError(f"scan: the body's first results {', '.join(map(str, outs[:len(carry)]))} "
                      f"do not match its carries {', '.join(map(str, carry))}")
    ys = [TensorType((length, *y.shape), y.dtype) for y in outs[len(carry):]]  # type: ignore[union-attr]
    results = [*carry, *ys]
    return results[0] if len(results) == 1 else TupleType(tuple(results))


register(OpDef("scan", OpKind.REGION, None, ("length", "reverse", "num_consts", "num_carry", "body"),
               _scan_infer, _region_ref, lambda ins, out, a: region_flops(ins, out, a, "scan"),
               emit=Emit.REGION))
