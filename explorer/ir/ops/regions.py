"""Region ops, whose attributes carry graph bodies, of every origin: `kernel` (a fused kernel:
our fuse pass's, and XLA's fusion computations), `loop` (the split pass's map-reduce loop over
chunks of one dimension), `scan` (JAX's scan), `call`, `while` and `conditional` (HLO's, and
JAX's `while_loop` and `cond`/`switch`); and the other rows of imported HLO: `opaque` (an HLO
instruction or JAX primitive the table lacks) and `tuple`. With them, the facts about bodies
that passes, planners and costs read: which attributes hold bodies (`bodies`), which regions'
bodies are the user's own program (`CONTROL_FLOW`), and how a region's cost follows from its
bodies' (`combine_bodies`).

A region op carries a `body` Graph (a while also a `cond`, a conditional a tuple of
`branches`): its inputs bind the body's parameters in order and its result is the body's output
(a tuple when there are several). The reference interpreter evaluates bodies recursively
(backends/reference.py); here they are only typed and costed.

The frontend (frontend/jax_control.py) passes a JAX while's constants as loop state that the
body returns unchanged, as XLA does, and gives every branch of a `cond` its own copy of the
shared operands. They live in `explorer.ir`, not beside the HLO frontend, because an imported
graph's printed text must parse, verify and run with `explorer.ir` alone.

    %r = (f32[3], f32[5]) scan(%W, %h0, %xs) {length=5, reverse=false, num_consts=1,
                                              num_carry=1, body=graph @step {...}}

A scan's inputs: `num_consts` constants, `num_carry` initial carries, then the scanned inputs
(`xs`), each with `length` rows along axis 0. The body's parameters are the constants, the
carries and one row of each scanned input; its outputs are the new carries (same types) and one
row of each stacked output. Results: the final carries, then the stacked outputs (`length` rows
each; row i is iteration i's, also when `reverse` runs the iterations from the last row down).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import dtypes
from ..graph import Attrs, Graph, Node, TensorType, TupleType, Type
from ..traits import MONOIDS, Emit, OpKind
from .table import OPS, Flops, OpDef, OpError, no_flops, register, tensor_type


def region_result(body: Any) -> Type:
    outs = [body[o].type for o in body.outputs]
    return outs[0] if len(outs) == 1 else TupleType(tuple(outs))


def _region_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    body = a["body"]
    want = [p.type for p in body.param_nodes]
    if list(ts) != want:
        raise OpError(f"region inputs {', '.join(map(str, ts))} do not match its body's "
                      f"parameters {', '.join(map(str, want))}")
    return region_result(body)


def graph_flops(body: Any) -> int:
    """The FLOPs of one run of a graph (a region's body), nested regions included."""
    total = 0
    for n in body.nodes:
        if OPS[n.op].kind != OpKind.SOURCE:
            total += OPS[n.op].flops([body[i].type for i in n.inputs], n.type, n.attrs)
    return total


def region_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    """The FLOP rule of a region run once (a kernel, a call): its body's FLOPs."""
    return graph_flops(a["body"])


def _region_ref(*args: Any, **attrs: Any) -> Any:
    raise OpError("region bodies are evaluated by the interpreter, not by a NumPy reference")


# `kernel`: a fused kernel (our fuse pass, and XLA's fusion computations). attrs: body, and
# `kind` ("loop" | "input" | "output" | XLA's kind name).
register(OpDef("kernel", OpKind.REGION, None, ("body",), _region_infer, _region_ref, region_flops,
               emit=Emit.REGION))


# ---------------------------------------------------------------- loop
# `loop`: a map-reduce loop over chunks of one dimension, written by the split pass so that a
# program whose intermediates are too large runs chunk by chunk under a memory limit.
#
#   %r = f64[N] loop(%x, %y, %v) {size=N, chunk=C, split_inputs=((0, 0),),
#                                 combine=(("concat", 0),), body=graph @body {...}}
#
# Iteration space: `size` positions of the split dimension, taken `chunk` at a time
# (iteration i covers [i*chunk, min((i+1)*chunk, size))).
# Inputs: `split_inputs` lists (input index, axis) pairs; such an input has `size` elements
#   along `axis` and each iteration sees only that iteration's slice of them (a view). Inputs
#   not listed are passed whole to every iteration.
# Bodies: `body` is a Graph with one parameter per loop input (in order), typed for a full
#   chunk. When `chunk` does not divide `size`, the optional `tail` Graph (same parameters,
#   typed for the `size % chunk` remainder) runs for the last iteration; it is present exactly
#   when there is a remainder. A body may have several outputs; the loop then has a tuple type.
# Combining, one spec per body output (`combine`), giving the loop's k-th result:
#   ("concat", axis)  chunk results are slices of the result along `axis` (size `chunk` in
#                     the body, `size` in the result): iteration i writes its slice.
#   ("add",) ("mul",) ("max",) ("min",) ("and",) ("or",)
#                     the result accumulates the chunks' results elementwise (same type).
#   ("top_k", axis)   the chunk result holds the chunk's top k values along `axis` (k = the
#                     body result's size there, which the result keeps; a shorter tail
#                     result is allowed); the running top k is merged with them.
#   ("index", j)      indices along the split dimension local to the chunk (0 = the chunk's
#                     first position); the loop adds the chunk's start. They follow output j,
#                     whose combine is max or min (argmax/argmin: the chunk's entry replaces
#                     the running one where its value is strictly better, or NaN over a
#                     number, so ties keep the first occurrence, as argmax does) or top_k (the
#                     indices move with their values; ties keep lower indices first).
# The reference interpreter (backends/reference.py) runs it chunk by chunk; its planned peak
# (analysis/memory.py) is its result buffers plus one iteration's temporaries.

# The combines that accumulate chunk results elementwise: one per monoid.
LOOP_ACCUMULATE = tuple(MONOIDS)


def loop_param_types(ins: Sequence[TensorType], a: Attrs, rows: int) -> list[TensorType]:
    """The body parameter types for an iteration of `rows` positions."""
    out = list(ins)
    for k, axis in a["split_inputs"]:
        if not 0 <= k < len(ins) or not 0 <= axis < ins[k].rank:
            raise OpError(f"loop: split input ({k}, {axis}) does not exist")
        if ins[k].shape[axis] != a["size"]:
            raise OpError(f"loop: input {k} ({ins[k]}) has no dimension of size {a['size']} "
                          f"at axis {axis}")
        out[k] = TensorType(tuple(rows if i == axis else d for i, d in enumerate(ins[k].shape)),
                            ins[k].dtype)
    return out


def _loop_result(k: int, spec: tuple, outs: Sequence[TensorType], tail: Sequence[TensorType] | None,
                 size: int, chunk: int, rem: int) -> TensorType:
    t = outs[k]
    kind = spec[0] if spec else None
    if kind == "concat":
        axis = spec[1]
        if not 0 <= axis < t.rank or t.shape[axis] != chunk:
            raise OpError(f"loop: output {k} ({t}) has no chunk-sized axis {axis} to concat")
        if tail is not None and tail[k].shape != tuple(rem if i == axis else d
                                                       for i, d in enumerate(t.shape)):
            raise OpError(f"loop: tail output {k} ({tail[k]}) does not fit {t}")
        return TensorType(tuple(size if i == axis else d for i, d in enumerate(t.shape)), t.dtype)
    if kind in LOOP_ACCUMULATE and len(spec) == 1:
        if tail is not None and tail[k] != t:
            raise OpError(f"loop: tail output {k} ({tail[k]}) differs from {t}")
        return t
    if kind == "top_k" and len(spec) == 2 and 0 <= spec[1] < t.rank:
        if tail is not None and (tail[k].dtype != t.dtype or tail[k].rank != t.rank):
            raise OpError(f"loop: tail output {k} ({tail[k]}) does not fit {t}")
        return t
    if kind == "index" and len(spec) == 2 and 0 <= spec[1] < len(outs) and spec[1] != k:
        partner = outs[spec[1]]
        if partner.shape != t.shape or not dtypes.is_int(t.dtype):
            raise OpError(f"loop: index output {k} ({t}) does not match output {spec[1]} "
                          f"({partner})")
        return t
    raise OpError(f"loop: bad combine spec {spec!r} for output {k}")


def _loop_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    size, chunk, body = a["size"], a["chunk"], a["body"]
    if not (isinstance(size, int) and isinstance(chunk, int) and 0 < chunk <= size):
        raise OpError(f"loop: need 0 < chunk <= size, got chunk={chunk}, size={size}")
    rem = size % chunk
    tail = a.get("tail")
    if (tail is not None) != (rem != 0):
        raise OpError(f"loop: a tail body is needed exactly when chunk ({chunk}) does not "
                      f"divide size ({size})")
    for g, rows, what in ((body, chunk, "body"), (tail, rem, "tail")):
        if g is None:
            continue
        want = loop_param_types(ts, a, rows)
        have = [p.type for p in g.param_nodes]
        if have != want:
            raise OpError(f"loop: the {what}'s parameters {', '.join(map(str, have))} do not "
                          f"match its inputs sliced to {rows}: {', '.join(map(str, want))}")
    outs = [tensor_type(body[o].type, "loop body output") for o in body.outputs]
    touts = None if tail is None else [tensor_type(tail[o].type, "tail output") for o in tail.outputs]
    specs = tuple(a["combine"])
    if len(specs) != len(outs) or (touts is not None and len(touts) != len(outs)):
        raise OpError(f"loop: {len(specs)} combine specs for {len(outs)} body outputs")
    results = [_loop_result(k, tuple(s), outs, touts, size, chunk, rem) for k, s in enumerate(specs)]
    for k, s in enumerate(specs):
        if s[0] == "index" and tuple(specs[s[1]])[0] not in ("max", "min", "top_k"):
            raise OpError(f"loop: index output {k} follows output {s[1]}, which is not "
                          f"combined by max, min or top_k")
    return results[0] if len(results) == 1 else TupleType(tuple(results))


def combine_bodies(op: str, attrs: Mapping[str, object], per_body: Callable[[Graph], int]) -> int:
    """A control-flow region's cost from its bodies' costs: a scan runs its body `length`
    times; a conditional runs one branch (the dearest is counted); a while runs a trip count
    known only at run time, so one trip (condition and body) is counted; a call its body; a
    split loop its body once per whole chunk and its tail body once."""
    if op == "loop":
        total = int(attrs["size"]) // int(attrs["chunk"]) * per_body(attrs["body"])  # type: ignore[arg-type, call-overload]
        tail = attrs.get("tail")
        return total + (per_body(tail) if isinstance(tail, Graph) else 0)
    if op == "scan":
        return int(attrs["length"]) * per_body(attrs["body"])  # type: ignore[arg-type, call-overload]
    if op == "conditional":
        return max(per_body(b) for b in attrs["branches"])  # type: ignore[attr-defined]
    return sum(per_body(g) for k in ("cond", "body") if isinstance(g := attrs.get(k), Graph))


def bodies_flops(op: str) -> Flops:
    """The FLOP rule of region op `op`: its bodies' FLOPs, combined as `combine_bodies` says."""
    return lambda ins, out, a: combine_bodies(op, a, graph_flops)


register(OpDef("loop", OpKind.REGION, None, ("size", "chunk", "split_inputs", "combine", "body", "tail"),
               _loop_infer, _region_ref, bodies_flops("loop"), optional=("tail",),
               emit=Emit.INTERPRETED))


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
               _scan_infer, _region_ref, bodies_flops("scan"),
               emit=Emit.REGION))


