"""What users see: graphs as SVG (render), IR diffs, the step-through widget and the
standalone HTML export. Imported lazily by Trace.widget()/to_html() and %%gambit
(explorer/magic.py)."""

from .diff import IRDiff, ir_diff
from .render import DiffView, Rendered, render, render_diff

__all__ = ["DiffView", "IRDiff", "Rendered", "ir_diff", "render", "render_diff"]
