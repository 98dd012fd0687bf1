"""HLO opcode -> our ops: one small mapper per opcode, tried before an instruction is kept
as an opaque node.

A mapper appends the nodes that compute the instruction through an `Emitter`, which types
each node with the op table's own rule; the translator then checks the last node's type
against the type XLA declared. A mapper raises `Reject` when the instruction does not fit
(an attribute we do not model, a reduction computation that is not one binary op, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir.graph import Attrs, Literal, Node, Source, TensorType, TupleType, Type
from ..ir.ops import infer_type
from . import hlo_attrs as A
from .hlo import Computation, Instruction, Shape
from .hlo_names import ELEMENTWISE, REDUCERS


class Reject(Exception):
    """The mapping to our op does not fit this instruction: keep it opaque."""


@dataclass
class Scope:
    """The computation being translated."""

    comp: Computation
    nodes: list[Node] = field(default_factory=list)
    env: dict[str, int] = field(default_factory=dict)  # instruction name -> node id
    types: dict[int, Type] = field(default_factory=dict)
    exact: set[int] = field(default_factory=set)  # ids whose type is XLA's exactly
    shapes: dict[str, Shape] = field(default_factory=dict)
    consts: dict[str, np.ndarray] = field(default_factory=dict)

    def add(self, n: Node) -> int:
        self.nodes.append(n)
        self.types[n.id] = n.type
        return n.id


def default_layout(s: Shape) -> bool:
    return s.layout is None or s.layout == tuple(range(len(s.dims) - 1, -1, -1))


# Opcodes whose operands or result may be tuples; the others map only on tensors.
TUPLE_OPCODES = frozenset({"tuple", "get-tuple-element", "fusion", "call", "while",
                            "conditional"})


class Emitter:
    """Appends the nodes of one instruction's mapping; the last one takes its id."""

    def __init__(self, ids: Callable[[str], int], sc: Scope, key: str,
                 source: Source | None) -> None:
        self.ids, self.sc, self.key, self.source = ids, sc, key, source
        self.count = 0

    def __call__(self, op: str, inputs: Sequence[int], attrs: dict[str, Any] | None = None,
                 last: bool = True) -> int:
        a = Attrs(attrs or {})
        try:
            t = infer_type(op, [self.sc.types[i] for i in inputs], a)
        except Exception as e:  # the table's type rule rejects XLA's attributes: stay opaque
            raise Reject from e
        key = self.key if last else f"{self.key}#{self.count}"
        self.count += 1
        return self.sc.add(Node(self.ids(key), op, tuple(inputs), a, t, self.source))


# (translator, scope, instruction, input ids, declared type, emitter) -> node id
Mapper = Callable[[Any, "Scope", Instruction, list[int], Type, "Emitter"], int]
MAPPERS: dict[str, Mapper] = {}


def _need(ins: Instruction, key: str) -> Any:
    a = ins.attrs.get(key)
    if a is None:
        raise Reject
    return a


def _mapper(*opcodes: str) -> Callable[[Mapper], Mapper]:
    def register(fn: Mapper) -> Mapper:
        for op in opcodes:
            MAPPERS[op] = fn
        return fn

    return register


def _elementwise(tr, sc, ins, inputs, t, emit) -> int:
    op, attrs = ELEMENTWISE[ins.opcode]
    return emit(op, inputs, attrs)


for _op in ELEMENTWISE:
    MAPPERS[_op] = _elementwise


@_mapper("compare")
def _compare(tr, sc, ins, inputs, t, emit) -> int:
    direction = ins.attr("direction") or ""
    ops = {"EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge"}
    if direction not in ops or ins.attr("type") == "TOTALORDER":
        raise Reject
    return emit(ops[direction], inputs)


@_mapper("select")
def _select(tr, sc, ins, inputs, t, emit) -> int:
    if len(inputs) != 3:
        raise Reject
    pred, on_true, on_false = inputs
    return emit("select_n", [pred, on_false, on_true])  # select_n picks cases[pred]


@_mapper("convert")
def _convert(tr, sc, ins, inputs, t, emit) -> int:
    return emit("convert_element_type", inputs, {"new_dtype": t.dtype})


@_mapper("constant")
def _constant(tr, sc, ins, inputs, t, emit) -> int:
    value = A.literal(ins.payload, t.dtype, t.shape) if isinstance(t, TensorType) else None
    if value is None:
        raise Reject
    sc.consts[ins.name] = value
    return emit("constant", [], {"value": Literal(value, t.dtype)})


@_mapper("iota")
def _iota(tr, sc, ins, inputs, t, emit) -> int:
    dim = A.integer(tr.src, _need(ins, "iota_dimension"))
    return emit("iota", [], {"dtype": t.dtype, "shape": t.shape, "dimension": dim})


