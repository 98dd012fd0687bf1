"""The IR: immutable nodes with stable integer ids, in a graph kept in topological order, and
its text form (`str(graph)`, `print_graph`): HLO-like, one node a line, which parser.py reads
back exactly (parse(str(g)) == g).

    graph @f {
      %0 = f32[3,4] parameter() {index=0, name="x"}
      %1 = f32[3,4] mul(%0, %0) loc("In[3]", 4, "f")
      return %1
    }

A node names its inputs by id, so a pass that leaves a node alone keeps its id and the
viewer can diff two stages by id. Equal graphs compare equal field by field, which makes
"did this pass change anything?" a cheap comparison.
"""

from __future__ import annotations

import base64
import json
import linecache
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from . import dtypes
from .opaque import OpaqueImpl
from .sharding import MeshSpec, Sharding, ShardingError, Spec


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * dtypes.itemsize(self.dtype)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class TupleType:
    """The type of an op with several results (top_k, sort, split); read with get_tuple_element."""

    elements: tuple[TensorType, ...]

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.elements)

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.elements)) + ")"


Type = TensorType | TupleType


class Call(NamedTuple):
    """One call of the user's on the way to a node (`Source.calls`): the function's short name
    (with " (transpose)" for its part of the backward pass), which of that function's calls
    from the same caller it is (0, 1, ... in call order), and how many parts of the node's
    `scope` were already open around the call."""

    function: str
    number: int
    depth: int


@dataclass(frozen=True)
class Source:
    """Where a node came from in the user's code. `file` is a notebook cell as "In[3]".

    `scope` is the named scope the node sits in, outermost first and "/"-separated: the jitted
    helpers, equinox/flax module calls and `jax.named_scope`s around it ("block/attention").
    It is metadata, like the line: passes carry it with the source, the view groups by it.
    `path` is the file as Python knows it (a cell's temporary file for "In[3]"), where the
    view reads the lines around it; empty when unknown (a parsed or HLO graph).
    `calls` are the user's calls the node was made in, outermost first, below the traced
    function: the view groups a loop's calls of `layer` as "layer #0", "layer #1", ... Like
    `path` it is not printed, and not compared."""

    file: str
    line: int
    function: str = ""
    text: str = field(default="", compare=False)
    scope: str = ""
    path: str = field(default="", compare=False, repr=False)
    calls: tuple[Call, ...] = field(default=(), compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def line_text(self) -> str:
        """The source line itself, when it is known."""
        return self.text or linecache.getline(self.path or self.file, self.line).strip()


class Literal:
    """An immutable array value for constants: compared and hashed by its bytes."""

    __slots__ = ("_array", "_key")

    def __init__(self, value: Any, dtype: str | None = None) -> None:
        arr = np.array(value, dtype=dtypes.to_numpy(dtype) if dtype else None)
        if dtype is None:
            arr = arr.astype(dtypes.to_numpy(dtypes.from_numpy(arr.dtype)), copy=False)
        arr.setflags(write=False)
        self._array = arr
        self._key = (dtypes.from_numpy(arr.dtype), arr.shape, arr.tobytes())

    @property
    def array(self) -> np.ndarray:
        return self._array

    @property
    def type(self) -> TensorType:
        return TensorType(self._array.shape, self._key[0])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Literal) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"Literal({self._array.tolist() if self._array.size <= 8 else '...'}, {self._key[0]})"


class Attrs(Mapping[str, Any]):
    """A frozen, hashable, ordered mapping of attribute name -> value."""

    __slots__ = ("_items", "_dict")

    def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        pairs = tuple(items.items() if isinstance(items, Mapping) else items)
        self._items = pairs
        self._dict = dict(pairs)

    def __getitem__(self, key: str) -> Any:
        return self._dict[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attrs):
            return self._dict == other._dict
        return isinstance(other, Mapping) and self._dict == dict(other)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._items, key=lambda kv: kv[0])))

    def __repr__(self) -> str:
        return f"Attrs({self._dict!r})"

    def replace(self, **changes: Any) -> Attrs:
        return Attrs({**self._dict, **changes})


@dataclass(frozen=True)
class Node:
    id: int
    op: str
    inputs: tuple[int, ...]
    attrs: Attrs
    type: Type
    source: Source | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        assert isinstance(self.type, TensorType), f"%{self.id} has a tuple type"
        return self.type.shape

    @property
    def dtype(self) -> str:
        assert isinstance(self.type, TensorType), f"%{self.id} has a tuple type"
        return self.type.dtype

    def describe(self) -> str:
        """A short name for error messages: '%5 (mul at In[3]:4)'."""
        where = f" at {self.source}" if self.source else ""
        return f"%{self.id} ({self.op}{where})"


