"""What a pass is: a pure function Graph -> (Graph, PassReport), with a kebab-case name.

`RewritePass` turns a rule list (explorer/ir/rewrite.py) into a pass, so a rule set written
in a notebook registers and steps exactly like a built-in pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..ir.graph import Graph
from ..ir.rewrite import Rewrite, Rule, rewrite
from .bodies import descend


@dataclass(frozen=True)
class PassReport:
    changed: bool
    rewrites: tuple[Rewrite, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())


@runtime_checkable
class Pass(Protocol):
    name: str

    def __call__(self, graph: Graph) -> tuple[Graph, PassReport]: ...


@dataclass(frozen=True)
class RewritePass:
    """A pass that applies `rules` to a fixed point, inside control-flow bodies too (see
    passes/bodies.py). `prune` drops the nodes it made dead."""

    name: str
    rules: tuple[Rule, ...]
    prune: bool = False

    def __init__(self, name: str, rules: Sequence[Rule], prune: bool = False) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "rules", tuple(rules))
        object.__setattr__(self, "prune", prune)

    def __call__(self, graph: Graph) -> tuple[Graph, PassReport]:
        out, log = descend(graph, lambda g: rewrite(g, self.rules, prune=self.prune))
        return out, PassReport(changed=out is not graph, rewrites=tuple(log))


__all__ = ["Pass", "PassReport", "Rewrite", "RewritePass"]
