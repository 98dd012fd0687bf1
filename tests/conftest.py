"""Shared pytest configuration: markers, and the fuzz scale switch (GAMBIT_FUZZ=full)."""

from __future__ import annotations

import os

import pytest

FULL_FUZZ = os.environ.get("GAMBIT_FUZZ") == "full"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fuzz: fuzz/property tests; `make fuzz` runs them at full scale")
    config.addinivalue_line("markers", "browser: real-browser tests (Playwright + chromium)")
    config.addinivalue_line("markers", "gpu: needs CuPy and a GPU; skipped without them")
