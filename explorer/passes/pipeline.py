"""A flat list of passes, run one stage at a time with a callback after each.

A pipeline is given as pass objects, registered names, or a spec string "simplify,cse,dce".
A name in a spec may carry the pass's options, as xDSL writes them:
`split{memory-limit=64MiB}` or `simplify{fold-limit=16}` (kebab-case keys, the pass's fields).
`configure(passes, options)` then fills what the spec left open from the compile options:
a pass declares the options it reads (`options_read`), and a pass that an option calls for
(`called_for_by`) joins a pipeline that lacks it, after the pass its `slot_after` names (or at
the end). So `explore(memory_limit=...)` is sugar: no pass is special-cased here.
The verifier runs after every pass when asked, and always under pytest (or with
GAMBIT_VERIFY=1), so a test that runs a pipeline names the pass that broke the graph.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..ir.graph import Graph
from ..ir.remarks import collecting, settled
from ..ir.verify import VerifyError, verify
from ..options import CompileOptions
from . import get, names
from .base import Pass, PassReport


class PipelineError(ValueError):
    """A pipeline spec that names no registered pass, or holds something that is not a pass."""


def verify_by_default() -> bool:
    return os.environ.get("GAMBIT_VERIFY") == "1" or "PYTEST_CURRENT_TEST" in os.environ


_ITEM = re.compile(r"\s*([^{},\s]*)\s*(?:\{([^{}]*)\})?\s*")


def _value(text: str) -> Any:
    """An option's value as written: an int, a float, true/false, or the text itself."""
    text = text.strip()
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def _with_options(p: Pass, options: str, spec: str) -> Pass:
    fields = {f.name for f in dataclasses.fields(p)} - {"name"} if dataclasses.is_dataclass(p) \
        else set()
    changes = {}
    for item in filter(None, (x.strip() for x in options.split(","))):
        key, eq, value = item.partition("=")
        field = key.strip().replace("-", "_")
        if not eq or field not in fields:
            known = ", ".join(sorted(f.replace("_", "-") for f in fields)) or "none"
            raise PipelineError(f"pass {p.name!r} has no option {key.strip()!r} in pipeline "
                                f"{spec!r} (its options: {known})")
        changes[field] = _value(value)
    try:
        return dataclasses.replace(p, **changes) if changes else p  # type: ignore[type-var]
    except (TypeError, ValueError) as e:
        raise PipelineError(f"pass {p.name!r} in pipeline {spec!r}: {e}") from None


def _by_name(name: str, spec: str, options: str | None = None) -> Pass:
    if not name:
        raise PipelineError(f"empty pass name in pipeline {spec!r}")
    try:
        p = get(name)
    except KeyError:
        close = difflib.get_close_matches(name, names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise PipelineError(f"no pass named {name!r} in pipeline {spec!r}{hint} "
                            f"(registered: {', '.join(names()) or 'none'})") from None
    return p if options is None else _with_options(p, options, spec)


def parse_spec(spec: str) -> list[Pass]:
    """'simplify,split{memory-limit=64MiB},dce' -> pass objects."""
    out, pos, text = [], 0, spec.strip()
    while text and pos <= len(text):
        m = _ITEM.match(text, pos)
        end = m.end() if m else pos
        if m is None or (end < len(text) and text[end] != ","):
            raise PipelineError(f"cannot read pipeline {spec!r} at {text[pos:pos + 20]!r} "
                                f"(write e.g. 'simplify,split{{memory-limit=64MiB}},dce')")
        out.append(_by_name(m.group(1), spec, m.group(2)))
        pos = end + 1
    return out


def pass_spec(p: Pass) -> str:
    """A pass as a spec names it (parse_spec reads it back): its name, with the options set
    away from the pass's defaults, as in 'split{memory-limit=16777216}'."""
    changed = []
    for f in dataclasses.fields(p) if dataclasses.is_dataclass(p) else ():
        default = f.default if f.default is not dataclasses.MISSING else \
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        value = getattr(p, f.name)
        if f.name != "name" and value != default:
            text = str(value).lower() if isinstance(value, bool) else str(value)
            changed.append(f"{f.name.replace('_', '-')}={text}")
    return p.name + (f"{{{','.join(changed)}}}" if changed else "")


def configure(passes: Sequence[Pass], options: CompileOptions) -> list[Pass]:
    """`passes` with the options each reads filled from `options` where unset, plus the
    passes that a set option calls for and the pipeline lacks (see the module docstring)."""
    out = [_filled(p, options) for p in passes]
    present = {p.name for p in out}
    for name in names():
        p = get(name)
        wanted = getattr(p, "called_for_by", None)
        if wanted is None or name in present or getattr(options, wanted, None) is None:
            continue
        slot = [q.name for q in out]
        after = getattr(p, "slot_after", None)
        at = slot.index(after) + 1 if after in slot else len(out)
        out.insert(at, _filled(p, options))
    return out


def _filled(p: Pass, options: CompileOptions) -> Pass:
    read = getattr(p, "options_read", ())
    changes = {k: getattr(options, k) for k in read
               if getattr(p, k, None) is None and getattr(options, k, None) is not None}
    return dataclasses.replace(p, **changes) if changes else p  # type: ignore[type-var]


def resolve(pipeline: str | Pass | Sequence[str | Pass]) -> list[Pass]:
    """'simplify,cse,dce', ['simplify', CSE()] or one pass -> pass objects, in order."""
    if isinstance(pipeline, str):
        return parse_spec(pipeline)
    if not isinstance(pipeline, Sequence):
        pipeline = [pipeline]
    out: list[Pass] = []
    for item in pipeline:
        if isinstance(item, str):
            out += parse_spec(item)
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
    """Run `passes` in order; `on_stage(pass, graph, report)` after each one. The remarks a
    pass made without putting them in its report (explorer/ir/remarks.py) join the report's,
    named for the pass."""
    if check is None:
        check = verify_by_default()
    for p in passes:
        with collecting() as said:
            result = p(graph)
        if not (isinstance(result, tuple) and len(result) == 2
                and isinstance(result[0], Graph) and isinstance(result[1], PassReport)):
            raise PipelineError(f"pass {p.name!r} returned {type(result).__name__}, not "
                                f"(Graph, PassReport)")
        graph, report = result
        if said or any(not r.pass_ for r in report.remarks):
            report = dataclasses.replace(
                report, remarks=settled([*report.remarks, *said], p.name))
        if check:
            try:
                verify(graph)
            except VerifyError as e:
                raise VerifyError(f"after pass {p.name!r}: {e}") from None
        if on_stage is not None:
            on_stage(p, graph, report)
    return graph
