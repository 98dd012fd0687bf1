"""Byte sizes as users write them: 1024, "256MiB", "1.5 GB"."""

from __future__ import annotations

import re

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_bytes(value: int | float | str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"not a byte size: {value!r}")
    if isinstance(value, int | float):
        if value <= 0 or value != value:
            raise ValueError(f"a byte size must be positive, got {value!r}")
        return int(value)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(value))
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"not a byte size: {value!r} (write e.g. 1048576, '256MiB' or '1.5GB')")
    n = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if n <= 0:
        raise ValueError(f"a byte size must be positive, got {value!r}")
    return int(n)


def format_bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
