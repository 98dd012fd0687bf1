"""Fixtures for the view tests; the data lives in viewdata.py and toypasses.py."""

from __future__ import annotations

import pytest

import explorer as gx
from tests.view import viewdata


@pytest.fixture(scope="module")
def toy_trace() -> gx.Trace:
    return viewdata.toy_trace()


@pytest.fixture(scope="module")
def remark_trace() -> gx.Trace:
    return viewdata.remark_trace()