# ---------------------------------------------------------------- imported from HLO


def type_from_text(text: str) -> Type:
    """'f32[3,4]' or '(f32[3], i32[])' -> the type; the inverse of str(type)."""
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        inner = text[1:-1].strip()
        parts = [type_from_text(p) for p in inner.split(", ")] if inner else []
        if not all(isinstance(p, TensorType) for p in parts):
            raise OpError(f"nested tuple type {text!r}")
        return TupleType(tuple(parts))  # type: ignore[arg-type]
    m = re.fullmatch(r"(\w+)\[([\d,]*)\]", text)
    if m is None or m.group(1) not in dtypes.NAMES:
        raise OpError(f"bad type {text!r}")
    return TensorType(tuple(int(d) for d in m.group(2).split(",") if d), m.group(1))


def _opaque_ref(*args: Any, opcode: str = "?", impl: Any = None, **attrs: Any) -> Any:
    if impl is None:
        raise OpError(f"HLO op {opcode!r} was imported as an opaque node and cannot be evaluated")
    return impl(*args)


def _opaque_jax(*args: Any, opcode: str = "?", impl: Any = None, **attrs: Any) -> Any:
    if impl is None:
        raise OpError(f"HLO op {opcode!r} was imported as an opaque node and has no JAX lowering")
    return impl.bind(*args)


