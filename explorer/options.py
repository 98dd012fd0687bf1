"""Compile options: the one object that planning, checking, caching and every backend read.

A `Trace` carries its options; `explore(memory_limit=...)`, `gx.compile(memory_limit=...,
backend=...)` and `%%gambit --memory-limit` are sugar for them. The passes that serve an
option (the split pass serves `memory_limit`) take it from here unless the pipeline spec sets
it on the pass itself, as in `split{memory-limit=64MiB}`.

A limit may be per device: `memory_limit="16MiB/device"` (or `CompileOptions(memory_limit=...,
per_device=True)`) bounds what one device holds of a sharded program (the planner's
`per_device_peak`); a plain limit bounds what the whole program holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from .units import format_bytes, parse_bytes


@dataclass(frozen=True)
class CompileOptions:
    """memory_limit: bytes of live temporaries a run may hold (None: no limit).
    backend: the backend runs default to, and whose declared temporaries the memory planner
    counts ("reference" unless said otherwise)."""

    memory_limit: int | None = None
    backend: str = "reference"
    per_device: bool = False  # memory_limit bounds one device's share of a sharded program

    @classmethod
    def make(cls, memory_limit: int | float | str | None = None, backend: str | None = None,
             base: CompileOptions | None = None) -> CompileOptions:
        """Options from user-facing values (a limit such as "256MiB", or "16MiB/device"),
        over `base`."""
        out = base or cls()
        if memory_limit is not None:
            limit, per_device = parse_limit(memory_limit)
            out = replace(out, memory_limit=limit, per_device=per_device)
        if backend is not None:
            out = replace(out, backend=backend)
        return out

    def describe(self) -> str:
        limit = "none" if self.memory_limit is None else format_bytes(self.memory_limit)
        if self.memory_limit is not None and self.per_device:
            limit += " per device"
        return f"memory limit {limit}, backend {self.backend}"

    def with_(self, **changes: Any) -> CompileOptions:
        return replace(self, **changes)


_PER_DEVICE = re.compile(r"\s*(/\s*device|per\s+device)\s*$", re.IGNORECASE)


def parse_limit(value: int | float | str) -> tuple[int, bool]:
    """A memory limit as (bytes, per device?): "16MiB/device" and "16MiB per device" are per
    device; anything else is parse_bytes's (a ValueError naming a bad value)."""
    if isinstance(value, str):
        m = _PER_DEVICE.search(value)
        if m:
            try:
                return parse_bytes(value[:m.start()]), True
            except ValueError as e:
                raise ValueError(f"memory limit {value!r}: {e}") from None
    return parse_bytes(value), False
