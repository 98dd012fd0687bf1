"""What a pass is: a pure function Graph -> (Graph, PassReport), with a kebab-case name.

A report carries the firings (`rewrites`) and the remarks: what the pass did not do, and
why (explorer/ir/remarks.py). `RewritePass` turns a rule list (explorer/ir/rewrite.py) into
a pass, so a rule set written in a notebook registers and steps exactly like a built-in
pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..ir.graph import Graph
from ..ir.remarks import Remark, collecting, settled
from ..ir.rewrite import Rewrite, Rule, rewrite
from .bodies import descend


@dataclass(frozen=True)
class PassReport:
    changed: bool
    rewrites: tuple[Rewrite, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())
    remarks: tuple[Remark, ...] = field(default=())  # what the pass did not do, and why


@runtime_checkable
class Pass(Protocol):
    name: str

    def __call__(self, graph: Graph) -> tuple[Graph, PassReport]: ...


def apply_rules(graph: Graph, rules: Sequence[Rule], prune: bool,
                stop_after: int | None = None) -> tuple[Graph, list[Rewrite]]:
    """`rules` to a fixed point inside every control-flow body, then in `graph` (descend's
    order, which is the order the firings are logged in); with `stop_after`, only the first
    that many firings."""
    left = stop_after

    def run(g: Graph) -> tuple[Graph, list[Rewrite]]:
        nonlocal left
        out, log = rewrite(g, rules, prune=prune, stop_after=left)
        if left is not None:
            left -= len(log)
        return out, log

    return descend(graph, run)


class RulePass:
    """A pass made of rules (the built-in rule passes and `RewritePass`): run to a fixed
    point, or stepped firing by firing (`after_firings`, what the view's rewrite stepper and
    `Trace.after_firing` use)."""

    prune: bool = True

    def rule_list(self) -> Sequence[Rule]:
        raise NotImplementedError

    def __call__(self, graph: Graph) -> tuple[Graph, PassReport]:
        with collecting() as said:
            out, log = apply_rules(graph, self.rule_list(), self.prune)
        return out, PassReport(changed=bool(log), rewrites=tuple(log),
                               remarks=current(said, log, getattr(self, "name", "")))

    def after_firings(self, graph: Graph, k: int) -> Graph:
        """`graph` after this pass's first `k` firings, in the order its report logs them."""
        return apply_rules(graph, self.rule_list(), self.prune, stop_after=k)[0]


def current(remarks: Sequence[Remark], log: Sequence[Rewrite], pass_: str = "",
            ) -> tuple[Remark, ...]:
    """The remarks of a rule run that still hold at its end: a rule that declined a node and
    later fired on it (after other rewrites changed its inputs) leaves no remark there, nor
    does a rule that declined a node the run itself made (the pass's own output, not the
    user's program: a re-associated chain is then the cheapest)."""
    rewritten = {(r.region, i) for r in log for i in (*r.before, *r.after)}
    return settled((m for m in remarks
                    if not any((m.region, i) in rewritten for i in m.nodes)), pass_)


@dataclass(frozen=True)
class RewritePass(RulePass):
    """A pass that applies `rules` to a fixed point, inside control-flow bodies too (see
    passes/bodies.py). `prune` drops the nodes it made dead."""

    name: str
    rules: tuple[Rule, ...]
    prune: bool = False

    def __init__(self, name: str, rules: Sequence[Rule], prune: bool = False) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "rules", tuple(rules))
        object.__setattr__(self, "prune", prune)

    def rule_list(self) -> Sequence[Rule]:
        return self.rules


__all__ = ["Pass", "PassReport", "Remark", "Rewrite", "RewritePass", "RulePass", "apply_rules",
           "current"]
