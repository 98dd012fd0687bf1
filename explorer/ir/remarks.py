"""Remarks: what a pass decided not to do, and why (LLVM's optimization remarks, for our passes).

A remark sits beside a pass's rewrites in its report (`stage.report.remarks`). Each names:

    pass_    the pass that made it ("fuse"); filled by the pipeline when a pass leaves it empty
    kind     "missed" (an optimization that did not happen) or "analysis" (a decision, with its
             figures, that a user may want to know about)
    rule     the rule or decision ("producer-has-users-in-other-kernels", "mul-by-one")
    reason   the reason in words, with the figures that decided it
    nodes    the node ids it is about (ids of the graph the pass read, or of the body named
             by `region`)
    source   the user's line ("file:line") of the first node, where there is one
    region   "" for the graph itself, else the control-flow body ("%7.body"), as for rewrites

How a pass makes them (built-in and user passes alike):

    from explorer.ir.remarks import missed, analysis
    missed("fuse", "opaque-producer", "%4 is opaque: no kernel can hold it", [4], graph)

`missed`/`analysis` append to the remarks being collected (the pipeline collects around each
pass, and a `RulePass` around its rules), and return the remark. A rule's replacement function
says why it declined with `ctx.miss(reason)` (explorer/ir/rewrite.py). Outside any collection
(a pass called by hand) they only return the remark. The same (rule, nodes, reason) is kept once.

Remarks can be switched off (`GAMBIT_REMARKS=0` in the environment, or `with disabled():`):
`missed`/`analysis` then record nothing, and a pass that has work to do only to explain
itself skips it where `enabled()` is false (bench/remarks.py measures what remarks cost).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

from .graph import Graph

KINDS = ("missed", "analysis")


@dataclass(frozen=True)
class Remark:
    kind: str
    rule: str
    reason: str
    nodes: tuple[int, ...] = ()
    source: str | None = None
    pass_: str = ""
    region: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"a remark's kind is one of {KINDS}, got {self.kind!r}")

    def where(self) -> str:
        ids = ", ".join(f"%{i}" for i in self.nodes)
        inside = f" in {self.region}" if self.region else ""
        return f"{ids}{inside}"

    def __str__(self) -> str:
        line = f" ({self.source})" if self.source else ""
        return f"[{self.pass_ or '?'}] {self.kind} {self.rule} at {self.where()}: {self.reason}{line}"

    def to_json(self) -> dict[str, object]:
        return {"pass": self.pass_, "kind": self.kind, "rule": self.rule, "reason": self.reason,
                "nodes": list(self.nodes), "source": self.source, "region": self.region}


_COLLECTING: ContextVar[list[Remark] | None] = ContextVar("gambit_remarks", default=None)
_REGION: ContextVar[str] = ContextVar("gambit_remark_region", default="")
_ENABLED: ContextVar[bool] = ContextVar(
    "gambit_remarks_enabled", default=os.environ.get("GAMBIT_REMARKS", "1") != "0")


def enabled() -> bool:
    """Whether remarks are being made (off under `disabled()` or with GAMBIT_REMARKS=0)."""
    return _ENABLED.get()


@contextmanager
def disabled() -> Iterator[None]:
    """Make no remarks inside the block (to measure what they cost, or to run a pass quietly)."""
    token = _ENABLED.set(False)
    try:
        yield
    finally:
        _ENABLED.reset(token)


@contextmanager
def collecting() -> Iterator[list[Remark]]:
    """Collect the remarks made inside the block into the list it yields (nested collections
    each get their own; the inner list is not copied to the outer one)."""
    out: list[Remark] = []
    token = _COLLECTING.set(out)
    try:
        yield out
    finally:
        _COLLECTING.reset(token)


@contextmanager
def in_region(path: str) -> Iterator[None]:
    """Remarks made inside the block are about the body at `path` (joined to any outer one)."""
    outer = _REGION.get()
    token = _REGION.set(f"{outer}/{path}" if outer else path)
    try:
        yield
    finally:
        _REGION.reset(token)


def _source(graph: Graph | None, nodes: Sequence[int]) -> str | None:
    if graph is None:
        return None
    for i in nodes:
        try:
            n = graph.node(i)
        except KeyError:
            continue
        if n.source is not None:
            return str(n.source)
    return None


def remark(kind: str, pass_: str, rule: str, reason: str, nodes: Iterable[int] = (),
           graph: Graph | None = None, source: str | None = None) -> Remark:
    """Make a remark (the user's line from `graph`'s nodes unless `source` is given) and add
    it to the remarks being collected."""
    ids = tuple(int(i) for i in nodes)
    if not _ENABLED.get():
        return Remark(kind, rule, reason, ids, source, pass_, "")
    r = Remark(kind, rule, reason, ids, source if source is not None else _source(graph, ids),
               pass_, _REGION.get())
    sink = _COLLECTING.get()
    if sink is not None:
        sink.append(r)
    return r


def missed(pass_: str, rule: str, reason: str, nodes: Iterable[int] = (),
           graph: Graph | None = None, source: str | None = None) -> Remark:
    return remark("missed", pass_, rule, reason, nodes, graph, source)


def analysis(pass_: str, rule: str, reason: str, nodes: Iterable[int] = (),
             graph: Graph | None = None, source: str | None = None) -> Remark:
    return remark("analysis", pass_, rule, reason, nodes, graph, source)


def settled(remarks: Iterable[Remark], pass_: str = "") -> tuple[Remark, ...]:
    """`remarks` once each (by pass, kind, rule, nodes, region, reason; first kept), with an
    empty pass name filled by `pass_`."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for r in remarks:
        if pass_ and not r.pass_:
            r = replace(r, pass_=pass_)
        key = (r.pass_, r.kind, r.rule, r.nodes, r.region, r.reason)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return tuple(out)


__all__ = ["KINDS", "Remark", "analysis", "collecting", "disabled", "enabled", "in_region",
           "missed", "remark", "settled"]
