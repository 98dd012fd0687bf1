"""The IR text of two stages side by side, from difflib: as rows, HTML and plain text.

Rows are the one form: the widget ships them to the browser, which builds the table with text
nodes only, and `to_html` / `to_text` print the same rows for notebooks and terminals.
"""

from __future__ import annotations

import difflib
import html
from dataclasses import dataclass

from ..ir.graph import Graph

# A row: (tag, left line number, left text, right line number, right text); tag is one of
# "equal", "delete", "insert", "replace", or "skip" (that many unchanged lines folded away).
Row = tuple[str, int | None, str, int | None, str]
MARK = {"equal": " ", "delete": "-", "insert": "+", "replace": "|", "skip": "…"}


@dataclass(frozen=True)
class IRDiff:
    rows: tuple[Row, ...]
    changed: bool

    def to_text(self, width: int = 60) -> str:
        lines = []
        for tag, _, a, _, b in self.rows:
            if tag == "skip":
                lines.append(f"{'':<{width}} … {a}")
                continue
            left = a if len(a) <= width else a[: width - 1] + "…"
            lines.append(f"{left:<{width}} {MARK[tag]} {b}".rstrip())
        return "\n".join(lines)

    def to_html(self) -> str:
        body = []
        for tag, an, a, bn, b in self.rows:
            if tag == "skip":
                body.append(f'<tr class="gx-skip"><td colspan="4">{html.escape(a)}</td></tr>')
                continue
            cells = (_num(an), _code(a, tag, "delete"), _num(bn), _code(b, tag, "insert"))
            body.append(f'<tr class="gx-{tag}">' + "".join(cells) + "</tr>")
        return ('<table class="gx-irdiff" style="font-family:monospace;font-size:12px;'
                'border-collapse:collapse">' + "".join(body) + "</table>")

    def _repr_html_(self) -> str:
        return _STYLE + self.to_html()

    def __str__(self) -> str:
        return self.to_text()


_BG = {"delete": "#ffebee", "insert": "#e8f5e9", "replace": "#fff3e0"}
_STYLE = ("<style>.gx-irdiff td{padding:0 6px;white-space:pre;vertical-align:top}"
          ".gx-irdiff .gx-num{color:#999;text-align:right}"
          ".gx-irdiff .gx-skip td{color:#888;background:#f5f5f5}</style>")


def _num(n: int | None) -> str:
    return f'<td class="gx-num">{"" if n is None else n}</td>'


def _code(text: str, tag: str, side: str) -> str:
    colour = _BG.get(tag if tag in ("replace", side) else "", "")
    style = f' style="background:{colour}"' if colour else ""
    return f"<td{style}>{html.escape(text)}</td>"


def ir_diff(before: Graph | str, after: Graph | str, context: int = 3) -> IRDiff:
    """Side-by-side rows; unchanged runs longer than 2*context+1 lines are folded."""
    a = str(before).splitlines()
    b = a if after is before else str(after).splitlines()  # the traced stage: printed once
    rows: list[Row] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += _equal_rows(a, i1, i2, j1, context)
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            left = (i + 1, a[i]) if i < i2 else (None, "")
            right = (j + 1, b[j]) if j < j2 else (None, "")
            kind = tag if tag != "replace" or (i < i2 and j < j2) else \
                ("delete" if i < i2 else "insert")
            rows.append((kind, left[0], left[1], right[0], right[1]))
    changed = any(r[0] != "equal" and r[0] != "skip" for r in rows)
    return IRDiff(tuple(rows), changed)


def _equal_rows(a: list[str], i1: int, i2: int, j1: int, context: int) -> list[Row]:
    def row(k: int) -> Row:
        return ("equal", i1 + k + 1, a[i1 + k], j1 + k + 1, a[i1 + k])

    n = i2 - i1
    if n <= 2 * context + 1:
        return [row(k) for k in range(n)]
    head = [row(k) for k in range(context)] if i1 > 0 else []
    tail = [row(k) for k in range(n - context, n)] if i2 < len(a) else []
    folded = n - len(head) - len(tail)
    return head + [("skip", None, f"{folded} unchanged lines", None, "")] + tail