@_mapper("broadcast")
def _broadcast(tr, sc, ins, inputs, t, emit) -> int:
    dims = A.ints(tr.src, _need(ins, "dimensions"))
    return emit("broadcast_in_dim", inputs, {"shape": t.shape, "broadcast_dimensions": dims})


@_mapper("reshape", "bitcast")
def _reshape(tr, sc, ins, inputs, t, emit) -> int:
    if ins.opcode == "bitcast":  # a reshape only when no layout turns it into a transpose
        if not (default_layout(ins.shape) and default_layout(sc.shapes[ins.operands[0]])):
            raise Reject
    return emit("reshape", inputs, {"new_sizes": t.shape})


@_mapper("transpose")
def _transpose(tr, sc, ins, inputs, t, emit) -> int:
    return emit("transpose", inputs, {"permutation": A.ints(tr.src, _need(ins, "dimensions"))})


@_mapper("reverse")
def _reverse(tr, sc, ins, inputs, t, emit) -> int:
    return emit("rev", inputs, {"dimensions": A.ints(tr.src, _need(ins, "dimensions"))})


@_mapper("dot")
def _dot(tr, sc, ins, inputs, t, emit) -> int:
    def dims(key: str) -> tuple[int, ...]:
        a = ins.attrs.get(key)
        return A.ints(tr.src, a) if a else ()

    attrs: dict[str, Any] = {"dimension_numbers": (
        (dims("lhs_contracting_dims"), dims("rhs_contracting_dims")),
        (dims("lhs_batch_dims"), dims("rhs_batch_dims")))}
    if len(inputs) == 2 and sc.types[inputs[0]].dtype != t.dtype:  # type: ignore[union-attr]
        attrs["preferred_element_type"] = t.dtype
    return emit("dot_general", inputs, attrs)


@_mapper("slice")
def _slice(tr, sc, ins, inputs, t, emit) -> int:
    start, limit, strides = A.slices(tr.src, _need(ins, "slice"))
    return emit("slice", inputs, {"start_indices": start, "limit_indices": limit,
                                  "strides": strides})


@_mapper("dynamic-slice")
def _dynamic_slice(tr, sc, ins, inputs, t, emit) -> int:
    sizes = A.ints(tr.src, _need(ins, "dynamic_slice_sizes"))
    return emit("dynamic_slice", inputs, {"slice_sizes": sizes})


@_mapper("dynamic-update-slice")
def _dynamic_update_slice(tr, sc, ins, inputs, t, emit) -> int:
    return emit("dynamic_update_slice", inputs)


@_mapper("concatenate")
def _concatenate(tr, sc, ins, inputs, t, emit) -> int:
    dims = A.ints(tr.src, _need(ins, "dimensions"))
    if len(dims) != 1:
        raise Reject
    return emit("concatenate", inputs, {"dimension": dims[0]})


@_mapper("pad")
def _pad(tr, sc, ins, inputs, t, emit) -> int:
    return emit("pad", inputs, {"padding_config": A.padding(tr.src, _need(ins, "padding"))})


@_mapper("tuple")
def _tuple(tr, sc, ins, inputs, t, emit) -> int:
    return emit("tuple", inputs)


@_mapper("get-tuple-element")
def _gte(tr, sc, ins, inputs, t, emit) -> int:
    return emit("get_tuple_element", inputs, {"index": A.integer(tr.src, _need(ins, "index"))})


def _reduction(tr: Any, sc: Scope, ins: Instruction, inputs: list[int]) -> tuple[str, bool]:
    """The binary op of a one-operand reduction's computation, and whether its init value is
    that op's identity."""
    if len(inputs) != 2:
        raise Reject
    a = _need(ins, "to_apply")
    comp = tr.m.computations.get(A.name_ref(tr.src, a))
    if comp is None:
        raise A.error_at(tr.src, a.pos, f"unknown computation {a.text!r}")
    combiner = _combiner(comp)
    dtype = sc.types[inputs[0]].dtype  # type: ignore[union-attr]
    if combiner is None or (combiner in ("and", "or")) != (dtype == "pred"):
        raise Reject
    init = sc.consts.get(ins.operands[1])
    identity = init is not None and init.shape == () and _is_identity(init, REDUCERS[combiner][1])
    return combiner, identity


@_mapper("reduce")
def _reduce(tr, sc, ins, inputs, t, emit) -> int:
    """reduce(x, init) with a computation that is one add/multiply/maximum/... of its two
    parameters -> reduce_sum/...; an init that is not the identity is combined afterwards."""
    combiner, identity = _reduction(tr, sc, ins, inputs)
    reducer = REDUCERS[combiner][0]
    axes = A.ints(tr.src, _need(ins, "dimensions"))
    if identity:
        return emit(reducer, inputs[:1], {"axes": axes})
    reduced = emit(reducer, inputs[:1], {"axes": axes}, last=False)
    return emit(ELEMENTWISE[combiner][0], [reduced, inputs[1]])


