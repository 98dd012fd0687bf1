"""trace.numerics: how far each stage's values are from the program computed in float64.

Every stage runs on the reference interpreter twice on the same inputs: as it is (at the
program's precision) and widened to float64 (backends/widen.py: the same graph, its float
types made float64; the interpreter computes each node in its node's type). The reference
is the *traced* stage's float64 run: the program as the user wrote it, computed in float64.

An error is measured against that reference rounded to the value's own type (the correctly
rounded result), so a program that rounds once (x + y in float32) has error 0:
  max_rel   the largest error relative to the value's magnitude, as closeness.py measures
            every error (its largest finite entry, at least 1; closeness.relative_error);
  max_ulps  the largest distance, entry by entry, in units in the last place of the value's
            type: how many representable values lie between it and the rounded reference
            (integers: the largest difference; non-finite values that moved: infinite).
For each stage: each output's error (`outputs`), how far the stage's own float64 run is from
the reference (`drift`: the pass changed the mathematics, not only the rounding), and the
error of each node that survives from the traced stage (`nodes`: same id, so the same value;
nodes of the top level: region bodies number their nodes afresh, and a loop's or a scan's
body sees chunks and iterations).

`first_change(rtol)` names the first stage whose outputs moved past the tolerance: whose
output error against the reference exceeds the traced stage's own by more than `rtol` (the
traced program's rounding is the baseline, so an ill-conditioned program does not flag its
first pass). For a rule pass it then bisects the pass's firings (`Trace.after_firing`) to the
first one after which the outputs are past it (a bisection: where the firings move the
error back and forth, one firing that takes it past): the rule, its nodes and the user's line.

An opaque node (a JAX primitive without a row) runs through JAX in both precisions, the
float64 run with JAX's 64-bit types on; one that JAX will not run on float64 operands runs at
its own precision in the float64 run too, and `notes` says so (its error is then not seen).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..backends.reference import NumpyInterpreter, check_args
from ..backends.widen import Memo, OpaqueWideError, widened
from ..ir import dtypes
from ..ir.graph import Graph, Node, TensorType, TupleType
from ..ir.opaque import OpaqueImplError
from ..ir.ops.regions import bodies
from .closeness import magnitude, relative_error
from .inputs import random_inputs
from .protocol import TraceLike

DEFAULT_RTOL = 1e-5


class NumericsError(RuntimeError):
    """A stage that cannot be measured (an opaque node whose implementation is not here)."""


@dataclass(frozen=True)
class OutputError:
    index: int
    max_rel: float
    max_ulps: float


@dataclass(frozen=True)
class NodeError:
    max_rel: float
    max_ulps: float


@dataclass
class StageNumerics:
    index: int
    name: str
    outputs: list[OutputError]
    nodes: dict[int, NodeError]
    drift: float = 0.0  # max_rel of the stage's own float64 outputs against the reference

    @property
    def max_rel(self) -> float:
        return max((o.max_rel for o in self.outputs), default=0.0)

    @property
    def max_ulps(self) -> float:
        return max((o.max_ulps for o in self.outputs), default=0.0)

    def worst_node(self) -> tuple[int, NodeError] | None:
        """The surviving node with the largest relative error (None: none compared)."""
        if not self.nodes:
            return None
        return max(self.nodes.items(), key=lambda kv: (kv[1].max_rel, kv[1].max_ulps))


@dataclass(frozen=True)
class Change:
    """The first stage (and, for a rule pass, the firing) that moved the outputs."""

    stage: int
    name: str
    error: float  # the stage's output error against the reference (max_rel)
    baseline: float  # the traced stage's
    rtol: float
    firing: int | None = None  # 0-based, in the stage's report.rewrites; None: not bisected
    firings: int = 0
    rule: str | None = None
    before: tuple[int, ...] = ()
    after: tuple[int, ...] = ()
    source: str | None = None
    line: str = ""
    error_before: float | None = None  # the outputs' error just before that firing

    def __str__(self) -> str:
        head = (f"stage {self.stage} {self.name!r} moved the outputs: error {self.error:.3g} "
                f"against float64, the traced program's {self.baseline:.3g} (rtol {self.rtol:g})")
        if self.firing is None:
            return head
        ids = lambda xs: ", ".join(f"%{i}" for i in xs)  # noqa: E731
        where = f" at {self.source}" if self.source else ""
        text = f"\n    {self.line}" if self.line else ""
        return (f"{head}\n  firing {self.firing + 1} of {self.firings}: {self.rule}{where}: "
                f"{ids(self.before)} -> {ids(self.after)} (error {self.error_before:.3g} before "
                f"it, past {self.baseline + self.rtol:.3g} after){text}")


@dataclass
class Numerics:
    stages: list[StageNumerics]
    precision: str  # the program's float types ("f32", "f16, f32"; "exact" where none)
    inputs: str  # which inputs: "the traced example arguments", "random (seed 0)", "given"
    notes: list[str] = field(default_factory=list)
    _probe: Callable[[Graph], float] | None = field(default=None, repr=False, compare=False)
    _trace: Any = field(default=None, repr=False, compare=False)

    def __getitem__(self, key: int | str) -> StageNumerics:
        if isinstance(key, str):
            for s in self.stages:
                if s.name == key:
                    return s
            raise KeyError(f"no stage named {key!r}; stages: "
                           f"{', '.join(s.name for s in self.stages)}")
        return self.stages[key]

    def first_change(self, rtol: float = DEFAULT_RTOL, bisect: bool = True) -> Change | None:
        """The first stage whose outputs' error against float64 exceeds the traced stage's
        by more than `rtol` (module doc), bisected to its firing for a rule pass; None when
        no stage does."""
        if not self.stages:
            return None
        baseline = self.stages[0].max_rel
        limit = baseline + rtol
        for s in self.stages[1:]:
            if s.max_rel > limit:
                break
        else:
            return None
        change = Change(s.index, s.name, s.max_rel, baseline, rtol)
        stage = self._trace.stages[s.index] if self._trace is not None else None
        if not bisect or stage is None or self._probe is None or \
                getattr(stage.pass_, "after_firings", None) is None or not stage.report.rewrites:
            return change
        rewrites = stage.report.rewrites
        lo, hi = 0, len(rewrites)  # past the limit after hi firings, not after lo
        below = self.stages[s.index - 1].max_rel
        while hi - lo > 1:
            mid = (lo + hi) // 2
            error = self._probe(self._trace.after_firing(s.index, mid))
            if error > limit:
                hi = mid
            else:
                lo, below = mid, error
        r = rewrites[hi - 1]
        line = _line_of(self._trace.stages[s.index - 1].graph, r.source)
        return Change(s.index, s.name, s.max_rel, baseline, rtol, hi - 1, len(rewrites), r.rule,
                      tuple(r.before), tuple(r.after), r.source, line, below)

    def rows(self) -> list[tuple[str, ...]]:
        out = []
        for s in self.stages:
            worst = s.worst_node()
            node = f"%{worst[0]} {worst[1].max_rel:.2g}" if worst else "-"
            out.append((str(s.index), s.name, f"{s.max_rel:.3g}", _ulps(s.max_ulps),
                        f"{s.drift:.3g}", f"{len(s.nodes)}", node))
        return out

    HEADER = ("", "stage", "max rel", "max ULPs", "f64 drift", "nodes", "worst node")

    def __str__(self) -> str:
        rows = [self.HEADER, *self.rows()]
        widths = [max(len(r[k]) for r in rows) for k in range(len(self.HEADER))]
        lines = [f"numerics: {self.precision} against float64, on {self.inputs}"]
        for r in rows:
            lines.append("  ".join(c.rjust(w) if k not in (1, 6) else c.ljust(w)
                                   for k, (c, w) in enumerate(zip(r, widths))).rstrip())
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        cells = lambda r, tag: "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in r)  # noqa: E731
        body = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in self.rows())
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)
        return (f"<div class='gx-numerics'><p>numerics: {html.escape(self.precision)} against "
                f"float64, on {html.escape(self.inputs)}</p><table><thead><tr>"
                f"{cells(self.HEADER, 'th')}</tr></thead><tbody>{body}</tbody></table>{notes}"
                f"</div>")


def numerics(trace: TraceLike, args: Sequence[Any] | None = None,
             seed: int | None = None) -> Numerics:
    """Each stage's and each surviving node's error against the traced program computed in
    float64 (module doc), on `args` (arguments like the traced ones), or on random inputs
    drawn with `seed` (measure/inputs.py), or else on the traced example arguments.
    `trace.numerics` keeps the result as the trace's latest (the widget colours nodes by it)."""
    traced = trace.stages[0].graph
    if args is not None and seed is not None:
        raise ValueError("numerics takes arguments or a seed for random inputs, not both")
    if seed is not None:
        flat, inputs = random_inputs(traced, seed, like=trace.example_args), f"random inputs (seed {seed})"
    else:
        given = tuple(args) if args is not None else trace.example_args
        flat = trace.flat_args(given)
        inputs = "the given arguments" if args is not None else "the traced example arguments"
    notes: list[str] = []
    keep: dict[str, str] = {}
    memo = Memo()

    # the reference: the traced stage in float64, every top-level node's value kept
    # rounded to its own type (what each stage's values are compared with)
    want: dict[int, Any] = {}

    def keep_value(n: Node, value: Any) -> None:  # (n is the wide graph's node)
        if n.op != "parameter" and n.id in traced:
            want[n.id] = _rounded(value, traced[n.id].type)

    reference = _run_wide(traced, flat, keep, memo, notes, keep_value)
    want_out = [_rounded(v, traced[o].type) for v, o in zip(reference, traced.outputs)]
    floats = sorted({d for d in _float_types(traced)}, key=dtypes.NAMES.index)

    stages: list[StageNumerics] = []
    values: dict[int, Any] = {}  # the last stage's low-precision value of each compared node
    nodes: dict[int, NodeError]
    for k, stage in enumerate(trace.stages):
        g = stage.graph
        if k and (g is trace.stages[k - 1].graph or g == trace.stages[k - 1].graph):
            last = stages[-1]  # an unchanged stage computes the same values
            stages.append(StageNumerics(k, stage.name, last.outputs, last.nodes, last.drift))
            continue
        # a node whose value is the one it had in the stage before has the error it had
        # there (most nodes of most stages): only the others are compared
        before, before_nodes = values, (stages[-1].nodes if stages else {})
        values, nodes = {}, {}

        def compare(n: Node, value: Any, nodes: dict[int, NodeError] = nodes,
                    values: dict[int, Any] = values, before: dict[int, Any] = before,
                    before_nodes: dict[int, NodeError] = before_nodes) -> None:
            w = want.get(n.id)
            if w is None:
                return
            values[n.id] = value
            if n.id in before_nodes and _identical(value, before.get(n.id)):
                nodes[n.id] = before_nodes[n.id]
                return
            error = _error(value, w)
            if error is not None:
                nodes[n.id] = NodeError(*error)

        low = _run(g, flat, compare, stage.name)
        outputs = [OutputError(i, *(_error(v, w) or (float("inf"), float("inf"))))
                   for i, (v, w) in enumerate(zip(low, want_out, strict=True))]
        wide = reference if k == 0 else _run_wide(g, flat, keep, memo, notes, None, stage.name)
        drift = relative_error(wide, reference) if floats else 0.0
        stages.append(StageNumerics(k, stage.name, outputs, nodes, drift))

    def probe(g: Graph) -> float:
        outs = _run(g, flat, None, "a firing")
        return max((e[0] for v, w in zip(outs, want_out, strict=True)
                    for e in [_error(v, w) or (float("inf"), 0.0)]), default=0.0)

    # a node pinned in several stages (under other ids there) is said once
    said = {note.split(" ", 1)[-1]: note for note in reversed(notes)}
    return Numerics(stages, ", ".join(floats) or "exact (no float values)", inputs,
                    list(reversed(said.values())), probe, trace)


