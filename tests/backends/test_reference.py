"""The reference interpreter: results, freed temporaries, measured peak, argument checks."""

from __future__ import annotations

import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference
from explorer.ir import GraphBuilder, TensorType


def test_peak_counts_temporaries_not_inputs_or_outputs() -> None:
    n = 1 << 18  # 1 MiB of float32

    def f(x):
        a = x * 2.0  # temporary, 1 MiB
        b = a + 1.0  # temporary, 1 MiB; a dies here
        return b * 3.0  # output

    x = np.ones(n, np.float32)
    t = gx.explore(f, x, pipeline=[])
    r = t.run()
    np.testing.assert_allclose(r.value, f(x))
    mib = 4 * n
    # two 1 MiB temporaries are live together at most (a while b is computed)
    assert 1.9 * mib <= r.peak_bytes <= 2.2 * mib, r.peak_bytes
    assert t.final.cost.peak_bytes == 2 * mib
    assert r.seconds > 0


def test_values_are_freed_after_last_use() -> None:
    b = GraphBuilder()
    x = b.param(TensorType((4,), "f32"), "x")
    y = b.add("exp", [x])
    z = b.add("neg", [y])
    w = b.add("mul", [z, z])
    g = b.build([w])
    assert reference.last_uses(g) == {y: [x], z: [y], w: [z]}


def test_dtype_coercion_and_errors() -> None:
    t = gx.explore(lambda x: x + 1, np.zeros(3, np.float32), pipeline=[])
    assert t.run(np.zeros(3, np.float64)).value.dtype == np.float32  # same kind: cast
    with pytest.raises(reference.ArgumentError, match="element type"):
        t.run(np.zeros(3, np.complex64))


def test_units() -> None:
    assert gx.parse_bytes("256MiB") == 256 * 2**20
    assert gx.parse_bytes("1.5 GB") == 1_500_000_000
    assert gx.parse_bytes("64KiB") == 65536
    assert gx.parse_bytes("2kb") == 2000
    assert gx.parse_bytes(4096) == 4096
    for bad in ("ten MB", "-5MiB", "5 parsecs", 0, True):
        with pytest.raises(ValueError):
            gx.parse_bytes(bad)
