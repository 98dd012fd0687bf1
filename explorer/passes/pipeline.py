"""A flat list of passes, run one stage at a time with a callback after each."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ..ir.graph import Graph
from ..ir.verify import VerifyError, verify
from . import get
from .base import Pass, PassReport


class PipelineError(ValueError):
    pass


def resolve(pipeline: str | Sequence[str | Pass]) -> list[Pass]:
    """'simplify,cse,dce' or ['simplify', CSE()] -> pass objects."""
    items: Iterable[str | Pass]
    items = [s.strip() for s in pipeline.split(",") if s.strip()] if isinstance(pipeline, str) \
        else pipeline
    out: list[Pass] = []
    for item in items:
        if isinstance(item, str):
            try:
                out.append(get(item))
            except KeyError as e:
                raise PipelineError(str(e.args[0])) from None
        elif callable(item) and isinstance(getattr(item, "name", None), str):
            out.append(item)
        else:
            raise PipelineError(f"{item!r} is neither a pass name nor a pass")
    return out


def run_pipeline(graph: Graph, passes: Sequence[Pass], *, check: bool = False,
                 on_stage: Callable[[Pass, Graph, PassReport], None] | None = None) -> Graph:
    for p in passes:
        graph, report = p(graph)
        if check:
            try:
                verify(graph)
            except VerifyError as e:
                raise VerifyError(f"after pass {p.name!r}: {e}") from None
        if on_stage is not None:
            on_stage(p, graph, report)
    return graph
