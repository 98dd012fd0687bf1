"""Times of the nodes inside regions (scan and while bodies, split loops' chunks, kernels run
node by node, calls), where the backend runs those bodies from the interpreter core
(backends/interpreter.py): the profile's second level (profile.py).

A body the interpreter core runs is one `evaluate` of a child interpreter per iteration or
chunk. While a profiled run is under way, each such child's `evaluate` is given a hook, as the
top level has, that reads the clock after every node of the body; the times are summed over
the iterations and chunks of the run, by (the body's place, node id). A body that the backend
generated (a scan or while compiled as one function, a fused kernel) has no such walk: its
region is timed whole, and the profile says so. The hooks are taken off again after the run,
so bare runs pay nothing.

A body's place is its interpreter's prefix, as the core names it: "loop_12/" for split loop
%12's body, "loop_12/tail/" for its shorter last chunk, "scan_7/while_3/cond/" for the
condition of while %3 in scan %7's body.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..ir.graph import Graph, Node

# one step of a prefix: "loop_12/", then an optional body key: "tail/", "cond/", "branches1/"
_STEP = re.compile(r"([a-z_]+)_(\d+)/(?:(tail|cond|branches)(\d*)/)?")

Key = tuple[str, int]  # (the body's place, node id in that body)


def roots(exe: Any) -> list[Any]:
    """The interpreters whose children run region bodies for this executable: the generated
    program's one-node interpreters (the nodes it hands to the core, such as split loops),
    or the interpreter that runs the whole stage."""
    program = getattr(exe, "program", None)
    if program is not None:
        return list(getattr(program, "interpreters", ()))
    interp = getattr(exe, "interpreter", None)
    if interp is not None:
        return [interp]
    return [exe] if hasattr(exe, "children") and hasattr(exe, "evaluate") else []


def _descendants(interp: Any) -> Iterator[Any]:
    for child in getattr(interp, "children", {}).values():
        if isinstance(getattr(child, "prefix", None), str) and hasattr(child, "evaluate"):
            yield child  # (an interpreter: a backend may keep other runners among them)
            yield from _descendants(child)


def body_of(g: Graph, place: str) -> Graph | None:
    """The body graph a place names, walking down from the stage's graph `g` (None where the
    place does not name one: a node the program runs from inside a generated body)."""
    graph, pos = g, 0
    while pos < len(place):
        m = _STEP.match(place, pos)
        if m is None:
            return None
        op, nid, key, index = m.group(1), int(m.group(2)), m.group(3) or "body", m.group(4)
        if nid not in graph or graph[nid].op != op or key not in graph[nid].attrs:
            return None
        body = graph[nid].attrs[key]
        if isinstance(body, (list, tuple)):
            body = body[int(index or 0)]
        graph, pos = body, m.end()
    return graph


def top_level(place: str) -> bool:
    """Whether a place is a body of a top-level region (not one nested deeper)."""
    m = _STEP.match(place)
    return m is not None and m.end() == len(place)


def region_of(place: str) -> int:
    """The top-level node whose body a place lies in."""
    m = _STEP.match(place)
    assert m is not None, place
    return int(m.group(2))


@contextlib.contextmanager
def timing_bodies(exe: Any, g: Graph, sync: Callable[[], None], into: dict[Key, float],
                  calls: dict[Key, int] | None = None) -> Iterator[None]:
    """While the block runs, add each body node's seconds to `into` and count its runs in
    `calls` (see the module docstring); only bodies whose place names a body of the stage's
    graph `g`."""
    counts: dict[Key, int] = {} if calls is None else calls
    clock = time.perf_counter
    hooked = []
    for root in roots(exe):
        for child in _descendants(root):
            if body_of(g, child.prefix) is None or "evaluate" in vars(child):
                continue
            hooked.append(child)
            child.evaluate = _hooked(child, child.evaluate, sync, clock, into, counts)
    try:
        yield
    finally:
        for child in hooked:
            del child.evaluate


def _hooked(child: Any, evaluate: Callable[..., list[Any]], sync: Callable[[], None],
            clock: Callable[[], float], into: dict[Key, float],
            calls: dict[Key, int]) -> Callable[..., list[Any]]:
    place = child.prefix

    def run(args: Any, after_step: Any = None, consume: bool = False) -> list[Any]:
        sync()
        last = clock()

        def tick(n: Node, value: object) -> None:
            nonlocal last
            sync()
            now = clock()
            if n.op != "parameter":
                key = (place, n.id)
                into[key] = into.get(key, 0.0) + (now - last)
                calls[key] = calls.get(key, 0) + 1
            last = now
            if after_step is not None:
                after_step(n, value)

        return evaluate(args, tick, consume)

    return run
