"""Which of the user's calls each equation was made in (`Source.calls`), so that the view can
draw a loop's twelve calls of `layer` as "layer #0" ... "layer #11".

A traceback names the functions and lines an equation was made in, but not which call: the
calls of `layer` from one loop line have the same frames. They are told apart by the order of
the equations, which is the order the Python ran in:

- a call has ended once an equation is made outside it (on the caller's next line, or in
  another function called from the same line);
- a call of f that comes back to the line its first equation was made on (or to one above
  it), after leaving that line, is the next call: a loop calling f starts f again. ("Above"
  covers a first call that makes no equation on f's first lines: the backward pass of the
  first layer computes no gradient for the model's input.)
- each inlined call of a jitted function (a `pjit` equation) is one call, whatever its frames.

The backward pass (equations JAX made by transposing, `transpose(...)` in their name stack)
repeats the forward equations' frames in reverse order: it is read backwards, so that the
backward part of call #k is numbered k too; its calls are named "f (transpose)".

The traced function itself is no call (its lines are the root's), nor are frames inside
installed libraries or comprehensions (a list comprehension's calls are its function's).

Limits, since no traceback tells these apart: a loop inside f whose body holds the line f
starts on reads as several calls of f, and a loop calling a function all of whose equations
come from one line reads as one call (flax and equinox modules are told apart by their scopes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from jax._src import source_info_util

from ..ir.graph import Call, Graph, Node, Source

Frame = tuple[str, str, int]  # file, function (qualified name), line
# A call as the frames show it: (caller's file, caller's line, callee's file, callee) and the
# callee's line; `token` tells apart calls that are certainly different (one per pjit).
Level = tuple[tuple[str, int, str, str], int, int | None]

_FRONTEND = os.path.dirname(os.path.abspath(__file__)) + os.sep
_COMPREHENSIONS = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"}


def user_frames(eqn: Any) -> list[Any]:
    """The equation's frames outside JAX, innermost first."""
    return list(source_info_util.user_frames(eqn.source_info.traceback))


def in_library(file: str) -> bool:
    return "site-packages" in file or "dist-packages" in file


def in_frontend(file: str) -> bool:
    """The frontend's own code (its call of the traced function): never the user's line."""
    return file.startswith(_FRONTEND)


def short_name(function: str) -> str:
    """'mlp.<locals>.layer' -> 'layer'; 'Block.__call__' stays."""
    return function.rsplit("<locals>.", 1)[-1]


def call_stack(frames: Sequence[Any]) -> tuple[Frame, ...]:
    """The user's frames from the traced function inwards (outermost first): those outside
    the frontend's own call of it, installed libraries and comprehensions."""
    out = []
    for f in frames:
        if in_frontend(f.file_name):
            break
        if not in_library(f.file_name) and short_name(f.function_name) not in _COMPREHENSIONS:
            out.append((f.file_name, f.function_name, f.start_line))
    return tuple(reversed(out))


def _levels(stack: Sequence[Frame], start: int) -> tuple[Level, ...]:
    """The calls of stack[start:], each from the frame before it."""
    return tuple(((stack[k - 1][0], stack[k - 1][2], stack[k][0], stack[k][1]), stack[k][2], None)
                 for k in range(max(1, start), len(stack)))


@dataclass(eq=False, slots=True)
class _Call:
    """One call found so far: what it was called as, and which call of its function it is."""

    key: tuple[str, int, str, str]
    token: int | None
    entry: int  # the callee's line of its first equation
    label: str
    number: int
    left: bool = False  # an equation of this call was made on another line than `entry`
    prefix: tuple[str, ...] = ()  # the scope parts all its equations share


@dataclass(eq=False, slots=True)
class _Record:
    """An equation: the Source its nodes carry, and where it was made."""

    source: Source
    stack: tuple[Frame, ...]
    levels: tuple[Level, ...]
    transposed: bool
    calls: tuple[_Call, ...] = ()


@dataclass(frozen=True)
class _Inside:
    """The jitted function being inlined: its equation's record, the function's name and a
    token for this call of it."""

    record: _Record | None
    name: str
    token: int


