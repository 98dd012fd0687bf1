"""What a pass is: a pure function Graph -> (Graph, PassReport), with a kebab-case name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..ir.graph import Graph


@dataclass(frozen=True)
class Rewrite:
    """One rule firing: which rule, the node ids it replaced and produced, the user's line."""

    rule: str
    before: tuple[int, ...]
    after: tuple[int, ...]
    source: str | None = None


@dataclass(frozen=True)
class PassReport:
    changed: bool
    rewrites: tuple[Rewrite, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())


@runtime_checkable
class Pass(Protocol):
    name: str

    def __call__(self, graph: Graph) -> tuple[Graph, PassReport]: ...
