"""HLO syntax tree -> our Graph: the entry computation, with called computations as regions.

HLO ops map to our ops where the semantics match (multiply -> mul, broadcast ->
broadcast_in_dim, reduce with an add computation -> reduce_sum, select -> select_n with its
cases swapped, ...). Each mapping is checked against the op table's own type rule and the type
XLA declared; anything that does not fit, and every op our table lacks, becomes an `opaque`
node that keeps XLA's opcode, its text and its declared type, so every module imports and
verifies. The collectives and SPMD instructions of partitioned modules are such opaque nodes,
named by their opcode and carrying their communication attributes and XLA's sharding
(hlo_spmd); parameters carry their sharding too. Fusions become `kernel` regions, calls
`call`, loops `while`, branches `conditional`; tuples that HLO passes into and out of
computations are flattened into separate values.

Node ids come from a `NodeIds` table keyed by instruction name: the stages of one XLA pipeline
share it, so an instruction keeps its id from pass to pass and the viewer diffs by id.
"""

from __future__ import annotations

import os
import re

from ..ir import dtypes
from ..ir.graph import Attrs, Graph, Node, Source, TensorType, TupleType, Type
from . import hlo_attrs as A
from .hlo import Computation, HloModule, Instruction, Shape, parse_hlo
from .hlo_names import sanitize
from .hlo_ops import MAPPERS, TUPLE_OPCODES, Emitter, Reject, Scope
from .hlo_spmd import leaf_shardings, sharding, spmd_attrs
from .locations import display_file  # a notebook cell's file reads In[N], as in traced graphs

__all__ = ["NodeIds", "from_hlo", "module_to_graph"]


