"""Shared pieces of the browser tests: where chromium is, its flags, and screenshots and logs
kept as artifacts (written through a temporary name, then renamed into place)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from explorer.files import replacing

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM = os.environ.get("GAMBIT_CHROMIUM", "/usr/bin/chromium")
# As the machine notes say: no sandbox as root, and no background traffic to Google.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def keep(name: str, write: Callable[[Path], object]) -> Path:
    """Keep an artifact: `write(tmp)` writes it under a temporary name beside it, which is then
    renamed into place, so that no reader (nor another pytest worker keeping the same name)
    meets a half-written file."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    with replacing(path) as tmp:
        write(tmp)
    return path


def shot(page, name: str) -> Path:  # type: ignore[no-untyped-def]
    """Keep a screenshot as a test artifact."""
    return keep(f"{name}.png", lambda tmp: page.screenshot(path=str(tmp), full_page=False))