_CUMULATIVE = {"add": "cumsum", "multiply": "cumprod", "maximum": "cummax", "minimum": "cummin"}


@_mapper("reduce-window")
def _reduce_window(tr, sc, ins, inputs, t, emit) -> int:
    """A window as long as one axis, padded on one side by that length minus one, is a
    cumulative reduction along the axis: how JAX lowers cumsum and its kin. Other windows
    (pooling, XLA's tree reductions) stay opaque."""
    combiner, identity = _reduction(tr, sc, ins, inputs)
    w = A.window(tr.src, _need(ins, "window"))
    rank = len(t.shape)
    size, pad = w.get("size", ()), w.get("pad", ((0, 0),) * rank)
    long = [k for k, n in enumerate(size) if n != 1]
    if (not identity or combiner not in _CUMULATIVE or set(w) - {"size", "pad", "stride"}
            or w.get("stride", (1,) * rank) != (1,) * rank or len(size) != rank
            or len(pad) != rank or len(long) != 1):
        raise Reject
    axis, n = long[0], t.shape[long[0]]
    if size[axis] != n or any(p != (0, 0) for k, p in enumerate(pad) if k != axis):
        raise Reject
    if pad[axis] not in ((n - 1, 0), (0, n - 1)):
        raise Reject
    return emit(_CUMULATIVE[combiner], inputs[:1], {"axis": axis, "reverse": pad[axis] != (n - 1, 0)})


def _combiner(comp: Computation) -> str | None:
    """The opcode of a reduction computation `(x, y) -> op(x, y)`, or None."""
    params = [i for i in comp.instructions if i.opcode == "parameter"]
    root = comp.root
    if len(params) != 2 or len(comp.instructions) != 3 or root.opcode not in REDUCERS:
        return None
    if sorted(root.operands) != sorted(p.name for p in params) or root.operands[0] == root.operands[1]:
        return None
    return root.opcode


def _is_identity(value: np.ndarray, identity: str) -> bool:
    v = value.item()
    if identity == "lowest":
        return bool(v == -np.inf or (value.dtype.kind in "iu" and v == np.iinfo(value.dtype).min))
    if identity == "highest":
        return bool(v == np.inf or (value.dtype.kind in "iu" and v == np.iinfo(value.dtype).max))
    return bool(v == {"zero": 0, "one": 1, "true": True, "false": False}[identity])


def _unpack(sc: Scope, value: int, emit: Emitter) -> list[int]:
    """A tuple value -> one get_tuple_element per element (regions take separate values)."""
    t = sc.types[value]
    if not isinstance(t, TupleType):
        return [value]
    return [emit("get_tuple_element", [value], {"index": j}, last=False)
            for j in range(len(t.elements))]


def _region(emit: Emitter, op: str, inputs: list[int], attrs: dict[str, Any], t: Type) -> int:
    """A region op; a one-element tuple result is rebuilt, since a region with one output
    yields that value itself."""
    if isinstance(t, TupleType) and len(t.elements) == 1:
        return emit("tuple", [emit(op, inputs, attrs, last=False)])
    return emit(op, inputs, attrs)


@_mapper("fusion")
def _fusion(tr, sc, ins, inputs, t, emit) -> int:
    body = tr.called(ins, "calls")
    return _region(emit, "kernel", inputs, {"body": body, "kind": ins.attr("kind") or ""}, t)


@_mapper("call")
def _call(tr, sc, ins, inputs, t, emit) -> int:
    body = tr.called(ins, "to_apply")
    return _region(emit, "call", [v for i in inputs for v in _unpack(sc, i, emit)],
                   {"body": body}, t)


@_mapper("while")
def _while(tr, sc, ins, inputs, t, emit) -> int:
    cond, body = tr.called(ins, "condition"), tr.called(ins, "body")
    if len(inputs) != 1:
        raise Reject
    return _region(emit, "while", _unpack(sc, inputs[0], emit), {"cond": cond, "body": body}, t)


@_mapper("conditional")
def _conditional(tr, sc, ins, inputs, t, emit) -> int:
    if "branch_computations" in ins.attrs:
        a = ins.attrs["branch_computations"]
        branches = [tr.graph_named(n, a.pos) for n in A.name_refs(tr.src, a)]
        operands = inputs[1:]
    else:  # pred form: conditional(p, true_operand, false_operand); ours: (false, true)
        branches = [tr.called(ins, "false_computation"), tr.called(ins, "true_computation")]
        operands = inputs[2:3] + inputs[1:2]
    if not inputs or len(operands) != len(branches):
        raise Reject
    flat = [v for i in operands for v in _unpack(sc, i, emit)]
    return _region(emit, "conditional", [inputs[0], *flat], {"branches": tuple(branches)}, t)
