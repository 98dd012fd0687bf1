"""Shared pieces of the browser tests: where chromium is, its flags, and screenshots."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM = os.environ.get("GAMBIT_CHROMIUM", "/usr/bin/chromium")
# As the machine notes say: no sandbox as root, and no background traffic to Google.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def shot(page, name: str) -> Path:  # type: ignore[no-untyped-def]
    """Keep a screenshot as a test artifact."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path
