"""The user's source beside the graphs: the lines the traced program comes from, in the
files (or notebook cells) it names, with a little context and long unused stretches folded.

Nodes name their line as "file:line" (str(Source)); the view maps each drawn box to the lines
of the nodes it draws (Rendered.lines), so that a line lights its boxes and a box its line.
"""

from __future__ import annotations

import linecache
import re
from collections.abc import Iterable, Iterator

from ..ir.graph import Graph, Source
from ..ir.ops.regions import bodies
from .schema import SourceLine

CONTEXT = 2  # lines shown around each used line
MAX_GAP = 4  # unused stretches up to this long are shown, longer ones folded
MAX_HEAD = 80  # how far above a function's first used line its `def` is looked for


def sources(graph: Graph) -> Iterator[Source]:
    """Every node's source with a line, bodies of region ops included."""
    for n in graph.nodes:
        if n.source is not None and n.source.line > 0:
            yield n.source
        for _, body in bodies(n):
            yield from sources(body)


def source_listing(graph: Graph) -> list[SourceLine]:
    """The lines `graph`'s nodes come from, file by file in order of first use: a "file" row,
    then "line" rows (context included) and "fold" rows for the stretches left out."""
    used: dict[str, dict[int, Source]] = {}
    for s in sources(graph):
        used.setdefault(s.file, {}).setdefault(s.line, s)
    out: list[SourceLine] = []
    for file, lines in used.items():
        path = next((s.path for s in lines.values() if s.path), "")
        text = linecache.getlines(path) if path else []
        last = len(text) or max(lines)
        wanted = {k for line in lines for k in range(line - CONTEXT, line + CONTEXT + 1)}
        wanted |= _function_heads(text, lines.values())
        shown = sorted(k for k in wanted if 1 <= k <= last and (text or k in lines))
        out.append(SourceLine(kind="file", loc="", line=0, text=file, used=True))
        prev = 0
        for k in shown:
            gap = k - prev - 1
            if prev and 0 < gap <= MAX_GAP and text:  # a short stretch: show it
                out += [_line(file, j, text, lines) for j in range(prev + 1, k)]
            elif prev and gap > 0:
                out.append(SourceLine(kind="fold", loc="", line=0, used=False,
                                      text=f"… {gap} line{'s' if gap > 1 else ''}"))
            out.append(_line(file, k, text, lines))
            prev = k
    return out


def _function_heads(text: list[str], used: Iterable[Source]) -> set[int]:
    """The lines from each function's `def` down to its first used line, so that the panel
    shows where each function starts (looked for at most MAX_HEAD lines up)."""
    first: dict[str, int] = {}
    for s in used:
        if s.function:
            first[s.function] = min(first.get(s.function, s.line), s.line)
    out: set[int] = set()
    for name, line in first.items():
        head = re.compile(rf"^\s*(async\s+)?def\s+{re.escape(name)}\s*\(")
        for k in range(min(line, len(text)), max(0, line - MAX_HEAD), -1):
            if head.match(text[k - 1]):
                out.update(range(k, line))
                break
    return out


def _line(file: str, k: int, text: list[str], used: dict[int, Source]) -> SourceLine:
    words = text[k - 1].rstrip("\n") if k <= len(text) else used[k].line_text
    return SourceLine(kind="line", loc=f"{file}:{k}", line=k, text=words.expandtabs(4),
                      used=k in used)