# attrs: opcode (HLO's or JAX's primitive name), text (the instruction as XLA printed it, or
# the primitive's parameters), type (our type's text) and, for a JAX primitive without a row
# (frontend/jaxpr.py), `impl` (ir/opaque.py): what every backend runs it with.
register(OpDef("opaque", OpKind.OTHER, None, ("opcode", "text", "type", "impl"),
               lambda ts, a: type_from_text(a["type"]), _opaque_ref, no_flops, _opaque_jax,
               optional=("impl",)))
register(OpDef("tuple", OpKind.SHAPE, None, (),
               lambda ts, a: TupleType(tuple(tensor_type(t, "tuple element") for t in ts)),
               lambda *xs: tuple(xs), no_flops))

# `call`: a call of another computation (HLO's call; attrs: body).
register(OpDef("call", OpKind.REGION, None, ("body",), _region_infer, _region_ref, region_flops,
               emit=Emit.REGION))


def _while_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    cond, body = a["cond"], a["body"]
    for g, what in ((cond, "condition"), (body, "body")):
        if [p.type for p in g.param_nodes] != list(ts):
            raise OpError(f"while: the {what}'s parameters do not match its inputs "
                          f"{', '.join(map(str, ts))}")
    if [cond[o].type for o in cond.outputs] != [TensorType((), "pred")]:
        raise OpError("while: the condition must return one pred[]")
    if [body[o].type for o in body.outputs] != list(ts):
        raise OpError("while: the body's results do not match its inputs")
    return region_result(body)


