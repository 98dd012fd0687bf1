"""Region ops, whose attributes carry graph bodies: `kernel` (a fused kernel) and `loop` (a
map-reduce loop over chunks of one dimension), with the helpers that type and cost bodies.

A region op carries a `body` Graph: its inputs bind the body's parameters in order and its
result is the body's output (a tuple when there are several). The reference interpreter
evaluates bodies recursively (backends/reference.py); here they are only typed and costed.
These rows join the op table when `explorer.ir.ops` is imported (it imports this module last).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import dtypes
from .graph import Attrs, Graph, TensorType, TupleType, Type
from .ops import OPS, OpDef, OpError, register, tensor_type
from .traits import MONOIDS, Emit, OpKind


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


def _loop_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    return combine_bodies("loop", a, graph_flops)


register(OpDef("loop", OpKind.REGION, None, ("size", "chunk", "split_inputs", "combine", "body", "tail"),
               _loop_infer, _region_ref, _loop_flops, optional=("tail",),
               emit=Emit.INTERPRETED))
