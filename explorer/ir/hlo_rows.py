"""Rows for modules imported from XLA's HLO text (frontend/hlo_graph.py): `opaque` keeps an HLO
instruction our table lacks (its opcode, its text and its declared type, so any module
renders), `tuple` builds the tuples that HLO passes around, and `call`, `while` and
`conditional` are region ops whose bodies are Graphs, like `kernel`.

They live in `explorer.ir`, not beside the HLO frontend, because an imported graph's printed
text must parse, verify and run with `explorer.ir` alone: `explorer.ir.ops` imports this
module last, so the table is complete whenever it is imported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from . import dtypes
from .control_ops import combine_bodies
from .graph import Attrs, TensorType, TupleType, Type
from .ops import OpDef, OpError, no_flops, register, tensor_type
from .region_ops import _region_infer, _region_ref, graph_flops, region_flops, region_result
from .traits import Emit, OpKind

# Ops whose operands may be tuples (infer_type checks that all other ops read tensors).
TUPLE_OPERANDS = frozenset({"opaque", "tuple", "call", "while", "conditional"})


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
# (frontend/jax.py), `impl` (ir/opaque.py): what every backend runs it with.
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
# FLOPs count one trip (ir/control_ops.combine_bodies): the trip count is a run-time value.
register(OpDef("while", OpKind.REGION, None, ("cond", "body"), _while_infer, _region_ref,
               lambda ins, out, a: combine_bodies("while", a, graph_flops), emit=Emit.REGION))


def _branch_arity(branches: Sequence[Any]) -> list[int]:
    return [len(b.params) for b in branches]


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


def _conditional_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    return combine_bodies("conditional", a, graph_flops)


# `conditional`: attrs branches (a tuple of Graphs). Inputs: the selector, then each branch's
# operands in branch order. A pred selector picks branches[1] when true (as select_n does);
# an i32 selector out of range picks the last branch (as XLA does).
register(OpDef("conditional", OpKind.REGION, None, ("branches",), _conditional_infer, _region_ref,
               _conditional_flops, emit=Emit.REGION))
