"""Fixtures for the view tests; the data lives in viewdata.py and toypasses.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import viewdata  # noqa: E402

import explorer as gx  # noqa: E402


@pytest.fixture(scope="module")
def toy_trace() -> gx.Trace:
    return viewdata.toy_trace()
