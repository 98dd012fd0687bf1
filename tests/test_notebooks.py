"""The tutorials: saved notebooks are built from notebooks/src/ and were executed cleanly.

Executing them is nbval's job (`pytest --nbval notebooks/`, in `make test`); these checks are
cheap and catch what nbval cannot: a source edited without rebuilding its notebook, a
notebook saved without outputs (GitHub would show bare code), or one saved with an error.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SOURCES = sorted((NOTEBOOKS / "src").glob("*.py"))


def _build_module():
    spec = importlib.util.spec_from_file_location("notebooks_build", NOTEBOOKS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _build_module()


def test_every_notebook_has_a_source_and_back() -> None:
    built = {p.stem for p in NOTEBOOKS.glob("*.ipynb")}
    assert built == {s.stem for s in SOURCES}
    assert len(SOURCES) == 11


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_saved_notebook_matches_its_source(source: Path) -> None:
    assert build.stale(source) == [], "rebuild it: .venv/bin/python notebooks/build.py " + \
        source.stem[:2]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_saved_notebook_was_executed_top_to_bottom(source: Path) -> None:
    nb = nbformat.read(build.target(source), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    shown = sum(bool(c.outputs) for c in code)
    assert shown >= 0.75 * len(code) and code[-1].outputs, "a saved page shows its results"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert "widgets" not in nb.metadata  # the static fallbacks are what a saved page shows
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_prints_its_checks(source: Path) -> None:
    """Each notebook checks its own claims: printed comparisons that came out True."""
    nb = nbformat.read(build.target(source), as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.outputs)
    assert re.search(r"\bTrue\b", text)


def test_percent_format_parser() -> None:
    cells = build.cells_of("# %% [markdown]\n# # Title\n#\n# text\n\n# %%\nx = 1\n\n\n"
                           "# %% tags=nbval-ignore-output\nprint(x)\n")
    assert [c.cell_type for c in cells] == ["markdown", "code", "code"]
    assert cells[0].source == "# Title\n\ntext"
    assert cells[1].source == "x = 1"
    assert cells[2].metadata["tags"] == ["nbval-ignore-output"]