class CallLog:
    """Notes each equation as the frontend emits it, in program order; `apply` then gives
    every node its `Source.calls`."""

    def __init__(self) -> None:
        self.records: list[_Record] = []
        self.aliases: list[tuple[Source, _Record]] = []
        self.inside: _Inside | None = None

    def note(self, eqn: Any, frames: Sequence[Any], source: Source) -> Source:
        """`source` as a Source of the equation's own, remembered with its calls. (Without
        frames of its own an equation has its caller's Source, which is copied.)"""
        stack = call_stack(frames)
        ctx = self.inside
        transposed = "transpose(" in str(eqn.source_info.name_stack) or bool(
            ctx and ctx.record and ctx.record.transposed)
        own = source if frames else dataclasses.replace(source)
        record = _Record(own, stack, self._levels_of(stack), transposed)
        self.records.append(record)
        return record.source

    def _levels_of(self, stack: tuple[Frame, ...]) -> tuple[Level, ...]:
        ctx = self.inside
        if ctx is None:
            return _levels(stack, 1)  # stack[0] is the traced function
        outer_stack = ctx.record.stack if ctx.record else ()
        outer = ctx.record.levels if ctx.record else ()
        # the frames a jitted function's equations carry are those of its first trace: skip
        # those of its caller, find the function itself, take the calls below it
        shared = 0
        while (shared < min(len(stack), len(outer_stack))
               and stack[shared][:2] == outer_stack[shared][:2]):
            shared += 1
        own = next((k for k in range(shared, len(stack))
                    if short_name(stack[k][1]).rsplit(".", 1)[-1] == ctx.name), shared)
        if own >= len(stack):
            return outer
        if outer_stack:  # called from the user's code (not the traced function itself)
            caller = outer_stack[-1]
            outer += (((caller[0], caller[2], stack[own][0], stack[own][1]), stack[own][2],
                       ctx.token),)
        return outer + _levels(stack, own + 1)

    @contextlib.contextmanager
    def entering(self, call: Source | None, inner: Source | None, name: str) -> Iterator[None]:
        """While the equations of a jitted function called by `call` are emitted; `inner` is
        the Source its constants and frameless equations take."""
        record = next((r for r in reversed(self.records) if r.source is call), None)
        if inner is not None and record is not None:
            self.aliases.append((inner, record))
        saved, self.inside = self.inside, _Inside(record, name, len(self.records))
        try:
            yield
        finally:
            self.inside = saved

    def apply(self, graph: Graph) -> Graph:
        """The graph with each noted Source replaced by one that knows its calls."""
        forward = [r for r in self.records if not r.transposed]
        _number(forward, "")
        _number(reversed([r for r in self.records if r.transposed]), " (transpose)")
        new: dict[int, Source] = {}
        made: dict[tuple[int, ...], tuple[Call, ...]] = {}  # equations of one call share it
        for s, r in [(r.source, r) for r in self.records] + self.aliases:
            if r.calls:
                chain = tuple(map(id, r.calls))
                if chain not in made:
                    made[chain] = tuple(Call(c.label, c.number, len(c.prefix))
                                        for c in r.calls)
                new[id(s)] = Source(s.file, s.line, s.function, text=s.text, scope=s.scope,
                                    path=s.path, calls=made[chain])
        if not new:
            return graph
        nodes = [Node(n.id, n.op, n.inputs, n.attrs, n.type, new[id(n.source)])
                 if id(n.source) in new else n for n in graph.nodes]
        return Graph(nodes, graph.params, graph.outputs, graph.name)


def _number(records: Iterable[_Record], suffix: str) -> None:
    """Tell the calls apart along one direction of the program (see the module's doc)."""
    live: list[_Call] = []  # the calls the previous equation was made in
    counts: dict[tuple[int, str], int] = {}
    for r in records:
        scope = tuple(p for p in r.source.scope.split("/") if p)
        chain: list[_Call] = []
        same = True  # the calls so far are the previous equation's
        for depth, (key, line, token) in enumerate(r.levels):
            c = live[depth] if same and depth < len(live) else None
            if c is not None and not _next_call(c, key, line, token):
                c.left = c.left or line != c.entry
                c.prefix = _common(c.prefix, scope)
            else:  # a new call (and every call inside it is new)
                same = False
                label = short_name(key[3]) + suffix
                parent = id(chain[-1]) if chain else 0
                number = counts.get((parent, label), 0)
                counts[(parent, label)] = number + 1
                c = _Call(key, token, line, label, number, prefix=scope)
            chain.append(c)
        live = chain
        r.calls = tuple(chain)


def _next_call(c: _Call, key: tuple[str, int, str, str], line: int, token: int | None) -> bool:
    """Whether an equation made where call `c` was is in another call: called as another
    function or from another line, another pjit, or back at (or above) the line `c` started
    on after leaving it."""
    return c.key != key or c.token != token or (c.left and line <= c.entry)


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return a[:k]