class NodeIds:
    """Instruction key -> node id, handed out in first-seen order."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def __call__(self, key: str) -> int:
        return self._ids.setdefault(key, len(self._ids))

    def get(self, key: str) -> int | None:
        """The id already handed out for `key`, if any."""
        return self._ids.get(key)


def from_hlo(text: str, ids: NodeIds | None = None) -> Graph:
    """The entry computation of an HLO module (text from any XLA frontend) as a Graph."""
    return module_to_graph(parse_hlo(text), ids)


def module_to_graph(module: HloModule, ids: NodeIds | None = None) -> Graph:
    return _Translator(module, ids or NodeIds()).graph(module.entry)

_HLO_DTYPES = {"s4": "i4", "s8": "i8", "s16": "i16", "s32": "i32", "s64": "i64"}


def convert_shape(s: Shape) -> tuple[Type, bool]:
    """Our type for an HLO shape, and whether it is exact. Tokens, element types we lack,
    dynamic dimensions and nested tuples get a stand-in (the opaque text keeps the truth)."""
    if s.elements is None:
        dt = _HLO_DTYPES.get(s.dtype, s.dtype)
        if dt in dtypes.NAMES:
            return TensorType(s.dims, dt), not s.dynamic
        return TensorType(() if s.dtype == "token" else s.dims, "u8" if s.dtype != "token"
                          else "pred"), False
    leaves: list[TensorType] = []
    exact = True
    for e in s.elements:
        t, ok = convert_shape(e)
        exact = exact and ok and isinstance(t, TensorType)
        leaves.extend(t.elements if isinstance(t, TupleType) else (t,))
    return TupleType(tuple(leaves)), exact


# Computations calling computations deeper than this are refused (Python's stack is finite).
MAX_NESTING = 64


class _Translator:
    def __init__(self, module: HloModule, ids: NodeIds) -> None:
        self.m = module
        self.src = module.text
        self.ids = ids
        self.graphs: dict[str, Graph] = {}
        self.active: list[str] = []

    # ---------------------------------------------------------------- computations

    def called(self, ins: Instruction, key: str) -> Graph:
        a = ins.attrs.get(key)
        if a is None:
            raise Reject
        return self.graph_named(A.name_ref(self.src, a), a.pos)

    def graph_named(self, name: str, pos: int) -> Graph:
        comp = self.m.computations.get(name)
        if comp is None:
            raise A.error_at(self.src, pos, f"unknown computation {name!r}")
        return self.graph(comp)

    def graph(self, comp: Computation) -> Graph:
        if comp.name in self.graphs:
            return self.graphs[comp.name]
        if comp.name in self.active:
            raise A.error_at(self.src, comp.pos, f"computation {comp.name!r} calls itself")
        if len(self.active) >= MAX_NESTING:
            raise A.error_at(self.src, comp.pos, f"computations nest deeper than {MAX_NESTING}")
        self.active.append(comp.name)
        try:
            g = self._translate(comp)
        finally:
            self.active.pop()
        self.graphs[comp.name] = g
        return g

    def key(self, sc: Scope, name: str) -> str:
        return name if sc.comp.is_entry else f"{sc.comp.name}/{name}"

    def _translate(self, comp: Computation) -> Graph:
        sc = Scope(comp)
        flat_index = self._parameter_indices(comp)
        params: list[tuple[int, int]] = []
        for ins in _topological(self.src, comp):
            sc.shapes[ins.name] = ins.shape
            source = self.source(ins)
            if ins.opcode == "parameter":
                params += self.parameter(sc, ins, flat_index[ins.name], source)
            else:
                self.instruction(sc, ins, source)
        outputs = self.outputs(sc, comp.root)
        params.sort()
        return Graph(sc.nodes, [p for _, p in params], outputs, sanitize(comp.name))

    def _parameter_indices(self, comp: Computation) -> dict[str, int]:
        """Parameter name -> the index of its first flattened parameter."""
        numbered: dict[int, Instruction] = {}
        for ins in comp.instructions:
            if ins.opcode == "parameter":
                if not re.fullmatch("[0-9]+", ins.payload) or int(ins.payload) in numbered:
                    raise A.error_at(self.src, ins.pos, f"bad parameter number {ins.payload!r}")
                numbered[int(ins.payload)] = ins
        if sorted(numbered) != list(range(len(numbered))):
            raise A.error_at(self.src, comp.pos, f"computation {comp.name!r} has parameter "
                             f"numbers {sorted(numbered)}, not 0..{len(numbered) - 1}")
        out, k = {}, 0
        for n in range(len(numbered)):
            ins = numbered[n]
            out[ins.name] = k
            t, _ = convert_shape(ins.shape)
            k += len(t.elements) if isinstance(t, TupleType) else 1
        return out

    def parameter(self, sc: Scope, ins: Instruction, index: int,
                  source: Source | None) -> list[tuple[int, int]]:
        t, exact = convert_shape(ins.shape)
        key = self.key(sc, ins.name)
        if isinstance(t, TensorType):
            nid = sc.add(Node(self.ids(key), "parameter", (), Attrs(
                {"index": index, "name": ins.name, **sharding(ins)}), t, source))
            self.bind(sc, ins, nid, exact)
            return [(index, nid)]
        leaves = []
        shardings = leaf_shardings(ins, len(t.elements))
        for j, leaf in enumerate(t.elements):  # a tuple parameter: one parameter per element
            leaves.append(sc.add(Node(self.ids(f"{key}#{j}"), "parameter", (), Attrs(
                {"index": index + j, "name": f"{ins.name}.{j}", **shardings[j]}), leaf, source)))
            sc.exact.add(leaves[-1])
        if exact:
            nid = sc.add(Node(self.ids(key), "tuple", tuple(leaves), Attrs(), t, source))
        else:
            nid = sc.add(self.opaque(sc, ins, tuple(leaves), t, source))
        self.bind(sc, ins, nid, exact)
        return [(index + j, leaf) for j, leaf in enumerate(leaves)]

    def outputs(self, sc: Scope, root: Instruction) -> list[int]:
        """The root's value; a tuple root gives one output per element."""
        rid = sc.env[root.name]
        t = sc.types[rid]
        if not isinstance(t, TupleType):
            return [rid]
        k = next(k for k, n in enumerate(sc.nodes) if n.id == rid)
        node = sc.nodes[k]
        if node.op == "tuple" and not any(rid in n.inputs for n in sc.nodes):
            del sc.nodes[k]  # read by nobody: its elements are the outputs
            return list(node.inputs)
        return [sc.add(Node(self.ids(f"{self.key(sc, root.name)}#out{j}"), "get_tuple_element",
                            (rid,), Attrs({"index": j}), e, None))
                for j, e in enumerate(t.elements)]

    def bind(self, sc: Scope, ins: Instruction, nid: int, exact: bool) -> None:
        sc.env[ins.name] = nid
        if exact:
            sc.exact.add(nid)

    def source(self, ins: Instruction) -> Source | None:
        meta = ins.attrs.get("metadata")
        if meta is None:
            return None
        md = A.metadata(self.src, meta)
        op_name = str(md.get("op_name", ""))
        if "source_file" in md and isinstance(md.get("source_line"), int):
            return _users(Source(display_file(str(md["source_file"])), int(md["source_line"]),
                                 op_name), str(md["source_file"]))
        frame = md.get("stack_frame_id")
        loc = self.m.file_locations.get(self.m.stack_frames.get(frame, -1)) if isinstance(
            frame, int) else None
        if loc is None or loc[0] not in self.m.file_names:
            return None
        file = self.m.file_names[loc[0]]
        return _users(Source(display_file(file), loc[2],
                             self.m.function_names.get(loc[1], op_name)), file)

    # ---------------------------------------------------------------- instructions

    def instruction(self, sc: Scope, ins: Instruction, source: Source | None) -> None:
        t, exact = convert_shape(ins.shape)
        inputs = [sc.env[o] for o in ins.operands]
        mapper = MAPPERS.get(ins.opcode)
        start = len(sc.nodes)
        tensors = isinstance(t, TensorType) and all(
            isinstance(sc.types[i], TensorType) for i in inputs)
        if (mapper is not None and exact and all(i in sc.exact for i in inputs)
                and (tensors or ins.opcode in TUPLE_OPCODES)):
            emit = Emitter(self.ids, sc, self.key(sc, ins.name), source)
            try:
                nid = mapper(self, sc, ins, inputs, t, emit)
                if sc.types[nid] != t or sc.nodes[-1].id != nid:
                    raise Reject
                self.bind(sc, ins, nid, True)
                return
            except Reject:
                del sc.nodes[start:]
        nid = sc.add(self.opaque(sc, ins, tuple(inputs), t, source))
        self.bind(sc, ins, nid, exact)
        if ins.opcode == "constant":
            lit = None if ins.shape.is_tuple else A.literal(ins.payload, ins.shape.dtype,
                                                             ins.shape.dims)
            if lit is not None:
                sc.consts[ins.name] = lit

    def opaque(self, sc: Scope, ins: Instruction, inputs: tuple[int, ...], t: Type,
               source: Source | None) -> Node:
        attrs = Attrs({"opcode": ins.opcode, "text": ins.text, "type": str(t),
                       **spmd_attrs(self.m, ins)})
        return Node(self.ids(self.key(sc, ins.name)), "opaque", inputs, attrs, t, source)


