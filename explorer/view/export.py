"""trace.to_html(path): one standalone HTML page of a trace, to share an exploration.

The page inlines the widget's bundle and every stage's view, and runs the same front end on a
model with no kernel behind it (extension/src/static-model.ts). Nothing is fetched: the
content security policy forbids it. The data is packed: pictures drawn more than once are
stored once (ExportData.svgs), and the JSON is gzipped and base64-encoded, which the browser
unpacks with its own DecompressionStream. User strings reach the page only inside that base64
text, so no source line, file or function name can close the script or open a tag.

`static_html` is the same view as a notebook output that needs no kernel (saved notebooks,
reopened after a kernel restart): a summary that survives an untrusted notebook's sanitizer,
replaced by the step-through view where scripts may run.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import itertools
import json
import os
import pathlib
import re
from typing import TYPE_CHECKING, Any

from ..files import write_atomic
from .measured import trace_measured
from .payload import overlay_state, stage_summaries, stage_view
from .render import DEFAULT_MAX_NODES
from .runs import RunLog
from .schema import DEFAULTS, IDLE, RunState
from .source import source_listing
from .whatif import page_state

if TYPE_CHECKING:
    from ..measure.protocol import TraceLike

# the built front-end bundle (from extension/): the widget loads it, a page inlines it
STATIC = pathlib.Path(__file__).resolve().parent.parent / "static"
_MOUNTS = itertools.count()
_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "img-src data:")
_PAGE_STYLE = ("body{margin:16px;background:#fff;font-family:system-ui,-apple-system,"
               "'Segoe UI',Helvetica,Arial,sans-serif}")


def _static(name: str) -> str:
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


def share_svgs(data: dict[str, Any]) -> dict[str, Any]:
    """Store each distinct picture once: views refer to ExportData.svgs by "svg:N"."""
    table: dict[str, int] = {}
    views = []
    for view in data["views"]:
        view = dict(view)
        for key in ("before_svg", "after_svg"):
            if view[key]:
                view[key] = f"svg:{table.setdefault(view[key], len(table))}"
        views.append(view)
    return {**data, "views": views, "svgs": list(table)}


def pack(data: dict[str, Any]) -> str:
    """The data as the page carries it: shared pictures, JSON, gzip, base64."""
    text = json.dumps(share_svgs(data), ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(gzip.compress(text.encode("utf-8"), 9, mtime=0)).decode("ascii")


def unpack(packed: str) -> dict[str, Any]:
    """The data back from `pack`, pictures resolved (what the front end sees)."""
    data = json.loads(gzip.decompress(base64.b64decode(packed)))
    svgs = data.pop("svgs", [])
    for view in data["views"]:
        for key in ("before_svg", "after_svg"):
            if view[key].startswith("svg:"):
                view[key] = svgs[int(view[key][4:])]
    return data


def page_data(page: str) -> dict[str, Any]:
    """The data inlined in an exported page or a static notebook output."""
    return unpack(re.search(r'class="gx-data"[^>]*>([^<]*)</script>', page).group(1))  # type: ignore[union-attr]


def export_data(trace: TraceLike, *, max_nodes: int = DEFAULT_MAX_NODES, runs: RunLog | None = None,
                run_rows: list[dict[str, Any]] | None = None,
                measured: dict[str, list[Any]] | None = None) -> dict[str, Any]:
    """The page's data: every stage's view, and the profiles, rooflines and memory timelines
    in `measured` (a widget's; by default the trace's latest, measure/latest.py)."""
    views = []
    for k in range(len(trace.stages)):
        view = stage_view(trace, k, max_nodes)
        view["kernels"] = runs.kernels(k) if runs is not None else []
        views.append(view)
    source = source_listing(trace.stages[0].graph)
    state = {"title": trace.name, "stages": stage_summaries(trace), "index": 0,
             "hide_unchanged": False, "search": "", "source": source, "selected_line": "",
             "show_source": bool(source),
             **{k: DEFAULTS[k] for k in ("tab", "selected_rewrite", "sync_panes", "firing")},
             "backends": [], "run_rows": list(run_rows or []), "run_state": RunState(**IDLE),
             **(trace_measured(trace) if measured is None else measured),
             "show_heat": DEFAULTS["show_heat"], **overlay_state(trace), **page_state(trace)}
    return {"state": state, "views": views}


def _mount(data: dict[str, Any]) -> str:
    """The packed data and one module script: the bundle, then mounting on that data (one
    script, so that the bundle has run when the mount does)."""
    packed = pack(data)
    # an id that is the same when a notebook is run again (saved outputs compare equal), and
    # differs between two outputs of the same trace on one page
    uid = hashlib.sha1(f"{next(_MOUNTS)}:{packed}".encode()).hexdigest()[:16]
    boot = (f'\nglobalThis.gambitExplorer.mountPacked("{uid}");')
    return (f'<script type="application/octet-stream" class="gx-data" data-gx="{uid}">'
            f"{packed}</script>\n"
            f'<script type="module">{_inline(_static("widget.js"), "script")}{boot}</script>')


def export_html(trace: TraceLike, **options: Any) -> str:
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
        _mount(data),
        "</body></html>",
        "",
    ])


def static_html(trace: TraceLike, summary: str, **options: Any) -> str:
    """A notebook output showing the trace without a kernel: `summary` (plain HTML that an
    untrusted notebook's sanitizer keeps) until the step-through view replaces it."""
    data = export_data(trace, **options)
    return (f'<div class="gx-static">{summary}'
            f"<style>{_inline(_static('widget.css'), 'style')}</style>{_mount(data)}</div>")


def to_html(trace: TraceLike, path: str | os.PathLike[str], **options: Any) -> str:
    """Write the page to `path` (whole: a reader never sees half of it); returns the path
    written."""
    write_atomic(path, export_html(trace, **options))
    return os.fspath(path)
