"""A graph's float types widened: the same program computed in float64 (complex in complex128).

`widened(graph)` is the one place that widens a graph's element types. Every node keeps its
id; its type, and each attribute that names a float type (`new_dtype`, `dtype`,
`preferred_element_type`, an opaque node's `type`) or holds a float constant, become the
wide type, and region bodies are widened the same way. The reference interpreter computes
each node in its node's element type (backends/reference.py `as_typed`), so running the
widened graph runs the program in float64: measure/numerics.py compares a stage's outputs
with it.

Two kinds of node cannot simply be widened, and run at their own precision inside the wide
program instead (their float inputs rounded down to the types they had, their result
converted up to the wide type under the node's id): the ops whose meaning is the bits of
their type (`bitcast_convert_type`, `nextafter`), and opaque JAX primitives that JAX will not
run on float64 operands with the same result types. An opaque primitive that does run wide
runs through JAX with 64-bit types on (`jax.enable_x64`). `Widened.pinned` says which nodes
kept their precision, and why.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir import dtypes
from ..ir.graph import Attrs, Graph, Literal, Node, TensorType, TupleType, Type
from ..ir.opaque import JaxImpl, OpaqueImpl
from ..ir.ops.regions import type_from_text

WIDE = {"bf16": "f64", "f16": "f64", "f32": "f64", "c64": "c128"}
# attributes that name an element type
_TYPE_ATTRS = ("new_dtype", "dtype", "preferred_element_type")
# ops whose meaning is the bits of their element type: kept at the program's precision
_BITWISE = {"bitcast_convert_type": "its meaning is the bits of its element type",
            "nextafter": "its step is one unit of its own element type"}


def wide_dtype(name: str) -> str:
    """The element type a value of type `name` has in the wide program."""
    return WIDE.get(name, name)


@functools.lru_cache(maxsize=4096)
def wide_type(t: Type) -> Type:
    if isinstance(t, TupleType):
        return TupleType(tuple(TensorType(e.shape, wide_dtype(e.dtype)) for e in t.elements))
    return TensorType(t.shape, wide_dtype(t.dtype))


@dataclass
class Widened:
    """The wide graph, and the nodes (id -> why) that kept their own precision in it."""

    graph: Graph
    pinned: dict[int, str] = field(default_factory=dict)


class Memo:
    """Wide nodes by the node they widen, for widening several stages of one program: a pass
    keeps the nodes it leaves alone, so most of a stage's nodes were widened before."""

    def __init__(self) -> None:
        self.nodes: dict[int, tuple[Node, Node]] = {}  # id(node) -> (node, its wide node)

    def get(self, n: Node) -> Node | None:
        hit = self.nodes.get(id(n))
        return hit[1] if hit is not None and hit[0] is n else None


def widened(graph: Graph, keep: Mapping[str, str] | None = None,
            memo: Memo | None = None) -> Widened:
    """`graph` with its float types widened (module doc); node ids are kept. `keep`: opaque
    nodes, by their impl's token, to run at their own precision too (token -> why: a
    primitive that JAX would not run wide, found when the wide graph ran; OpaqueWideError).
    `memo`: wide nodes already made for other stages of the same program."""
    pinned: dict[int, str] = {}
    return Widened(_widen(graph, pinned, _Fresh(graph), keep or {}, memo), pinned)