# The explorer's own lowering code: an instruction JAX located there (a shard_map's boundary,
# a jitted function's result sharding, traced while xla_pipeline lowers the function) has no
# line of the user's, and gets none rather than ours.
_OWN = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), d, "")
             for d in ("xla", "frontend"))


def _users(source: Source, file: str) -> Source | None:
    return None if os.path.abspath(file).startswith(_OWN) else source


def _topological(src: str, comp: Computation) -> list[Instruction]:
    """The instructions in an order where operands come first (XLA prints them so; text
    written by hand need not be), without recursion: dumps have long chains."""
    by_name = comp.by_name()
    for ins in comp.instructions:
        for o in ins.operands:
            if o not in by_name:
                raise A.error_at(src, ins.pos, f"{ins.name} reads {o!r}, which is not defined "
                                 f"in computation {comp.name!r}")
    order: list[Instruction] = []
    state: dict[str, int] = {}  # 1: in progress, 2: done
    for first in comp.instructions:
        if state.get(first.name):
            continue
        stack = [(first, 0)]
        state[first.name] = 1
        while stack:
            ins, k = stack.pop()
            if k < len(ins.operands):
                stack.append((ins, k + 1))
                dep = by_name[ins.operands[k]]
                if state.get(dep.name) == 1:
                    raise A.error_at(src, dep.pos, f"{dep.name} depends on itself")
                if not state.get(dep.name):
                    state[dep.name] = 1
                    stack.append((dep, 0))
            else:
                state[ins.name] = 2
                order.append(ins)
    return order
