"""The measurement tests' fixtures: machine peaks measured small, cached in a temporary
directory."""

from __future__ import annotations

import pytest

from explorer.measure import peaks as peaks_module


@pytest.fixture
def small_peaks(monkeypatch, tmp_path):
    """Peaks measured small and cached in a temporary directory."""
    monkeypatch.setattr(peaks_module, "GEMM_N", {"cpu": 128, "gpu": 256})
    monkeypatch.setattr(peaks_module, "TRIAD_N", 1 << 16)
    monkeypatch.setattr(peaks_module, "REPEATS", 2)
    monkeypatch.setattr(peaks_module, "cache_path", lambda: tmp_path / "peaks.json")
    return tmp_path / "peaks.json"
