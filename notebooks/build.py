"""Build the tutorial notebooks from their percent-format sources, and execute them.

    .venv/bin/python notebooks/build.py                 # every notebook in notebooks/src/
    .venv/bin/python notebooks/build.py 01 04           # those whose names start so
    .venv/bin/python notebooks/build.py --check         # do the .ipynb sources match src/?

The sources (notebooks/src/NN-name.py) are what people edit and review: plain Python with
`# %%` cell markers (`# %% [markdown]` for prose, each line a comment), the format jupytext
and VS Code read. A notebook is rebuilt from its source and executed top to bottom in a fresh
kernel (this venv's Python), so the saved outputs are real and the execution counts (which
the notebooks print as source lines, In[N]) are what nbval sees when it re-runs them.
Widget state is not stored: saved notebooks show the widgets' static HTML fallback.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from explorer.files import replacing

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
MARKER = re.compile(r"^# %%(?P<kind> \[markdown\])?(?: tags=(?P<tags>\S+))?\s*$")
TIMEOUT_S = 600


def cells_of(text: str) -> list[nbformat.NotebookNode]:
    """Split a percent-format source into notebook cells. `# %% tags=a,b` tags a code cell."""
    cells: list[nbformat.NotebookNode] = []
    kind, tags, lines = None, [], []

    def flush() -> None:
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if kind == "markdown":
            body = "\n".join(re.sub(r"^# ?", "", ln) if ln.startswith("#") else ln for ln in lines)
            cells.append(nbformat.v4.new_markdown_cell(body))
        elif kind == "code" and lines:
            cell = nbformat.v4.new_code_cell("\n".join(lines))
            if tags:
                cell.metadata["tags"] = tags
            cells.append(cell)

    for line in text.splitlines():
        m = MARKER.match(line)
        if m:
            flush()
            kind = "markdown" if m["kind"] else "code"
            tags = m["tags"].split(",") if m["tags"] else []
            lines = []
        elif kind is not None:
            lines.append(line)
    flush()
    return cells


def notebook_of(source: Path) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=cells_of(source.read_text()))
    for k, cell in enumerate(nb.cells):
        cell.id = f"cell-{k}"  # stable ids: rebuilding changes only what really changed
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def target(source: Path) -> Path:
    return HERE / f"{source.stem}.ipynb"


def cell_seconds(cell: nbformat.NotebookNode) -> float:
    times = cell.metadata.get("execution", {})
    start, end = times.get("iopub.execute_input"), times.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    return (datetime.fromisoformat(end.replace("Z", "+00:00"))
            - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()


def build(source: Path, timings: bool = False) -> float:
    """Write and execute one notebook; returns the seconds it took to execute."""
    nb = notebook_of(source)
    start = time.perf_counter()
    NotebookClient(nb, timeout=TIMEOUT_S, kernel_name="python3", store_widget_state=False,
                   record_timing=True, resources={"metadata": {"path": str(HERE)}}).execute()
    seconds = time.perf_counter() - start
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if timings and cell.cell_type == "code":
            first = cell.source.splitlines()[0] if cell.source else ""
            print(f"  {cell_seconds(cell):6.2f} s  In[{cell.execution_count}] {first[:60]}")
        cell.metadata.pop("execution", None)  # timestamps: noise in every diff
    nbformat.validate(nb)
    with replacing(target(source)) as tmp:  # written whole: nbval and the tests read it
        nbformat.write(nb, tmp)
    return seconds


def stale(source: Path) -> list[str]:
    """What differs between a source and its saved notebook's cells (empty: in sync)."""
    path = target(source)
    if not path.exists():
        return [f"{path.name} is missing"]
    saved = nbformat.read(path, as_version=4).cells
    wanted = notebook_of(source).cells
    if len(saved) != len(wanted):
        return [f"{path.name}: {len(saved)} cells, source has {len(wanted)}"]
    return [f"{path.name} cell {k}: differs from {source.name}"
            for k, (a, b) in enumerate(zip(saved, wanted))
            if a.cell_type != b.cell_type or a.source != b.source]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook name prefixes, e.g. 01 02-euclid")
    parser.add_argument("--timings", action="store_true", help="print each cell's seconds")
    parser.add_argument("--check", action="store_true",
                        help="only check that the saved notebooks match their sources")
    opts = parser.parse_args(argv)
    sources = [s for s in sorted(SOURCES.glob("*.py"))
               if not opts.names or any(s.stem.startswith(n) for n in opts.names)]
    if not sources:
        print("no notebook sources match", file=sys.stderr)
        return 2
    if opts.check:
        problems = [p for s in sources for p in stale(s)]
        print("\n".join(problems) or f"{len(sources)} notebooks match their sources")
        return 1 if problems else 0
    for s in sources:
        print(f"{target(s).name}: executed in {build(s, opts.timings):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
