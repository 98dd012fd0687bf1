"""trace.to_html(path): one standalone HTML page of a trace, to share an exploration.

The page inlines the widget's bundle and every stage's view, and runs the same front end on a
model with no kernel behind it (extension/src/static-model.ts). Nothing is fetched: the
content security policy forbids it. The views (mostly SVG, which repeats itself) travel as
gzip-compressed JSON in base64, unpacked by the browser's own DecompressionStream: about a
tenth of the JSON's size. User strings reach the page only inside that base64 text, so no
source line, file or function name can close the script or open a tag.
"""

from __future__ import annotations

import base64
import gzip
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


_DATA_OPEN = '<script type="application/octet-stream" id="gambit-data" data-encoding="gzip+base64">'

# unpack the data (no network: a Blob's stream through the browser's gzip decoder), then mount
_BOOT = """const b64 = document.getElementById("gambit-data").textContent.trim();
const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
const data = JSON.parse(await new Response(stream).text());
globalThis.gambitExplorer.mountStatic(document.getElementById("gambit-root"), data);"""


def pack(data: Any) -> str:
    """The page's data: compact JSON, gzip-compressed, in base64."""
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def page_data(page: str) -> Any:
    """The data an exported page carries (for tests and tools)."""
    blob = page.split(_DATA_OPEN, 1)[1].split("</script>", 1)[0]
    return json.loads(gzip.decompress(base64.b64decode(blob)))


def export_html(trace: Trace, **options: Any) -> str:
    data = export_data(trace, **options)
    title = html.escape(f"gambit-explorer: {trace.name}")
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        f"<title>{title}</title>",
        f"<style>{_inline(_static('widget.css'), 'style')}</style>",
        f"<style>{_PAGE_STYLE}</style>",
        "</head><body>",
        '<div id="gambit-root"></div>',
        f"{_DATA_OPEN}{pack(data)}</script>",
        f'<script type="module">{_inline(_static("widget.js"), "script")}</script>',
        f'<script type="module">{_BOOT}</script>',
        "</body></html>",
        "",
    ])


def to_html(trace: Trace, path: str | os.PathLike[str], **options: Any) -> str:
    """Write the page to `path`; returns the path written."""
    text = export_html(trace, **options)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return os.fspath(path)