# `while`: attrs cond, body (Graphs over the loop state, one parameter per state element).
# FLOPs count one trip (combine_bodies): the trip count is a run-time value.
register(OpDef("while", OpKind.REGION, None, ("cond", "body"), _while_infer, _region_ref,
               bodies_flops("while"), emit=Emit.REGION))


def _conditional_infer(ts: Sequence[TensorType], a: Attrs) -> Type:
    branches = tuple(a["branches"])
    if not branches or not ts or ts[0].shape != () or ts[0].dtype not in ("pred", "i32"):
        raise OpError("conditional: needs branches and a pred[] or i32[] selector")
    if ts[0].dtype == "pred" and len(branches) != 2:
        raise OpError("conditional: a pred selector needs exactly two branches")
    operands, k = list(ts[1:]), 0
    for b in branches:
        want = [p.type for p in b.param_nodes]
        if operands[k:k + len(want)] != want:
            raise OpError("conditional: a branch's parameters do not match its operands")
        k += len(want)
    results = {region_result(b) for b in branches}
    if k != len(operands) or len(results) != 1:
        raise OpError("conditional: operands left over, or branches of different types")
    return results.pop()


# `conditional`: attrs branches (a tuple of Graphs). Inputs: the selector, then each branch's
# operands in branch order. A pred selector picks branches[1] when true (as select_n does);
# an i32 selector out of range picks the last branch (as XLA does).
register(OpDef("conditional", OpKind.REGION, None, ("branches",), _conditional_infer, _region_ref,
               bodies_flops("conditional"), emit=Emit.REGION))