def _run(g: Graph, flat: Sequence[Any], hook: Callable[[Node, Any], None] | None,
         where: str) -> list[Any]:
    try:
        return NumpyInterpreter(g).evaluate(check_args(g, flat), hook)
    except OpaqueImplError as e:
        raise NumericsError(f"numerics cannot run {where}: {e}") from None


def _run_wide(g: Graph, flat: Sequence[Any], keep: dict[str, str], memo: Memo,
              notes: list[str], hook: Callable[[Node, Any], None] | None,
              where: str = "traced") -> list[Any]:
    """`g` widened to float64 and run; an opaque primitive JAX will not run wide is kept at
    its precision (a note says so) and the run made again."""
    while True:
        w = widened(g, keep, memo)
        try:
            outs = _run(w.graph, flat, hook, f"stage {where!r} in float64")
        except OpaqueWideError as e:
            if e.token in keep:
                raise
            keep[e.token] = e.reason
            continue
        notes.extend(w.pinned.values())
        return outs


def _identical(a: Any, b: Any) -> bool:
    """Whether two values are the same arrays, bit for bit where no NaN is."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and \
            all(_identical(x, y) for x, y in zip(a, b))
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype \
        and a.shape == b.shape and (a is b or np.array_equal(a, b))


def _float_types(g: Graph) -> set[str]:
    out = set()
    for n in g.nodes:
        for t in n.type.elements if isinstance(n.type, TupleType) else (n.type,):
            if dtypes.is_float(t.dtype) or t.dtype.startswith("c"):
                out.add(t.dtype)
    return out


def _rounded(value: Any, t: Any) -> Any:
    """A wide value rounded to type `t` (a tuple type: element by element)."""
    if isinstance(t, TupleType):
        return tuple(_rounded(v, e) for v, e in zip(value, t.elements))
    assert isinstance(t, TensorType)
    return np.asarray(value).astype(dtypes.to_numpy(t.dtype), copy=False)


def _error(got: Any, want: Any) -> tuple[float, float] | None:
    """(max_rel, max_ulps) of `got` against the rounded reference `want`; None where they are
    not comparable (a node whose value's form changed)."""
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            return None
        parts = [_error(g, w) for g, w in zip(got, want)]
        if any(p is None for p in parts):
            return None
        return (max((p[0] for p in parts), default=0.0),  # type: ignore[index]
                max((p[1] for p in parts), default=0.0))  # type: ignore[index]
    g, w = np.asarray(got), want
    if g.shape != w.shape or g.dtype != w.dtype:
        return None
    if np.array_equal(g, w):  # (the common case, and the cheap one)
        return 0.0, 0.0
    wide = np.complex128 if w.dtype.kind == "c" else np.float64
    w64 = w.astype(wide)
    with np.errstate(invalid="ignore"):
        d = np.abs(g.astype(wide) - w64)
    if np.isfinite(d).all():  # both finite everywhere: relative_error's figure, in one pass
        rel = float(np.max(d, initial=0.0)) / magnitude(w64)
    else:
        rel = relative_error([g], [w])
    return rel, ulps_apart(g, w)


def ulps_apart(got: np.ndarray, want: np.ndarray) -> float:
    """The largest distance between entries of two arrays of one type, in units in the last
    place: how many values of that type lie between them (0 where equal, NaN matching NaN;
    integers: the difference; infinite where one is NaN and the other not)."""
    if got.size == 0:
        return 0.0
    kind = want.dtype.kind
    if kind in "biu" or want.dtype.itemsize == 0:
        return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
    if kind == "c":
        part = np.float32 if want.dtype == np.complex64 else np.float64
        return ulps_apart(got.view(part), want.view(part))
    gn, wn = np.isnan(got), np.isnan(want)
    if not np.array_equal(gn, wn):
        return float("inf")
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
    top = 8 * want.dtype.itemsize - 1
    a, b = _ordered(got.view(bits), top), _ordered(want.view(bits), top)
    return float(np.max(np.where(wn, 0.0, np.abs(a - b))))


def _ordered(u: np.ndarray, top: int) -> np.ndarray:
    """Float bit patterns as integers in the floats' order (sign-magnitude to two's
    complement), as float64 so that 64-bit distances do not overflow."""
    sign = (u >> np.array(top, u.dtype)).astype(bool)
    mag = (u & np.array((1 << top) - 1, u.dtype)).astype(np.float64)
    return np.where(sign, -mag, mag)


def _ulps(x: float) -> str:
    return "inf" if x == float("inf") else f"{x:,.0f}"


def _line_of(g: Graph, source: str | None) -> str:
    """The text of the user's line `source` ("file:line"), from a node of `g` or of its
    bodies made there (a firing's node ids may name a body's nodes: the source is what
    a firing and its nodes share)."""
    if source is None:
        return ""
    for n in g.nodes:
        if n.source is not None and str(n.source) == source and n.source.line_text:
            return n.source.line_text
        for body in bodies(n):
            text = _line_of(body[1], source)
            if text:
                return text
    return ""