class _Fresh:
    """Ids no node of the graph (its bodies included) has, counted on first use (pinning
    is rare: most graphs need none)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.count: Iterator[int] | None = None

    def __iter__(self) -> _Fresh:
        return self

    def __next__(self) -> int:
        if self.count is None:
            self.count = itertools.count(_max_id(self.graph) + 1)
        return next(self.count)


def _max_id(g: Graph) -> int:
    top = max((n.id for n in g.nodes), default=-1)
    for n in g.nodes:
        for body in _graphs(n.attrs):
            top = max(top, _max_id(body))
    return top


def _graphs(attrs: Attrs) -> Iterator[Graph]:
    for v in attrs.values():
        if isinstance(v, Graph):
            yield v
        elif isinstance(v, tuple | list):
            yield from (b for b in v if isinstance(b, Graph))


def _widen(g: Graph, pinned: dict[int, str], fresh: Iterator[int],
           keep: Mapping[str, str], memo: Memo | None = None) -> Graph:
    nodes: list[Node] = []
    for n in g.nodes:
        known = memo.get(n) if memo is not None else None
        if known is not None:
            nodes.append(known)
            continue
        impl = n.attrs.get("impl") if n.op == "opaque" else None
        why = _BITWISE.get(n.op) if n.op in _BITWISE and _touches_float(g, n) else None
        if isinstance(impl, OpaqueImpl) and impl.token in keep:
            why = keep[impl.token]
        attrs = _wide_attrs(n, pinned, fresh, keep)
        if why is None and isinstance(impl, JaxImpl):
            attrs = attrs.replace(impl=WideImpl(impl))
        elif why is None and isinstance(impl, OpaqueImpl) and _touches_float(g, n):
            why = "its JAX primitive is not in this process (read from text)"
        if why is None:
            wide = Node(n.id, n.op, n.inputs, attrs, wide_type(n.type), n.source)
            nodes.append(wide)
            if memo is not None and impl is None and next(_graphs(n.attrs), None) is None:
                memo.nodes[id(n)] = (n, wide)  # (a plain node: no body, no primitive)
            continue
        nodes += _pin(g, n, why, pinned, fresh)
    return Graph(nodes, g.params, g.outputs, g.name)


def _touches_float(g: Graph, n: Node) -> bool:
    types = [g[i].type for i in n.inputs] + [n.type]
    return any(e.dtype in WIDE for t in types
               for e in (t.elements if isinstance(t, TupleType) else (t,)))


def _wide_attrs(n: Node, pinned: dict[int, str], fresh: Iterator[int],
                keep: Mapping[str, str]) -> Attrs:
    changes: dict[str, Any] = {}
    for key, v in n.attrs.items():
        if isinstance(v, int | float | bool | None):  # (most attributes: nothing to widen)
            continue
        if key in _TYPE_ATTRS and isinstance(v, str) and v in WIDE:
            changes[key] = WIDE[v]
        elif key == "type" and n.op == "opaque" and isinstance(v, str):
            changes[key] = str(wide_type(type_from_text(v)))
        elif isinstance(v, Literal) and v.type.dtype in WIDE:
            changes[key] = Literal(v.array.astype(dtypes.to_numpy(WIDE[v.type.dtype])))
        elif isinstance(v, Graph):
            changes[key] = _widen(v, pinned, fresh, keep)
        elif isinstance(v, tuple) and v and all(isinstance(b, Graph) for b in v):
            changes[key] = tuple(_widen(b, pinned, fresh, keep) for b in v)
    return n.attrs.replace(**changes) if changes else n.attrs


def _pin(g: Graph, n: Node, why: str, pinned: dict[int, str], fresh: Iterator[int],
         ) -> list[Node]:
    """`n` at its own precision: its float inputs converted back to their types, `n` under a
    fresh id, its result converted up under `n`'s id (element by element for a tuple)."""
    out: list[Node] = []
    inputs = []
    for i in n.inputs:
        t = g[i].type
        if isinstance(t, TensorType) and t.dtype in WIDE:
            k = next(fresh)
            out.append(Node(k, "convert_element_type", (i,), Attrs({"new_dtype": t.dtype}), t,
                            n.source))
            inputs.append(k)
        else:
            inputs.append(i)
    inner = next(fresh)
    out.append(Node(inner, n.op, tuple(inputs), n.attrs, n.type, n.source))
    what = n.attrs.get("opcode", n.op) if n.op == "opaque" else n.op
    where = f" at {n.source}" if n.source else ""
    pinned[n.id] = (f"%{n.id} ({what}{where}) ran at its own precision, {n.type}, in the "
                    f"float64 run: {why}")
    if isinstance(n.type, TupleType):
        parts = []
        for k, e in enumerate(n.type.elements):
            got = next(fresh)
            out.append(Node(got, "get_tuple_element", (inner,), Attrs({"index": k}), e, n.source))
            parts.append(_up(got, e, fresh, out, n))
        out.append(Node(n.id, "tuple", tuple(parts), Attrs(), wide_type(n.type), n.source))
    else:
        out.append(Node(n.id, "convert_element_type", (inner,),
                        Attrs({"new_dtype": wide_dtype(n.type.dtype)}), wide_type(n.type),
                        n.source))
    return out


def _up(i: int, t: TensorType, fresh: Iterator[int], out: list[Node], n: Node) -> int:
    if t.dtype not in WIDE:
        return i
    k = next(fresh)
    out.append(Node(k, "convert_element_type", (i,), Attrs({"new_dtype": WIDE[t.dtype]}),
                    wide_type(t), n.source))
    return k


class WideImpl(OpaqueImpl):
    """An opaque JAX primitive run on wide operands, with JAX's 64-bit types on. Where JAX
    refuses, or its results do not come out in the wide types, it says so (OpaqueWideError)
    and the caller pins the node (runs it at its own precision)."""

    __slots__ = ("impl", "_jitted")

    def __init__(self, impl: JaxImpl) -> None:
        self.impl, self.token, self._jitted = impl, f"{impl.token}:f64", None

    @property
    def name(self) -> str:
        return self.impl.name

    def bind(self, *xs: Any) -> Any:
        return self.impl.bind(*xs)

    def __call__(self, *xs: Any) -> Any:
        import jax

        with jax.enable_x64(True):
            if self._jitted is None:
                self._jitted = jax.jit(self.impl.bind)
            try:
                out = self._jitted(*[np.asarray(x) for x in xs])
            except Exception as e:  # noqa: BLE001 (JAX's refusal, whatever it is, is the reason)
                raise OpaqueWideError(self.impl.token,
                                      f"JAX would not run {self.impl.name} on float64 operands "
                                      f"({type(e).__name__}: {e})") from e
        outs = out if isinstance(out, tuple) else (out,)
        for o, a in zip(outs, self.impl.out_avals):
            want = wide_dtype(dtypes.from_numpy(a.dtype)) if hasattr(a, "dtype") else None
            if want is not None and dtypes.from_numpy(o.dtype) != want:
                raise OpaqueWideError(self.impl.token,
                                      f"JAX ran {self.impl.name} on float64 operands into "
                                      f"{dtypes.from_numpy(o.dtype)}, not {want}")
        if isinstance(out, tuple):
            return tuple(np.array(o, copy=True) for o in out)
        return np.array(out, copy=True)


class OpaqueWideError(RuntimeError):
    """An opaque JAX primitive that cannot run on float64 operands: `token` names its impl
    (pass it in `widened`'s `keep`), `reason` says why."""

    def __init__(self, token: str, reason: str) -> None:
        super().__init__(reason)
        self.token, self.reason = token, reason
