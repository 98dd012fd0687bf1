"""Byte sizes as users write them: 1024, "256MiB", "1.5 GB"."""

from __future__ import annotations

import math
import numbers
import re
from fractions import Fraction

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_EXAMPLES = "(write e.g. 1048576, '256MiB' or '1.5GB')"


def parse_bytes(value: int | float | str) -> int:
    """A positive whole number of bytes: an int, a float with no fractional part (1e9), or a
    string with a unit ("256MiB", "1.5 GB": a fractional count of KB and up rounds down to
    whole bytes). Anything else is a ValueError naming the value."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | str):
        raise ValueError(f"not a byte size: {value!r} {_EXAMPLES}")
    if isinstance(value, numbers.Real):
        if not isinstance(value, numbers.Integral):
            if not math.isfinite(value):
                raise ValueError(f"a byte size must be finite, got {value!r}")
            if value != int(value):
                raise ValueError(f"a byte size must be a whole number of bytes, got {value!r}")
        if value <= 0:
            raise ValueError(f"a byte size must be positive, got {value!r}")
        return int(value)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"not a byte size: {value!r} {_EXAMPLES}")
    scale = _UNITS[m.group(2).upper()]
    exact = Fraction(m.group(1)) * scale
    if scale == 1 and exact.denominator != 1:
        raise ValueError(f"a byte size must be a whole number of bytes, got {value!r}")
    if exact < 1:
        raise ValueError(f"a byte size must be at least 1 byte, got {value!r}")
    return int(exact)


def format_bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def byte_ticks(top: int | float, most: int = 5) -> list[int]:
    """Axis ticks for 0..top bytes: multiples of a power-of-two step (so each is a whole
    number of KiB, MiB or GiB once past them), at most `most` + 1 of them, from 0. The memory
    charts' byte axes (measure/timeline.py; extension/src/plot.ts byteTicks, the same rule)."""
    if top <= 0:
        return [0]
    step = 1
    while top / step > most:
        step *= 2
    return [k * step for k in range(int(top // step) + 1)]
