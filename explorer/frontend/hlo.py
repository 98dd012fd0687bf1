"""HLO text -> a syntax tree: a tokenizer and a recursive-descent parser.

XLA prints HLO in several dialects over the years and frontends (JAX, TensorFlow's
`experimental_get_compiler_ir(...)(stage='hlo')`, PyTorch/XLA): operands with or without their
types, names with or without `%`, metadata with `source_file`/`source_line` or with a
`stack_frame_id` into the module's FileNames/FileLocations/StackFrames tables. The parser
reads the structure they share and keeps every attribute's raw text, so that an attribute we
do not understand is kept rather than rejected; `hlo_attrs` reads the ones we do.

Any bad input raises `ParseError` with a line and a column, never another exception: the
explorer imports text pasted by users, and a clear "line 3, column 17: expected ')'" is the
whole user interface of a parser. Translation into our Graph lives in `hlo_graph`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from ..ir.parser import ParseError

__all__ = ["Attribute", "Computation", "HloModule", "Instruction", "ParseError", "Shape",
           "parse_hlo"]

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\n]+|/\*.*?\*/|//[^\n]*)
      | (?P<str>"(?:[^"\\\n]|\\.)*")
      | (?P<shape>[a-z][a-z0-9]*\[(?:(?:<=)?\d+|\?)?(?:,(?:(?:<=)?\d+|\?))*\](?:\{[^{}\n"]*\})?)
      | (?P<name>%[\w.\-]+)
      | (?P<num>[-+]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?))
      | (?P<ident>[A-Za-z_$][\w.$]*(?:-[A-Za-z_\d][\w.$]*)*)
      | (?P<arrow>->)
      | (?P<group>(?<==)\{[^{}\n"]*(?:"(?:[^"\\\n]|\\.)*"[^{}\n"]*)*\})
      | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_OPEN = {"{": "}", "(": ")", "[": "]"}


class Token(NamedTuple):
    kind: str  # str | shape | name | num | ident | arrow | group ({...} after "=") | punct | eof
    text: str
    pos: int  # offset in the source
    end: int


@dataclass(frozen=True)
class Shape:
    """An HLO shape: an array (element type, dims, layout) or a tuple of shapes."""

    dtype: str  # "" for a tuple
    dims: tuple[int, ...] = ()
    layout: tuple[int, ...] | None = None  # minor-to-major, when printed
    elements: tuple[Shape, ...] | None = None  # set for tuples
    dynamic: bool = False  # some dimension is a bound (`<=8`) or unknown (`?`)

    @property
    def is_tuple(self) -> bool:
        return self.elements is not None

    def __str__(self) -> str:
        if self.elements is not None:
            return "(" + ", ".join(map(str, self.elements)) + ")"
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


@dataclass(frozen=True)
class Attribute:
    key: str
    text: str  # the value's raw text, e.g. "{0,1}" or "%region_0.1"
    pos: int


@dataclass
class Instruction:
    name: str  # without '%'
    shape: Shape
    opcode: str
    operands: tuple[str, ...]  # instruction names
    attrs: dict[str, Attribute]
    text: str  # the instruction's own source text
    pos: int
    is_root: bool = False
    payload: str = ""  # what stands in the parentheses of constant(...) and parameter(...)

    def attr(self, key: str) -> str | None:
        a = self.attrs.get(key)
        return a.text if a else None


@dataclass
class Computation:
    name: str
    instructions: list[Instruction]
    is_entry: bool
    pos: int

    @property
    def root(self) -> Instruction:
        for ins in self.instructions:
            if ins.is_root:
                return ins
        return self.instructions[-1]

    def by_name(self) -> dict[str, Instruction]:
        return {i.name: i for i in self.instructions}


@dataclass
class HloModule:
    name: str
    computations: dict[str, Computation]
    attrs: dict[str, Attribute] = field(default_factory=dict)
    # The source-location tables of newer dumps: id -> file name / function name,
    # location id -> (file id, function id, line), stack frame id -> location id.
    file_names: dict[int, str] = field(default_factory=dict)
    function_names: dict[int, str] = field(default_factory=dict)
    file_locations: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    stack_frames: dict[int, int] = field(default_factory=dict)
    text: str = ""

    @property
    def entry(self) -> Computation:
        for c in self.computations.values():
            if c.is_entry:
                return c
        return list(self.computations.values())[-1]


class _Tokens:
    def __init__(self, text: str) -> None:
        self.text = text
        # The pattern matches at every offset (its last branch takes any character), so the
        # matches tile the text.
        self.toks: list[Token] = [Token(m.lastgroup or "", m.group(), m.start(), m.end())
                                  for m in _TOKEN.finditer(text) if m.lastgroup != "ws"]
        self.toks.append(Token("eof", "", len(text), len(text)))
        self.last = len(self.toks) - 1
        self.i = 0
        self.closer = self._match_brackets()

    def _match_brackets(self) -> dict[int, int]:
        """Index of an opening bracket -> index of its closing one, for the groups that are
        well nested: skipping metadata={...} is then a jump, not a walk (dumps are big)."""
        closer: dict[int, int] = {}
        stack: list[tuple[int, str]] = []
        for k, tok in enumerate(self.toks):
            if tok.kind != "punct":
                continue
            if tok.text in _OPEN:
                stack.append((k, _OPEN[tok.text]))
            elif tok.text in ")}]" and stack:
                if stack[-1][1] == tok.text:
                    closer[stack.pop()[0]] = k
                else:
                    stack.clear()  # every open group around this is malformed
        return closer

    def error_at(self, pos: int, message: str) -> ParseError:
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return ParseError(message, line, col)

    def error(self, message: str) -> ParseError:
        tok = self.peek()
        found = "end of input" if tok.kind == "eof" else repr(tok.text[:40])
        return self.error_at(tok.pos, f"{message}, found {found}")

    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.i + k, self.last)]

    def next(self) -> Token:
        tok = self.toks[self.i]
        if self.i < self.last:
            self.i += 1
        return tok

    def at(self, text: str) -> bool:
        tok = self.toks[self.i]
        return tok.text == text and tok.kind != "str"

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.next()
            return True
        return False

    def expect(self, text: str) -> Token:
        if not self.at(text):
            raise self.error(f"expected {text!r}")
        return self.next()

    def expect_int(self, what: str) -> int:
        tok = self.peek()
        if tok.kind != "num" or not re.fullmatch(r"[-+]?\d+", tok.text):
            raise self.error(f"expected {what}")
        self.next()
        return int(tok.text)

    def group_end(self) -> int:
        """Skip a balanced (), {} or [] group starting here; return the offset after it."""
        close = self.closer.get(self.i)
        if close is not None:
            self.i = min(close + 1, self.last)
            return self.toks[close].end
        stack: list[str] = []  # a malformed group: walk it to say where it goes wrong
        while True:
            tok = self.next()
            if tok.kind == "eof":
                raise self.error_at(tok.pos, f"unclosed {stack[-1]!r}" if stack else "unexpected end")
            if tok.kind == "punct" and tok.text in _OPEN:
                stack.append(_OPEN[tok.text])
            elif tok.kind == "punct" and tok.text in ")}]":
                if not stack or tok.text != stack[-1]:
                    raise self.error_at(tok.pos, f"unbalanced {tok.text!r}")
                stack.pop()
            if not stack:
                return tok.end


def parse_hlo(text: str) -> HloModule:
    """Parse an HLO module (or bare computations); raises ParseError with line and column."""
    if not isinstance(text, str):
        raise ParseError(f"HLO text must be a str, not {type(text).__name__}", 1, 1)
    t = _Tokens(text)
    module = HloModule("module", {}, text=text)
    if t.at("HloModule"):
        t.next()
        name = t.next()
        if name.kind not in ("ident", "name", "str"):
            raise t.error_at(name.pos, "expected a module name")
        module.name = name.text.lstrip("%").strip('"')
        while t.accept(","):
            key, value = _attribute(t)
            module.attrs[key] = value
    _tables(t, module)
    while t.peek().kind != "eof":
        comp = _computation(t)
        if comp.name in module.computations:
            raise t.error_at(comp.pos, f"computation {comp.name!r} is defined twice")
        module.computations[comp.name] = comp
    if not module.computations:
        raise t.error("expected a computation")
    if sum(c.is_entry for c in module.computations.values()) > 1:
        raise t.error_at(len(text), "more than one ENTRY computation")
    return module


_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def _tables(t: _Tokens, m: HloModule) -> None:
    """The source-location tables that newer XLA prints between the header and the code."""
    while t.peek().kind == "ident" and t.peek().text in _TABLES:
        table = t.next().text
        while t.peek().kind == "num":
            key = t.expect_int("a table row number")
            if table in ("FileNames", "FunctionNames"):
                tok = t.next()
                if tok.kind != "str":
                    raise t.error_at(tok.pos, "expected a quoted name")
                (m.file_names if table == "FileNames" else m.function_names)[key] = _unquote(tok.text)
                continue
            start = t.peek().pos
            if not t.at("{"):
                raise t.error("expected '{'")
            fields = _key_values(t.text[start:t.group_end()])
            if table == "FileLocations":
                m.file_locations[key] = (fields.get("file_name_id", 0),
                                         fields.get("function_name_id", 0), fields.get("line", 0))
            else:
                m.stack_frames[key] = fields.get("file_location_id", 0)


def _key_values(group: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", group)}


def _unquote(s: str) -> str:
    body = s[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def _name(t: _Tokens, what: str) -> str:
    tok = t.peek()
    if tok.kind == "name" or (tok.kind == "ident" and tok.text not in ("ROOT", "ENTRY")):
        t.next()
        return tok.text.lstrip("%")
    raise t.error(f"expected {what}")


def _computation(t: _Tokens) -> Computation:
    pos = t.peek().pos
    is_entry = t.accept("ENTRY")
    name = _name(t, "a computation name")
    if t.at("("):  # the signature: (x: f32[2], y: f32[]) -> f32[2]
        t.group_end()
        if t.peek().kind == "arrow":
            t.next()
            _shape(t)
    t.expect("{")
    instructions: list[Instruction] = []
    while not t.accept("}"):
        instructions.append(_instruction(t))
    if not instructions:
        raise t.error_at(pos, f"computation {name!r} has no instructions")
    if sum(i.is_root for i in instructions) > 1:
        raise t.error_at(pos, f"computation {name!r} has more than one ROOT")
    seen: set[str] = set()
    for ins in instructions:
        if ins.name in seen:
            raise t.error_at(ins.pos, f"instruction {ins.name!r} is defined twice")
        seen.add(ins.name)
    while t.accept(","):  # e.g. `, execution_thread="main"`
        _attribute(t)
    return Computation(name, instructions, is_entry, pos)


def _instruction(t: _Tokens) -> Instruction:
    pos = t.peek().pos
    is_root = t.accept("ROOT")
    name = _name(t, "an instruction name")
    t.expect("=")
    shape = _shape(t)
    op = t.peek()
    if op.kind != "ident":
        raise t.error("expected an opcode")
    t.next()
    operands: list[str] = []
    payload = ""
    paren = t.expect("(")
    if op.text in ("constant", "parameter"):
        t.i -= 1
        end = t.group_end()
        payload = t.text[paren.end:end - 1].strip()
    else:
        while not t.accept(")"):
            if operands:
                t.expect(",")
            if t.peek().kind != "name" and not (t.peek().kind == "ident" and t.peek(1).text in
                                                (",", ")")):
                _shape(t)  # the older dialect types its operands: add(f32[] %x, f32[] %y)
            operands.append(_name(t, "an operand name"))
    attrs: dict[str, Attribute] = {}
    while t.accept(","):
        key, value = _attribute(t)
        attrs[key] = value
    end = t.toks[t.i - 1].end
    return Instruction(name, shape, op.text, tuple(operands), attrs, t.text[pos:end], pos,
                       is_root, payload)


def _attribute(t: _Tokens) -> tuple[str, Attribute]:
    """`key=value`: the value is every token up to the next whitespace outside brackets."""
    key = t.peek()
    if key.kind != "ident":
        raise t.error("expected an attribute name")
    t.next()
    t.expect("=")
    start = t.peek().pos
    end = start
    while True:
        tok = t.peek()
        if tok.kind == "eof" or tok.pos != end or (tok.kind == "punct" and tok.text in ",)}]"):
            break
        end = t.group_end() if tok.kind == "punct" and tok.text in _OPEN else t.next().end
    if end == start:
        raise t.error(f"expected a value for {key.text!r}")
    if t.text.startswith("mesh[", start) and t.at("{"):
        end = t.group_end()  # replica groups over a mesh: mesh['x'=4,'y'=2] {'x'}
    return key.text, Attribute(key.text, t.text[start:end], start)


MAX_TUPLE_NESTING = 64


def _shape(t: _Tokens, depth: int = 0) -> Shape:
    if t.at("("):
        if depth >= MAX_TUPLE_NESTING:
            raise t.error(f"tuple shapes nest deeper than {MAX_TUPLE_NESTING}")
        t.next()
        elements: list[Shape] = []
        while not t.accept(")"):
            if elements:
                t.expect(",")
            elements.append(_shape(t, depth + 1))
        return Shape("", elements=tuple(elements))
    tok = t.peek()
    if tok.kind == "shape":  # the common case, one token: f32[2,3]{1,0}
        t.next()
        return _shape_token(tok.text)
    if tok.kind != "ident" or not re.fullmatch(r"[a-z]+\d*[a-z0-9]*", tok.text):
        raise t.error("expected a shape such as f32[2,3]")
    t.next()
    t.expect("[")
    dims: list[int] = []
    dynamic = False
    while not t.accept("]"):
        if dims:
            t.expect(",")
        if t.accept("?"):
            dims.append(1)
            dynamic = True
            continue
        if t.at("<") and t.peek(1).text == "=":
            t.next()
            t.next()
            dynamic = True
        size = t.expect_int("a dimension size")
        if size < 0:
            raise t.error_at(t.toks[t.i - 1].pos, f"negative dimension size {size}")
        dims.append(size)
    layout = None
    if t.at("{") and t.peek().pos == t.toks[t.i - 1].end:
        start = t.peek().pos
        group = t.text[start + 1:t.group_end() - 1]
        layout = _layout(group)
    return Shape(tok.text, tuple(dims), layout, dynamic=dynamic)


def _layout(group: str) -> tuple[int, ...]:
    """`1,0:T(8,128)` -> (1, 0): the minor-to-major order; tiling and memory space aside."""
    return tuple(int(x) for x in re.findall(r"\d+", group.split(":")[0]))


def _shape_token(text: str) -> Shape:
    dtype, rest = text.split("[", 1)
    dims_text, _, layout_text = rest.partition("]")
    dims = [d for d in dims_text.split(",") if d]
    sizes = tuple(1 if d == "?" else int(d.removeprefix("<=")) for d in dims)
    layout = _layout(layout_text[1:-1]) if layout_text else None
    dynamic = any(d == "?" or d.startswith("<=") for d in dims)
    return Shape(dtype, sizes, layout, dynamic=dynamic)