class Graph:
    """Nodes in topological order; parameters are `parameter` nodes listed in `params`."""

    __slots__ = ("name", "nodes", "params", "outputs", "__dict__")

    def __init__(
        self,
        nodes: Iterable[Node],
        params: Iterable[int],
        outputs: Iterable[int],
        name: str = "main",
    ) -> None:
        self.nodes: tuple[Node, ...] = tuple(nodes)
        self.params: tuple[int, ...] = tuple(params)
        self.outputs: tuple[int, ...] = tuple(outputs)
        self.name = name

    @cached_property
    def by_id(self) -> dict[int, Node]:
        return {n.id: n for n in self.nodes}

    def node(self, node_id: int) -> Node:
        return self.by_id[node_id]

    def __getitem__(self, node_id: int) -> Node:
        return self.by_id[node_id]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.by_id

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    @cached_property
    def users(self) -> dict[int, tuple[int, ...]]:
        """node id -> ids of the nodes that read it (in order, repeated if read twice)."""
        acc: dict[int, list[int]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for i in n.inputs:
                acc.setdefault(i, []).append(n.id)
        return {k: tuple(v) for k, v in acc.items()}

    @property
    def param_nodes(self) -> tuple[Node, ...]:
        return tuple(self.by_id[i] for i in self.params)

    @property
    def output_nodes(self) -> tuple[Node, ...]:
        return tuple(self.by_id[i] for i in self.outputs)

    @property
    def next_id(self) -> int:
        return max((n.id for n in self.nodes), default=-1) + 1

    def ops(self) -> dict[str, int]:
        """op name -> how many nodes use it."""
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return counts

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Graph)
            and self.name == other.name
            and self.params == other.params
            and self.outputs == other.outputs
            and self.nodes == other.nodes
        )

    def __hash__(self) -> int:
        return hash((self.name, self.params, self.outputs, self.nodes))

    def __str__(self) -> str:
        return print_graph(self)

    def __repr__(self) -> str:
        return f"<Graph @{self.name}: {len(self.nodes)} nodes, {len(self.outputs)} outputs>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def alone(g: Graph, n: Node) -> Graph:
    """A graph of node `n` of `g` alone: a parameter per distinct input (in the order `n` first
    reads them, keeping the input's id), `n` as the output. The CPU backend runs a node it
    leaves to the interpreter this way; a reproducer checks one kernel of a stage this way."""
    params: list[Node] = []
    for i in dict.fromkeys(n.inputs):
        name = g[i].attrs.get("name", f"%{i}") if g[i].op == "parameter" else f"%{i}"
        attrs = Attrs({"index": len(params), "name": name})
        params.append(Node(i, "parameter", (), attrs, g[i].type))
    return Graph([*params, n], [p.id for p in params], [n.id], name=f"{g.name}_{n.op}_{n.id}")


# ---------------------------------------------------------------- the text form

# Literals with more elements than this print as base64 of their bytes.
INLINE_LITERAL_LIMIT = 16


def format_value(v: Any, indent: str = "") -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _fmt_float(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, tuple | list):
        inner = ", ".join(format_value(x, indent) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, Literal):
        return _fmt_literal(v)
    if isinstance(v, Graph):
        return print_graph(v, indent)
    if isinstance(v, OpaqueImpl):
        return f"jax<{json.dumps(v.token)}>"
    if isinstance(v, MeshSpec | Sharding | Spec):
        return str(v)
    raise TypeError(f"cannot print attribute value {v!r} of type {type(v).__name__}")


def _fmt_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    r = repr(float(x))
    return r if any(c in r for c in ".en") else r + ".0"


def _fmt_literal(lit: Literal) -> str:
    arr = lit.array
    if dtypes.is_float0(lit.type.dtype):  # no data: the type is all of it
        return f"dense<{lit.type}>"
    if arr.size <= INLINE_LITERAL_LIMIT:
        body = _nested(arr.tolist())
    else:
        body = 'b64"' + base64.b64encode(arr.tobytes()).decode() + '"'
    return f"dense<{lit.type} {body}>"


def _nested(x: Any) -> str:
    if isinstance(x, list):
        return "[" + ", ".join(_nested(e) for e in x) + "]"
    if isinstance(x, complex):  # (real, imaginary), as HLO writes a complex element
        return f"({_fmt_float(x.real)}, {_fmt_float(x.imag)})"
    return format_value(float(x) if not isinstance(x, bool | int) else x)


def format_node(n: Node, indent: str = "  ") -> str:
    args = ", ".join(f"%{i}" for i in n.inputs)
    text = f"{indent}%{n.id} = {n.type} {n.op}({args})"
    if n.attrs:
        text += " {" + ", ".join(f"{k}={format_value(v, indent)}" for k, v in n.attrs.items()) + "}"
    if n.source is not None:
        s = n.source
        scope = f", {json.dumps(s.scope)}" if s.scope else ""
        text += f" loc({json.dumps(s.file)}, {s.line}, {json.dumps(s.function)}{scope})"
    per_device = device_shapes(n)
    if per_device:  # a comment: the parser skips it
        text += f"  // per device: {per_device}"
    return text


def device_types(n: Node) -> list[TensorType] | None:
    """The per-device types of a sharded node's results, beside its global ones (`n.type`):
    a parameter or constraint with a `sharding`, and a region over a `mesh` whose body's
    results are per-device (shard_map); None for any other node. What the text shows after
    a sharded node (`// per device: f32[2,4]`) and the view beside its shapes."""
    s = n.attrs.get("sharding")
    if isinstance(s, Sharding) and isinstance(n.type, TensorType) and len(s.spec) <= n.type.rank:
        try:
            return [TensorType(s.block_shape(n.type.shape), n.type.dtype)]
        except ShardingError:  # (an axis the mesh lacks: the verifier says so)
            return None
    body = n.attrs.get("body")
    if isinstance(n.attrs.get("mesh"), MeshSpec) and isinstance(body, Graph):
        return [body[o].type for o in body.outputs if o in body]  # type: ignore[misc]
    return None


def device_shapes(n: Node) -> str:
    """`device_types` as text ('f32[2,4], f32[2]'), or ''."""
    return ", ".join(map(str, device_types(n) or ()))


def print_graph(g: Graph, indent: str = "") -> str:
    lines = [f"graph @{g.name} {{"]
    lines += [format_node(n, indent + "  ") for n in g.nodes]
    lines.append(f"{indent}  return " + ", ".join(f"%{i}" for i in g.outputs))
    lines.append(f"{indent}}}")
    return "\n".join(lines)
