"""explorer/units.py: byte sizes as users write them, and the memory charts' byte ticks."""

from explorer.units import byte_ticks, format_bytes


def test_byte_ticks_are_whole_power_of_two_steps_from_zero():
    assert byte_ticks(100 * 2**20) == [k * 2**20 for k in (0, 32, 64, 96)]
    assert byte_ticks(5) == [0, 1, 2, 3, 4, 5]
    assert byte_ticks(0) == [0]
    assert [format_bytes(t) for t in byte_ticks(3 * 2**30)] == ["0 B", "1.0 GiB", "2.0 GiB",
                                                               "3.0 GiB"]
    for top in (1, 7, 1000, 12345678, 2.5e9):
        ticks = byte_ticks(top)
        assert ticks[0] == 0 and ticks[-1] <= top and 2 <= len(ticks) <= 6
        step = ticks[1] - ticks[0] if len(ticks) > 1 else 1
        assert step & (step - 1) == 0  # a power of two
