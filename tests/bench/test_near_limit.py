"""bench/near_limit.py's figures on made-up profiles: time-weighted shares of the peaks, which
rows count, and the physical floor."""

from __future__ import annotations

import math

import numpy as np
import pytest

import explorer as gx
from bench.near_limit import DOT_MIN, MEMORY_MIN, NearLimit, big_dots, memory_bound, near_limit, time_weighted
from explorer.measure.peaks import Peaks
from explorer.measure.profile import ProfileRow

PEAKS = Peaks("test", "cpu", flops=100e9, bandwidth=10e9, how="made up", measured_at="now")


def row(kind: str, flops: int, nbytes: int, seconds: float, calls: int = 1, timed: str = "",
        place: str = "") -> ProfileRow:
    return ProfileRow(0, kind, kind, "op", "", flops, nbytes, seconds, calls, timed, place)


def test_a_time_weighted_share_is_the_mean_share_weighted_by_seconds() -> None:
    # 1 s at 80% of the peak and 3 s at 20%: (0.8 x 1 + 0.2 x 3) / 4 = 35%
    a, b = row("dot", int(80e9), 1, 1.0), row("dot", int(60e9), 1, 3.0)
    s = time_weighted([a, b], "flops", PEAKS.flops)
    assert s.share == pytest.approx(0.35) and s.seconds == 4.0 and s.rows == 2
    # a body's node: its work counts once per call, its seconds are summed over the calls
    s = time_weighted([row("dot", int(10e9), 1, 0.5, calls=4)], "flops", PEAKS.flops)
    assert s.share == pytest.approx(0.8)
    assert time_weighted([], "bytes", PEAKS.bandwidth).share is None
    assert time_weighted([row("kernel", 0, 10, 0.0)], "bytes", PEAKS.bandwidth).share is None


def test_only_big_dots_and_large_memory_bound_kernels_count() -> None:
    big, small = row("dot", DOT_MIN, 1, 1.0), row("dot", DOT_MIN - 1, 1, 1.0)
    apart = row("dot", DOT_MIN, 1, 1.0, timed="apart")  # its body's nodes count instead
    assert big_dots([big, small, apart, row("kernel", DOT_MIN, 1, 1.0)]) == [big]
    stream = row("kernel", MEMORY_MIN, MEMORY_MIN, 1.0)  # 1 FLOP/byte, under the ridge of 10
    op = row("op", 0, MEMORY_MIN, 1.0)  # a copy: no FLOPs at all
    dense = row("kernel", 20 * MEMORY_MIN, MEMORY_MIN, 1.0)  # above the ridge: compute-bound
    tiny = row("kernel", 1, MEMORY_MIN - 1, 1.0)
    loop = row("loop", 1, 10 * MEMORY_MIN, 1.0)
    assert memory_bound([stream, op, dense, tiny, loop, big], PEAKS) == [stream, op]


def test_the_floor_is_the_flops_at_peak_plus_the_bytes_at_bandwidth() -> None:
    g = gx.parse("""graph @f {
  %0 = f32[256,256] parameter() {index=0}
  %1 = f32[256,256] parameter() {index=1}
  %2 = f32[256,256] dot_general(%0, %1) {dimension_numbers=(((1,), (0,)), ((), ()))}
  %3 = f32[256,256] add(%2, %0)
  return %3
}""")
    rows = [row("dot", 2 * 256**3, 3 * 256 * 256 * 4, 0.001),
            row("loop", 0, 0, 0.002, timed="whole"), row("kernel", 0, 0, 0.001)]
    n = near_limit(rows, g, PEAKS, seconds=0.005, total=0.004)
    flops = 2 * 256**3 + 256 * 256
    assert n.flops == flops and n.bytes == 3 * 4 * 256 * 256 * 2
    assert n.floor == pytest.approx(flops / PEAKS.flops + n.bytes / PEAKS.bandwidth)
    assert n.over_floor == pytest.approx(0.005 / n.floor) and n.total == 0.004
    assert n.loops == pytest.approx(0.5)  # the loop timed whole: half the profiled run
    assert n.dots.share == pytest.approx(2 * 256**3 / 0.001 / PEAKS.flops)
    assert n.memory.share is None and not math.isnan(n.over_floor)
    assert NearLimit.from_data(n.to_data()) == n
    np.testing.assert_allclose(n.dots.seconds, 0.001)
