"""Ours vs XLA's (explorer/xla/side_by_side.py): our final stage next to XLA's final module."""

from __future__ import annotations

import pytest

import explorer as gx
from tests.corpora.graphs import SEEDS


def test_compare_with_xla() -> None:
    fn, args = SEEDS["euclidean_naive"]
    c = gx.compare_with_xla(fn, *args)
    assert c.xla.kernels >= 1 and c.xla.reported_temp_bytes is not None
    assert c.xla.reported_flops and c.ours.flops > 0
    assert c.xla.flops == pytest.approx(c.xla.reported_flops, rel=0.5)
    text = c.table()
    assert "kernels / fusions" in text and "XLA memory_analysis" in text
    assert "<table>" in c._repr_html_()
