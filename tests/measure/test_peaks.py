"""This machine's peaks, measured once and cached (explorer/measure/peaks.py)."""

from __future__ import annotations

import json

from explorer.measure import peaks as peaks_module


def test_peaks_are_measured_once_and_cached(small_peaks, monkeypatch):
    first = peaks_module.peaks("cpu")
    assert first.flops > 0 and first.bandwidth > 0 and first.ridge > 0
    assert json.loads(small_peaks.read_text())
    calls = []
    monkeypatch.setattr(peaks_module, "_measure_cpu",
                        lambda: calls.append(1) or (1e9, 1e9, "counted"))
    assert peaks_module.peaks("cpu") == first and not calls  # from the cache
    again = peaks_module.peaks("cpu", remeasure=True)
    assert calls and again.how == "counted"
    small_peaks.write_text("{not json")  # a damaged cache is measured again, not an error
    assert peaks_module.peaks("cpu").how == "counted"


def test_measured_again_after_a_loaded_measurement_keeps_the_higher_figures(small_peaks,
                                                                            monkeypatch):
    monkeypatch.setattr(peaks_module, "_measure_cpu", lambda: (5e9, 1e9, "loaded"))
    low = peaks_module.peaks("cpu", remeasure=True)
    monkeypatch.setattr(peaks_module, "_measure_cpu", lambda: (2e9, 3e9, "again"))
    again = peaks_module.peaks("cpu", remeasure=True, at_least=low)
    assert (again.flops, again.bandwidth) == (5e9, 3e9)
    assert peaks_module.peaks("cpu") == again  # what the cache keeps
    assert peaks_module.peaks("cpu", remeasure=True).flops == 2e9  # without: the new figures
