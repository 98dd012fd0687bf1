"""An out-of-memory error on the device, named: which node of the generated program asked,
at which line of the user's code, how many bytes it asked for, and the memory pool's limit.

CuPy raises `cupy.cuda.memory.OutOfMemoryError` ("Out of memory allocating 1,024 bytes
(allocated so far: ..., limit set to: ... bytes)") from whichever allocation fails, deep in
CuPy. `guard` wraps a generated program's entry: on that error, the program's own frame in the
traceback gives the line of the generated module that was running, and the node comment above
it (`# %12 = conv_general_dilated  (model.py:33)`, program_writer.py) names the node.
`guard_measured` wraps the measured twin, whose per-node hook says which node ran last: the
failing one is the next.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from ...ir.graph import Graph

PROGRAM_FILE = "<program @"  # how the generated modules' code objects are named
_NODE = re.compile(r"^\s*# (%\d+ = [\w\-]+(?:\s+\([^)]*\))?)")


class DeviceOutOfMemory(MemoryError):
    """The device ran out of memory at a node of a generated program."""


def oom_type(xp: Any) -> type | None:
    """The array module's out-of-memory error (CuPy's cupy.cuda.memory.OutOfMemoryError)."""
    return getattr(getattr(getattr(xp, "cuda", None), "memory", None), "OutOfMemoryError", None)


def _number(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text)
    return int(m.group(1).replace(",", "")) if m else None


def describe(e: BaseException, where: str, xp: Any) -> DeviceOutOfMemory:
    """The named error: `where` (the node and its line), the bytes asked for and the limit."""
    text = str(e)
    asked = _number(r"allocating ([\d,]+) bytes", text)
    limit = _number(r"limit set to: ([\d,]+) bytes", text)
    pool = getattr(xp, "get_default_memory_pool", None)
    used = None
    if pool is not None:
        p = pool()
        limit = limit if limit is not None else p.get_limit()
        used = p.used_bytes()
    limit_text = "no limit set" if not limit else f"{limit:,} bytes"
    return DeviceOutOfMemory(
        f"out of device memory at {where}: it asked for "
        f"{'an unknown number of' if asked is None else f'{asked:,}'} bytes; the memory pool's "
        f"limit: {limit_text}" + (f", in use: {used:,} bytes" if used is not None else "")
        + f" ({type(e).__name__}: {text})")


def failing_line(e: BaseException, source: str) -> str:
    """The node comment above the generated program's line that was running (its deepest
    frame in the traceback), with that line's number."""
    line = None
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(PROGRAM_FILE):
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is None:
        return "a line outside the generated program"
    lines = source.splitlines()
    for k in range(min(line, len(lines)) - 1, -1, -1):
        m = _NODE.match(lines[k])
        if m:
            return f"{m.group(1)}, line {line} of the generated program"
    return f"line {line} of the generated program"


def guard(fn: Callable[..., Any], source: str, xp: Any) -> Callable[..., Any]:
    """The program entry `fn`, raising DeviceOutOfMemory (naming the node) for `xp`'s
    out-of-memory error."""
    oom = oom_type(xp)
    if oom is None:
        return fn

    @functools.wraps(fn)
    def run(*args: Any) -> Any:
        try:
            return fn(*args)
        except oom as e:
            raise describe(e, failing_line(e, source), xp) from e

    return run


def guard_measured(fn: Callable[..., Any], graph: Graph, xp: Any) -> Callable[..., Any]:
    """The measured twin `fn(*args, _step)`, naming the node after the last one its hook saw."""
    oom = oom_type(xp)
    if oom is None:
        return fn
    order = [n for n in graph.nodes if n.op != "parameter"]

    @functools.wraps(fn)
    def run(*args: Any) -> Any:
        *values, hook = args
        seen: list[int] = []

        def step(node: Any, value: Any) -> None:
            seen.append(node.id)
            hook(node, value)

        try:
            return fn(*values, step)
        except oom as e:
            ids = [n.id for n in order]
            at = ids.index(seen[-1]) + 1 if seen and seen[-1] in ids else 0
            node = order[min(at, len(order) - 1)] if order else None
            where = "the program" if node is None else (
                f"%{node.id} = {node.op}"
                + (f" ({node.source.file}:{node.source.line})" if node.source else ""))
            raise describe(e, where, xp) from e

    return run
