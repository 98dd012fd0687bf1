"""The one kernel emitter: a fused kernel's plan (kernel_plan.py) -> statements in a target's
`Dialect`.

`emit_chain` writes a chain of elementwise ops and broadcasts (a kernel's prologue or
epilogue), one definition a node, each operand named by the caller (an input read at the
current point, or an earlier value). `RowEmitter` walks a row plan (softmax, layer norm,
cross-entropy: several reductions per row): the per-row values as soon as their inputs are
ready, then per round of reductions their accumulators, a sweep over the row's columns
computing what the folds read, the folds, and the per-row results; last, the output. Where
the targets differ (how a row's columns are swept: a numba loop nest, or a CUDA block's
threads striding over them and combining across the block), a target's subclass says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...ir.graph import Graph, Node
from .dialect import Block, Dialect
from .kernel_plan import READS, Access, RowPlan, accumulation, row_access


def check(d: Dialect, body: Graph, folds: set[int]) -> None:
    """PlanError unless every element type and op of `body` has a form in dialect `d`."""
    for n in body.nodes:
        d.type_name(n.dtype)
        if n.op not in ("parameter", "constant", "broadcast_in_dim", *READS) and n.id not in folds:
            d.scalar_form(body, n)


def emit_chain(d: Dialect, b: Block, body: Graph, nodes: Sequence[Node],
               value: Callable[[int], str]) -> None:
    """Definitions `v<id>` of `nodes` (elementwise ops, broadcasts and constants of `body`),
    their operands named by `value`. A shape-generic dialect's constants are run-time
    arguments already named `v<id>`; a broadcast of an input is read where it is used."""
    for n in nodes:
        if n.op == "parameter":
            continue
        if n.op == "constant":
            if not d.shape_generic:
                b(d.define(f"v{n.id}", n.dtype, d.constant(n)))
        elif n.op in READS:
            continue  # a slice or pad of an input: read where it is used (read)
        elif n.op == "broadcast_in_dim":
            if body[n.inputs[0]].op != "parameter":
                b(d.define(f"v{n.id}", n.dtype, f"v{n.inputs[0]}"))
        else:
            expr = d.scalar_form(body, n)([value(i) for i in n.inputs], n)
            b(d.define(f"v{n.id}", n.dtype, d.cast(expr, n.dtype)))


def _affine(v: str, start: int, stride: int) -> str:
    """`start + stride * v` as an index expression (parenthesised when compound)."""
    if v == "0":
        return str(start)
    term = v if stride == 1 else f"{v} * {stride}"
    return term if start == 0 and stride == 1 else f"({term})" if start == 0 else f"({start} + {term})"


def read(d: Dialect, a: Access, array: str, ivars: Sequence[str], shape: Sequence[int],
         fill: str) -> str:
    """Input `array` (of `shape`, the parameter's) read through access `a` at the point whose
    iteration variables are `ivars`: a slice's dimension at `start + stride * i`, a pad's at
    `(i - low) / (interior + 1)` where that is an exact index inside the input (a negative
    low or high crops: a slice), else `fill`
    (a select, whose untaken branch is not evaluated: no read out of bounds)."""
    at = [ivars[k] if k is not None else "0" for k in a.index]
    if a.window is not None:
        at = [_affine(v, start, stride) for v, (start, _, stride) in zip(at, a.window)]
    if a.pad is None:
        return d.index(array, at, shape)
    conds, index = [], []
    for k, (v, (lo, hi, interior)) in enumerate(zip(at, a.pad)):
        # the index into the padded input before any crop (negative low or high padding)
        step, off = interior + 1, v if lo == 0 else f"({v} - {lo})" if lo > 0 else f"({v} + {-lo})"
        if lo > 0:
            conds.append(f"{v} >= {lo}")
        if step != 1:
            conds.append(f"{off} % {step} == 0")
            off = d.floordiv(off, str(step))
        if interior or hi > 0:  # (else every point of the result is inside the input)
            conds.append(f"{off} < {d.extent(array, k, shape[k])}")
        index.append(off)
    if not conds:
        return d.index(array, index, shape)
    return "(" + d.select(d.and_(*conds), d.index(array, index, shape), fill) + ")"


class RowEmitter:
    """The walk of a row kernel, shared by every target; a target supplies `read` (an input
    at the current point), `open_columns` (the sweep over a row's columns), `fold` and
    `store`, and may combine a round's accumulators after its sweep (`combine`)."""

    def __init__(self, plan: RowPlan, dialect: Dialect, block: Block) -> None:
        self.plan, self.d, self.b, self.body = plan, dialect, block, plan.body
        self.folds = {r.id for r in plan.reductions}
        check(dialect, self.body, self.folds)
        self.done: set[int] = set()

    # ---- what a target supplies
    def read(self, a: Access) -> str:
        raise NotImplementedError

    def open_columns(self) -> int:
        """Open the sweep over a row's columns; returns the blocks it opened."""
        raise NotImplementedError

    def fold(self, kind: str, acc: str, into: str, value: str) -> None:
        raise NotImplementedError

    def combine(self, kind: str, acc: str, into: str) -> None:
        """After a round's sweep: accumulator `into` combined across the sweep's workers."""

    def store(self, value: str, per_row: bool) -> None:
        raise NotImplementedError

    # ---- the walk
    def value(self, i: int) -> str:
        body, plan = self.body, self.plan
        n = body[i]
        if n.op == "parameter":
            return self.read(row_access(n, plan.shape, plan.rows, body.params.index(i)))
        if n.op == "broadcast_in_dim" and body[n.inputs[0]].op == "parameter":
            src = body[n.inputs[0]]
            return self.read(row_access(src, plan.shape, plan.rows, body.params.index(src.id),
                                        tuple(n.attrs["broadcast_dimensions"])))
        return f"v{i}"

    def emit(self, n: Node) -> None:
        emit_chain(self.d, self.b, self.body, (n,), self.value)

    def close(self, blocks: int) -> None:
        for _ in range(blocks):
            self.b.depth -= 1
            end = self.d.end()
            if end is not None:
                self.b(end)

    def columns(self, need: set[int], given: int | None = None) -> int:
        """Open the sweep over the columns and compute the per-point values `need`, reading
        `given` back from the output, where the last round left it."""
        blocks = self.open_columns()
        for n in self.body.nodes:
            if n.id == given:
                self.b(self.d.assign(f"v{n.id}", self.stored()))
            elif n.id in need:
                self.emit(n)
        return blocks

    def stored(self) -> str:
        """The output at the current point (where a kept value waits)."""
        raise NotImplementedError

    def row_values(self) -> None:
        """The per-row values whose inputs are all ready."""
        body, plan = self.body, self.plan
        for n in body.nodes:
            if n.id in plan.row_level and n.id not in self.done and n.id not in self.folds \
                    and all(i in self.done or body[i].op == "parameter" for i in n.inputs):
                self.emit(n)
                self.done.add(n.id)

    def kept(self) -> int | None:
        """A per-point value that both the last round's folds and the output read, to keep in
        the output buffer between the two (None: compute it twice). A target that keeps one
        overrides this."""
        return None

    def walk(self) -> None:
        plan, d, b = self.plan, self.d, self.b
        cone, out = plan.cone, plan.output
        keep = self.kept()
        self.row_values()
        for this_pass in plan.passes:
            accs = [(r, *accumulation(r)) for r in this_pass]
            given = None
            if keep is not None and this_pass is plan.passes[-1]:
                # the kept value first, in a sweep of its own (elementwise: it vectorizes),
                # then the folds over it read back from the output: in one loop with a
                # float64 fold, a softmax's exp ran 30% slower
                blocks = self.columns(cone([keep]))
                self.store(f"v{keep}", False)
                self.close(blocks)
                given = keep
            for r, kind, acc in accs:
                b(d.declare(f"a{r.id}", acc, d.identity(kind, acc)))
            blocks = self.columns(cone([r.inputs[0] for r in this_pass], given), given)
            for r, kind, acc in accs:
                self.fold(kind, acc, f"a{r.id}", d.cast(self.value(r.inputs[0]), acc))
            self.close(blocks)
            for r, kind, acc in accs:
                self.combine(kind, acc, f"a{r.id}")
                b(d.define(f"v{r.id}", r.dtype, d.cast(f"a{r.id}", r.dtype)))
                self.done.add(r.id)
            self.row_values()
        if out.id in plan.row_level:
            self.store(self.value(out.id), True)
        else:
            blocks = self.columns(cone([out.id], keep), keep)
            self.store(self.value(out.id), False)
            self.close(blocks)
