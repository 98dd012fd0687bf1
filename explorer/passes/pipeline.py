"""A flat list of passes, run one stage at a time with a callback after each.

A pipeline is given as pass objects, registered names, or a spec string "simplify,cse,dce".
The verifier runs after every pass when asked, and always under pytest (or with
GAMBIT_VERIFY=1), so a test that runs a pipeline names the pass that broke the graph.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Sequence

from ..ir.graph import Graph
from ..ir.verify import VerifyError, verify
from . import get, names
from .base import Pass, PassReport


class PipelineError(ValueError):
    """A pipeline spec that names no registered pass, or holds something that is not a pass."""


def verify_by_default() -> bool:
    return os.environ.get("GAMBIT_VERIFY") == "1" or "PYTEST_CURRENT_TEST" in os.environ


def _by_name(name: str, spec: str) -> Pass:
    if not name:
        raise PipelineError(f"empty pass name in pipeline {spec!r}")
    try:
        return get(name)
    except KeyError:
        close = difflib.get_close_matches(name, names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise PipelineError(f"no pass named {name!r} in pipeline {spec!r}{hint} "
                            f"(registered: {', '.join(names()) or 'none'})") from None


def resolve(pipeline: str | Pass | Sequence[str | Pass]) -> list[Pass]:
    """'simplify,cse,dce', ['simplify', CSE()] or one pass -> pass objects, in order."""
    if isinstance(pipeline, str):
        spec = pipeline.strip()
        return [_by_name(s.strip(), pipeline) for s in spec.split(",")] if spec else []
    if not isinstance(pipeline, Sequence):
        pipeline = [pipeline]
    out: list[Pass] = []
    for item in pipeline:
        if isinstance(item, str):
            out.append(_by_name(item.strip(), item))
        elif isinstance(item, type) and isinstance(getattr(item, "name", None), str):
            out.append(item())  # a pass class with default options
        elif callable(item) and isinstance(getattr(item, "name", None), str):
            out.append(item)  # type: ignore[arg-type]
        else:
            raise PipelineError(f"{item!r} is neither a pass name nor a pass (a callable "
                                f"Graph -> (Graph, PassReport) with a `name`)")
    return out


def run_pipeline(graph: Graph, passes: Sequence[Pass], *, check: bool | None = None,
                 on_stage: Callable[[Pass, Graph, PassReport], None] | None = None) -> Graph:
    """Run `passes` in order; `on_stage(pass, graph, report)` after each one."""
    if check is None:
        check = verify_by_default()
    for p in passes:
        result = p(graph)
        if not (isinstance(result, tuple) and len(result) == 2
                and isinstance(result[0], Graph) and isinstance(result[1], PassReport)):
            raise PipelineError(f"pass {p.name!r} returned {type(result).__name__}, not "
                                f"(Graph, PassReport)")
        graph, report = result
        if check:
            try:
                verify(graph)
            except VerifyError as e:
                raise VerifyError(f"after pass {p.name!r}: {e}") from None
        if on_stage is not None:
            on_stage(p, graph, report)
    return graph
