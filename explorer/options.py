"""Compile options: the one object that planning, checking, caching and every backend read.

A `Trace` carries its options; `explore(memory_limit=...)`, `gx.compile(memory_limit=...,
backend=...)` and `%%gambit --memory-limit` are sugar for them. The passes that serve an
option (the split pass serves `memory_limit`) take it from here unless the pipeline spec sets
it on the pass itself, as in `split{memory-limit=64MiB}`.
"""

from __future__ import annotations

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

    @classmethod
    def make(cls, memory_limit: int | float | str | None = None, backend: str | None = None,
             base: CompileOptions | None = None) -> CompileOptions:
        """Options from user-facing values (a limit such as "256MiB"), over `base`."""
        out = base or cls()
        if memory_limit is not None:
            out = replace(out, memory_limit=parse_bytes(memory_limit))
        if backend is not None:
            out = replace(out, backend=backend)
        return out

    def describe(self) -> str:
        limit = "none" if self.memory_limit is None else format_bytes(self.memory_limit)
        return f"memory limit {limit}, backend {self.backend}"

    def with_(self, **changes: Any) -> CompileOptions:
        return replace(self, **changes)
