"""Reads the text form that graph.py writes (`str(graph)`) back into a Graph (parse(str(g)) == g)."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import numpy as np

from . import dtypes, opaque
from .graph import Attrs, Graph, Literal, Node, Source, TensorType, TupleType, Type
from .sharding import MeshSpec, Sharding, ShardingError, Spec, entries_from_value


class ParseError(ValueError):
    """Bad IR text; says where (line and column) and what was expected."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"line {line}, column {column}: {message}")
        self.line, self.column = line, column


_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\n]+|//[^\n]*)
      | (?P<id>%\d+)
      | (?P<gname>@[A-Za-z_][\w.\-]*)
      | (?P<str>"(?:[^"\\\n]|\\.)*")
      | (?P<num>-?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+|inf|nan)(?![\w.]))
      | (?P<name>[A-Za-z_][\w\-]*)
      | (?P<punct>[{}()\[\],=<>:])
    """,
    re.VERBOSE,
)


class _Tokens:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise self.error_at(pos, f"unexpected character {text[pos]!r}")
            if m.lastgroup != "ws":
                self.toks.append((m.lastgroup or "", m.group(), pos))
            pos = m.end()
        self.toks.append(("eof", "", len(text)))
        self.i = 0

    def error_at(self, pos: int, message: str) -> ParseError:
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return ParseError(message, line, col)

    def peek(self) -> tuple[str, str, int]:
        return self.toks[self.i]

    def next(self) -> tuple[str, str, int]:
        tok = self.toks[self.i]
        self.i = min(self.i + 1, len(self.toks) - 1)
        return tok

    def error(self, message: str) -> ParseError:
        kind, text, pos = self.peek()
        found = "end of input" if kind == "eof" else repr(text)
        return self.error_at(pos, f"{message}, found {found}")

    def expect(self, text: str) -> None:
        if self.peek()[1] != text:
            raise self.error(f"expected {text!r}")
        self.next()

    def expect_kind(self, kind: str, what: str) -> str:
        if self.peek()[0] != kind:
            raise self.error(f"expected {what}")
        return self.next()[1]

    def accept(self, text: str) -> bool:
        if self.peek()[1] == text and self.peek()[0] != "str":
            self.next()
            return True
        return False


def parse(text: str) -> Graph:
    """Parse one graph; raises ParseError (with line and column) on any bad input."""
    toks = _Tokens(text)
    g = _graph(toks)
    if toks.peek()[0] != "eof":
        raise toks.error("expected end of input")
    return g


def _graph(t: _Tokens) -> Graph:
    if t.peek()[1] != "graph":
        raise t.error("expected 'graph'")
    t.next()
    name = t.expect_kind("gname", "a graph name such as @main")[1:]
    t.expect("{")
    nodes: list[Node] = []
    while t.peek()[1] != "return":
        nodes.append(_node(t))
    t.next()
    outputs: list[int] = []
    if t.peek()[0] == "id":
        outputs.append(int(t.next()[1][1:]))
        while t.accept(","):
            outputs.append(int(t.expect_kind("id", "a node id such as %3")[1:]))
    t.expect("}")
    params = sorted((n for n in nodes if n.op == "parameter"), key=lambda n: n.attrs.get("index", 0))
    return Graph(nodes, [n.id for n in params], outputs, name)


def _node(t: _Tokens) -> Node:
    nid = int(t.expect_kind("id", "a node id such as %3 or 'return'")[1:])
    t.expect("=")
    typ = _type(t)
    op = t.expect_kind("name", "an op name")
    t.expect("(")
    inputs: list[int] = []
    if t.peek()[0] == "id":
        inputs.append(int(t.next()[1][1:]))
        while t.accept(","):
            inputs.append(int(t.expect_kind("id", "a node id such as %3")[1:]))
    t.expect(")")
    attrs: list[tuple[str, Any]] = []
    if t.accept("{"):
        if not t.accept("}"):
            while True:
                key = t.expect_kind("name", "an attribute name")
                t.expect("=")
                attrs.append((key, _value(t)))
                if t.accept("}"):
                    break
                t.expect(",")
    source = None
    if t.peek() == ("name", "loc", t.peek()[2]):
        t.next()
        t.expect("(")
        file = json.loads(t.expect_kind("str", "a file name string"))
        t.expect(",")
        line = int(t.expect_kind("num", "a line number"))
        t.expect(",")
        func = json.loads(t.expect_kind("str", "a function name string"))
        scope = json.loads(t.expect_kind("str", "a scope string")) if t.accept(",") else ""
        t.expect(")")
        source = Source(file, line, func, scope=scope)
    return Node(nid, op, tuple(inputs), Attrs(attrs), typ, source)


def _type(t: _Tokens) -> Type:
    if t.accept("("):
        elems: list[TensorType] = []
        if not t.accept(")"):
            while True:
                el = _type(t)
                if not isinstance(el, TensorType):
                    raise t.error("nested tuple types are not supported")
                elems.append(el)
                if t.accept(")"):
                    break
                t.expect(",")
        return TupleType(tuple(elems))
    kind, dt, pos = t.peek()
    if kind != "name" or dt not in dtypes.NAMES:
        raise t.error("expected a type such as f32[3,4]")
    t.next()
    t.expect("[")
    dims: list[int] = []
    if not t.accept("]"):
        while True:
            tok = t.expect_kind("num", "a dimension size")
            if not tok.isdigit():
                raise t.error_at(t.toks[t.i - 1][2], f"bad dimension size {tok!r}")
            dims.append(int(tok))
            if t.accept("]"):
                break
            t.expect(",")
    return TensorType(tuple(dims), dt)


def _number(tok: str) -> int | float:
    if re.fullmatch(r"-?\d+", tok):
        return int(tok)
    return float(tok)


def _value(t: _Tokens) -> Any:
    kind, text, pos = t.peek()
    if kind == "num":
        t.next()
        return _number(text)
    if kind == "str":
        t.next()
        return json.loads(text)
    if kind == "name":
        if text in ("true", "false", "none"):
            t.next()
            return {"true": True, "false": False, "none": None}[text]
        if text == "dense":
            return _literal(t)
        if text == "graph":
            return _graph(t)
        if text == "jax":  # an opaque node's JAX primitive: jax<"name:N"> (ir/opaque.py)
            t.next()
            t.expect("<")
            token = json.loads(t.expect_kind("str", "a primitive token string"))
            t.expect(">")
            return opaque.lookup(token)
        if text in ("mesh", "sharding", "P"):
            return _sharding_value(t)
        raise t.error("expected an attribute value")
    if t.accept("("):
        items: list[Any] = []
        if t.accept(")"):
            return ()
        while True:
            items.append(_value(t))
            if t.accept(")"):
                break
            t.expect(",")
            if t.accept(")"):
                break
        return tuple(items)
    raise t.error("expected an attribute value")


def _mesh(t: _Tokens) -> MeshSpec:
    t.next()
    t.expect("<")
    axes: list[tuple[str, int]] = []
    if not t.accept(">"):
        while True:
            name = json.loads(t.expect_kind("str", "a mesh axis name string"))
            t.expect("=")
            size = t.expect_kind("num", "a mesh axis size")
            if not size.isdigit():
                raise t.error_at(t.toks[t.i - 1][2], f"bad mesh axis size {size!r}")
            axes.append((name, int(size)))
            if t.accept(">"):
                break
            t.expect(",")
    return MeshSpec(tuple(axes))


def _spec(t: _Tokens) -> Spec:
    """P("x", none, ("x", "y")) (ir/sharding.py)."""
    t.next()
    pos = t.peek()[2]
    if t.peek()[1] != "(":
        raise t.error("expected '(' after P")
    try:
        return Spec(entries_from_value(_value(t)))
    except ShardingError as e:
        raise t.error_at(pos, str(e)) from None


def _sharding_value(t: _Tokens) -> MeshSpec | Sharding | Spec:
    """mesh<...>, P(...) or sharding<mesh<...>, P(...)> (ir/sharding.py)."""
    text = t.peek()[1]
    if text == "mesh":
        return _mesh(t)
    if text == "P":
        return _spec(t)
    t.next()
    t.expect("<")
    if t.peek()[1] != "mesh":
        raise t.error("expected a mesh<...>")
    mesh = _mesh(t)
    t.expect(",")
    if t.peek()[1] != "P":
        raise t.error("expected a partition spec P(...)")
    spec = _spec(t)
    t.expect(">")
    return Sharding(mesh, spec.entries)


def _literal(t: _Tokens) -> Literal:
    t.next()
    t.expect("<")
    typ = _type(t)
    if not isinstance(typ, TensorType):
        raise t.error("a literal has a tensor type")
    npd = dtypes.to_numpy(typ.dtype)
    kind, text, pos = t.peek()
    if dtypes.is_float0(typ.dtype):  # it holds no data: dense<float0[3]>
        if text != ">":
            raise t.error_at(pos, f"a {typ.dtype} literal holds no data: write dense<{typ}>")
        arr = np.zeros(typ.shape, npd)
    elif kind == "name" and text == "b64":
        t.next()
        raw = json.loads(t.expect_kind("str", "a base64 string"))
        try:
            data = base64.b64decode(raw, validate=True)
            arr = np.frombuffer(data, dtype=npd).reshape(typ.shape)
        except ValueError as e:
            raise t.error_at(pos, f"bad literal data: {e}") from None
    else:
        nested = _nested_list(t)
        try:
            arr = np.array(nested, dtype=npd).reshape(typ.shape)
        except (ValueError, TypeError) as e:
            raise t.error_at(pos, f"literal does not fit {typ}: {e}") from None
    t.expect(">")
    return Literal(arr, typ.dtype)


def _nested_list(t: _Tokens) -> Any:
    if t.accept("["):
        items: list[Any] = []
        if t.accept("]"):
            return items
        while True:
            items.append(_nested_list(t))
            if t.accept("]"):
                return items
            t.expect(",")
    if t.accept("("):  # a complex element: (real, imaginary)
        re_ = float(t.expect_kind("num", "the real part of a complex number"))
        t.expect(",")
        im = float(t.expect_kind("num", "the imaginary part of a complex number"))
        t.expect(")")
        return complex(re_, im)
    kind, text, _ = t.peek()
    if kind == "num":
        t.next()
        return _number(text)
    if kind == "name" and text in ("true", "false"):
        t.next()
        return text == "true"
    raise t.error("expected a number, '[' or '('")
