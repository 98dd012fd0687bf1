"""A static HTML summary of a trace: what a saved notebook shows where no widget can run
(GitHub, nbviewer). A table of the stages and the final graph, collapsed when large; all text
escaped."""

from __future__ import annotations

import base64
import html
from typing import TYPE_CHECKING

from ..units import format_bytes
from .render import DEFAULT_MAX_NODES, render

if TYPE_CHECKING:
    from ..measure.protocol import TraceLike

# Past this many boxes the summary's picture is collapsed (render.py folds regions, repeated
# source lines and runs of nodes): saved notebooks should stay small.
SUMMARY_MAX_NODES = 300


def summary_html(trace: TraceLike, max_nodes: int = DEFAULT_MAX_NODES) -> str:
    esc = html.escape
    rows = []
    for k, s in enumerate(trace.stages):
        changed = k == 0 or s.report.changed
        style = "" if changed else ' style="color:#999"'
        rows.append(
            f"<tr{style}><td>{k}</td><td>{esc(s.name)}</td><td>{len(s.graph)}</td>"
            f"<td>{s.cost.flops:,}</td><td>{format_bytes(s.cost.bytes)}</td>"
            f"<td>{format_bytes(s.cost.peak_bytes)}</td><td>{len(s.report.rewrites)}</td></tr>")
    head = ("<tr><th>#</th><th>stage</th><th>nodes</th><th>FLOPs</th><th>bytes</th>"
            "<th>peak</th><th>rewrites</th></tr>")
    final = trace.final.graph
    drawn = render(final, max_nodes=min(max_nodes, SUMMARY_MAX_NODES))
    note = f" ({esc(drawn.note.split(':')[0])})" if drawn.note else ""
    # an image, not inline SVG: an untrusted notebook's sanitizer drops <svg> and keeps its text
    data = base64.b64encode(drawn.svg.encode("utf-8")).decode("ascii")
    svg = ('<img style="max-width:100%;height:auto" alt="the final graph" '
           f'src="data:image/svg+xml;base64,{data}">')
    picture = f"<p>final stage <b>{esc(trace.final.name)}</b>{note}:</p>{svg}"
    return (f'<div class="gx-summary"><p><b>gambit-explorer</b>: {esc(trace.name)}, '
            f"{len(trace.stages)} stages (run the cell for the live widget)</p>"
            f'<table class="gx-stages">{head}{"".join(rows)}</table>{picture}</div>')
