"""trace.to_html(path): one standalone HTML page of a trace, to share an exploration.

The page inlines the widget's bundle and every stage's view, and runs the same front end on a
model with no kernel behind it (extension/src/static-model.ts). Nothing is fetched: the
content security policy forbids it. User strings reach the page only as JSON inside a
`<script type="application/json">` with `<`, `>` and `&` escaped, so no source line, file
or function name can close the script or open a tag.
"""

from __future__ import annotations

import html
import json
import os
import re
from typing import Any

from ..trace import Trace
from .payload import stage_summaries, stage_view
from .render import DEFAULT_MAX_NODES
from .runs import RunLog
from .schema import DEFAULTS, IDLE, RunState

_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "img-src data:")
_PAGE_STYLE = ("body{margin:16px;background:#fff;font-family:system-ui,-apple-system,"
               "'Segoe UI',Helvetica,Arial,sans-serif}")


def _static(name: str) -> str:
    from .widget import STATIC

    return (STATIC / name).read_text(encoding="utf-8")


def json_for_script(data: Any) -> str:
    """JSON that is safe between <script> tags: no '<', '>', '&' or line separators."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def _inline(code: str, tag: str) -> str:
    """Code of our own bundle inside <script>/<style>: keep it from closing the element."""
    return re.sub(rf"</({tag})", r"<\\/\1", code, flags=re.I).replace("<!--", "<\\!--")


def export_data(trace: Trace, *, max_nodes: int = DEFAULT_MAX_NODES, runs: RunLog | None = None,
                run_rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    views = []
    for k in range(len(trace.stages)):
        view = stage_view(trace, k, max_nodes)
        view["kernels"] = runs.kernels(k) if runs is not None else []
        views.append(view)
    state = {"title": trace.name, "stages": stage_summaries(trace), "index": 0,
             "hide_unchanged": False, "search": "",
             **{k: DEFAULTS[k] for k in ("tab", "selected_rewrite", "sync_panes")},
             "backends": [], "run_rows": list(run_rows or []), "run_state": RunState(**IDLE)}
    return {"state": state, "views": views}


def export_html(trace: Trace, **options: Any) -> str:
    data = export_data(trace, **options)
    title = html.escape(f"gambit-explorer: {trace.name}")
    boot = ('const data = JSON.parse(document.getElementById("gambit-data").textContent);\n'
            'globalThis.gambitExplorer.mountStatic(document.getElementById("gambit-root"), data);')
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        f"<title>{title}</title>",
        f"<style>{_inline(_static('widget.css'), 'style')}</style>",
        f"<style>{_PAGE_STYLE}</style>",
        "</head><body>",
        '<div id="gambit-root"></div>',
        f'<script type="application/json" id="gambit-data">{json_for_script(data)}</script>',
        f'<script type="module">{_inline(_static("widget.js"), "script")}</script>',
        f'<script type="module">{boot}</script>',
        "</body></html>",
        "",
    ])


def to_html(trace: Trace, path: str | os.PathLike[str], **options: Any) -> str:
    """Write the page to `path`; returns the path written."""
    text = export_html(trace, **options)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return os.fspath(path)
