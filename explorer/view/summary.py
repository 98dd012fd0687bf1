"""A static HTML summary of a trace: what a saved notebook shows where no widget can run
(GitHub, nbviewer, a notebook not trusted). A table of the stages and the final graph,
collapsed when large; all text escaped. The graph is a PNG in a data URI, not inline SVG:
JupyterLab's sanitizer strips SVG from untrusted HTML (leaving its labels as loose text),
while an <img> with a data: PNG survives it, GitHub and nbviewer."""

from __future__ import annotations

import base64
import html

import graphviz

from ..trace import Trace
from ..units import format_bytes
from .render import DEFAULT_MAX_NODES, render

# Past this many boxes the summary's picture is collapsed (render.py folds regions, repeated
# source lines and runs of nodes): saved notebooks should stay small.
SUMMARY_MAX_NODES = 300


def summary_html(trace: Trace, max_nodes: int = DEFAULT_MAX_NODES) -> str:
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
    note = f" ({esc(drawn.note)} to keep the picture small)" if drawn.note else ""
    png = graphviz.Source(drawn.dot).pipe(format="png", engine="dot")
    image = (f'<img alt="the final graph" style="max-width:100%;height:auto" '
             f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">')
    picture = f"<p>final stage <b>{esc(trace.final.name)}</b>{note}:</p>{image}"
    return (f'<div class="gx-summary"><p><b>gambit-explorer</b>: {esc(trace.name)}, '
            f"{len(trace.stages)} stages (run the cell in Jupyter for the step-through widget)</p>"
            f'<table class="gx-stages">{head}{"".join(rows)}</table>{picture}</div>')
