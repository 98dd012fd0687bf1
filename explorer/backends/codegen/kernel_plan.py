"""The shape of a fused kernel, read off its body graph: the kernel IR that the kernel emitter
(kernel_emitter.py) and the targets' kernel generators read.

A kernel body (explorer/passes/fuse.py) computes, for every point of an iteration space (the
`loop_shape`), a chain of elementwise ops and broadcasts (the prologue), optionally reduces
one of those values over some axes, and then runs more elementwise ops on the reduced values
(the epilogue, at the result's shape). Each body parameter is read at a point through an
`Access`: which iteration dimension indexes each of its dimensions (None: a size-1 or
broadcast dimension, read at 0), optionally through a static slice (dimension k read at
`start + stride * i`) or a pad (read at `(i - low) / (interior + 1)` where that is an exact
index inside the parameter, a negative low or high cropping, else the padding value, a scalar
constant of the body). A body that does not have this form (a kernel imported from XLA, say)
raises `PlanError`, and backends then run it on the reference interpreter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...ir import dtypes
from ...ir.graph import Attrs, Graph, Node, TensorType
from ...ir.ops import OPS
from ...ir.traits import FusionRole


class PlanError(ValueError):
    """A kernel body that the code generators cannot express as one pass."""


@dataclass(frozen=True)
class Access:
    param: int  # the body parameter's position
    index: tuple[int | None, ...]  # per parameter dimension: the iteration dimension, or None
    # a slice of the parameter read in place: per dimension (start, limit, stride); with a
    # pad as well, the slice of the padded parameter
    window: tuple[tuple[int, int, int], ...] | None = None
    # a pad of the parameter read in place: per dimension (low, high, interior; a negative
    # low or high crops), and the body's scalar constant padding value (`fill`, its node id)
    pad: tuple[tuple[int, int, int], ...] | None = None
    fill: int | None = None


@dataclass(frozen=True)
class KernelPlan:
    body: Graph
    loop_shape: tuple[int, ...]
    reduce: Node | None
    out_shape: tuple[int, ...]
    prologue: tuple[Node, ...]  # non-parameter nodes computed per point of loop_shape
    epilogue: tuple[Node, ...]  # nodes computed per point of out_shape (after the reduction)
    output: Node

    @property
    def reduced_axes(self) -> tuple[int, ...]:
        return tuple(self.reduce.attrs["axes"]) if self.reduce is not None else ()


def access(param: TensorType, shape: tuple[int, ...], dims: tuple[int, ...] | None = None,
           position: int = 0) -> Access:
    """How a parameter of type `param` is read at a point of `shape`; `dims` maps its
    dimensions to iteration dimensions (a broadcast's broadcast_dimensions; default: the
    same dimensions, for a parameter of equal rank or rank 0)."""
    if dims is None:
        if param.rank not in (0, len(shape)):
            raise PlanError(f"an input {param} cannot be read at shape {shape}")
        dims = tuple(range(param.rank))
    index = []
    for d, target in zip(param.shape, dims):
        if d == shape[target]:
            index.append(target)
        elif d == 1:
            index.append(None)
        else:
            raise PlanError(f"an input {param} does not broadcast to {shape}")
    return Access(position, tuple(index))


READS = ("slice", "pad")  # ops a kernel reads its parameters through in place (read_access)


def readable(body: Graph, n: Node) -> bool:
    """Whether `n` is a slice or pad that a kernel reads in place: a slice (strides >= 1) of
    a parameter or of such a pad, or a pad (low and high of any sign: a negative one crops)
    of a parameter with a scalar constant padding value."""
    if n.op == "slice":
        src = body[n.inputs[0]]
        return (src.op == "parameter" or src.op == "pad" and readable(body, src)) \
            and all(s >= 1 for s in (n.attrs.get("strides") or (1,) * n.type.rank))  # type: ignore[union-attr]
    if n.op == "pad":
        return body[n.inputs[0]].op == "parameter" and body[n.inputs[1]].op == "constant" \
            and all(i >= 0 for _, _, i in n.attrs["padding_config"])
    return False


def read_access(plan: KernelPlan, node: Node, shape: tuple[int, ...]) -> Access:
    """The access for a slice or pad of a parameter, or a slice of such a pad (readable),
    read at a point of `shape`."""
    body = plan.body
    src = body[node.inputs[0]]
    pad = src if node.op == "slice" and src.op == "pad" else node if node.op == "pad" else None
    param = body[pad.inputs[0]] if pad is not None else src
    a = access(node.type, shape, position=body.params.index(param.id))  # type: ignore[arg-type]
    window = cfg = fill = None
    if node.op == "slice":
        rank = len(src.shape)
        window = tuple(tuple(int(v) for v in w) for w in zip(
            node.attrs["start_indices"], node.attrs["limit_indices"],
            node.attrs.get("strides") or (1,) * rank))
    if pad is not None:
        cfg = tuple(tuple(int(v) for v in c) for c in pad.attrs["padding_config"])
        fill = pad.inputs[1]
    return Access(a.param, a.index, window=window, pad=cfg, fill=fill)  # type: ignore[arg-type]


def _under_slices(body: Graph, n: Node) -> bool:
    """A pad read only through slices of it (each its own access): it has no shape to fit."""
    return n.op == "pad" and all(body[u].op == "slice" and readable(body, body[u])
                                 for u in body.users[n.id])


def plan_kernel(body: Graph) -> KernelPlan:
    if len(body.outputs) != 1 or not isinstance(body[body.outputs[0]].type, TensorType):
        raise PlanError("a kernel with several results")
    output = body[body.outputs[0]]
    reduces = [n for n in body.nodes if OPS[n.op].fuse == FusionRole.REDUCTION]
    if len(reduces) > 1:
        raise PlanError("a kernel with more than one reduction")
    for n in body.nodes:
        ok = OPS[n.op].fuse != FusionRole.NONE or n.op == "parameter" \
            or (n.op == "constant" and n.type.rank == 0) or readable(body, n)  # type: ignore[union-attr]
        if not ok:
            raise PlanError(f"{n.op} cannot be part of a generated kernel")
    reduce = reduces[0] if reduces else None
    loop_shape = body[reduce.inputs[0]].shape if reduce is not None else output.shape
    before: set[int] = set()
    if reduce is not None:
        before = {reduce.inputs[0]}
        for n in reversed(body.nodes):
            if n.id in before:
                before.update(n.inputs)
    compute = [n for n in body.nodes if n.op != "parameter"]
    prologue = tuple(n for n in compute if n.id in before)
    epilogue = tuple(n for n in compute if n.id not in before and n is not reduce)
    for nodes, shape in ((prologue, loop_shape), (epilogue, output.shape)):
        for n in nodes:
            if n.shape not in ((), shape) and not _under_slices(body, n):
                raise PlanError(f"%{n.id} ({n.op}) has shape {n.shape}, not the kernel's {shape}")
            if n.op == "broadcast_in_dim" and body[n.inputs[0]].op not in ("parameter", "constant") \
                    and body[n.inputs[0]].shape != ():
                raise PlanError("a broadcast of a value computed inside the kernel")
    if reduce is not None:
        big = {n.id for n in prologue if n.shape != () or n.id == reduce.inputs[0]}
        if any(i in big for n in epilogue for i in n.inputs):
            raise PlanError("an op after the reduction reads a value from before it")
    return KernelPlan(body, loop_shape, reduce, output.shape, prologue, epilogue, output)


def combine_of(reduce: Node) -> str:
    """The name of the monoid the kernel's reduction folds with (traits.MONOIDS)."""
    monoid = OPS[reduce.op].monoid
    assert monoid is not None, reduce.op
    return monoid.name


def accumulation(reduce: Node) -> tuple[str, str]:
    """(combine, accumulator element type) of a generated kernel's reduction, the same on
    every backend: float sums and products accumulate in f64, integer ones in 64 bits, and a
    pred max/min is an or/and."""
    d, kind = reduce.dtype, combine_of(reduce)
    if d == "pred" and kind in ("max", "min"):
        return ("or" if kind == "max" else "and"), d
    if kind in ("add", "mul") and dtypes.is_float(d):
        return kind, "f64"
    if kind in ("add", "mul") and dtypes.is_int(d):
        return kind, "u64" if d.startswith("u") else "i64"
    return kind, d


def param_access(plan: KernelPlan, node: Node, shape: tuple[int, ...]) -> Access:
    """The access for parameter node `node` read directly at a point of `shape`."""
    return access(node.type, shape, position=plan.body.params.index(node.id))  # type: ignore[arg-type]


def broadcast_access(plan: KernelPlan, node: Node) -> Access:
    """The access for a broadcast_in_dim of a parameter."""
    src = plan.body[node.inputs[0]]
    return access(src.type, node.shape, tuple(node.attrs["broadcast_dimensions"]),  # type: ignore[arg-type]
                  plan.body.params.index(src.id))


# ---------------------------------------------------------------- row kernels
# Softmax, log-softmax, layer norm and cross-entropy reduce each row of a matrix, broadcast
# the results back over the row and reduce again: several reductions that the one-reduction
# form above cannot hold. A row kernel takes them whole. Its iteration space `shape` splits
# into row dimensions (the first `rows`) and the trailing column dimensions that every
# reduction folds away. Each value is computed at one of two levels: per row (a scalar:
# a reduction's result, ops on such results, inputs constant along the columns) or per point
# (inside a loop over the row's columns). A generator runs, for each row, one pass over the
# columns per round of reductions (reductions that do not read each other share a pass), then
# one last pass that writes the output (a row-level output is written once per row).
# Values are recomputed in every pass that needs them, from inputs the row keeps in cache.

@dataclass(frozen=True)
class RowPlan:
    body: Graph
    shape: tuple[int, ...]  # the iteration space: rows x columns
    rows: int  # how many leading dimensions are row dimensions
    row_level: frozenset[int]  # nodes computed once per row (the rest: per point)
    passes: tuple[tuple[Node, ...], ...]  # the reductions folded in each pass, in order
    output: Node

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.output.shape

    @property
    def reductions(self) -> tuple[Node, ...]:
        return tuple(r for p in self.passes for r in p)

    def cone(self, roots: Sequence[int], given: int | None = None) -> set[int]:
        """The per-point values a generator computes to get `roots` inside a pass over the
        columns (`given` is read, not computed)."""
        need: set[int] = set()
        work = [i for i in roots if i not in self.row_level]
        while work:
            i = work.pop()
            if i not in need and self.body[i].op != "parameter":
                need.add(i)
                if i != given:
                    work += [j for j in self.body[i].inputs if j not in self.row_level]
        return need


def row_shape(shape: tuple[int, ...], rows: int) -> tuple[int, ...]:
    """The shape of a row-level value kept at full rank: the columns as size-1 dimensions."""
    return shape[:rows] + (1,) * (len(shape) - rows)


def row_access(node: Node, shape: tuple[int, ...], rows: int, position: int,
               dims: tuple[int, ...] | None = None) -> Access:
    """How a parameter (or the parameter under a broadcast, with `dims`) is read at a point
    of a row kernel: a rank-`rows` value is indexed by the row dimensions."""
    t = node.type
    assert isinstance(t, TensorType)
    if dims is None and t.rank == rows and rows < len(shape):
        dims = tuple(range(rows))
    return access(t, shape, dims, position)


def _level_of(n: Node, shape: tuple[int, ...], rows: int) -> str:
    """"row" or "point", by shape: a value that varies along no column is per row."""
    s = n.shape
    if s == shape[:rows] and len(s) < len(shape) or s == ():
        return "row"
    if len(s) != len(shape) or any(d not in (1, full) for d, full in zip(s, shape)):
        raise PlanError(f"%{n.id} ({n.op}) has shape {s}, which is neither a row of {shape} nor "
                        f"broadcasts to it")
    return "row" if all(d == 1 for d in s[rows:]) else "point"


def plan_rows(body: Graph) -> RowPlan:
    """The row form of a kernel body, or PlanError."""
    if len(body.outputs) != 1 or not isinstance(body[body.outputs[0]].type, TensorType):
        raise PlanError("a kernel with several results")
    output = body[body.outputs[0]]
    reductions = [n for n in body.nodes if OPS[n.op].fuse == FusionRole.REDUCTION]
    if not reductions:
        raise PlanError("a row kernel without a reduction")
    shape = body[reductions[0].inputs[0]].shape
    rank = len(shape)
    rows = rank - len(reductions[0].attrs["axes"])
    for r in reductions:
        if body[r.inputs[0]].shape != shape or tuple(r.attrs["axes"]) != tuple(range(rows, rank)):
            raise PlanError(f"%{r.id} ({r.op}) does not fold the trailing axes of {shape}")
    if rows == rank:
        raise PlanError("reductions over no axis")
    folds = {r.id for r in reductions}
    row_level: set[int] = set()
    rounds: dict[int, int] = {}  # node -> the number of reduction passes it waits for
    for n in body.nodes:
        ok = OPS[n.op].fuse != FusionRole.NONE or n.op == "parameter" \
            or (n.op == "constant" and n.type.rank == 0)  # type: ignore[union-attr]
        if not ok:
            raise PlanError(f"{n.op} cannot be part of a generated kernel")
        if n.op == "parameter" and all(body[u].op == "broadcast_in_dim" for u in body.users[n.id]):
            level = "point"  # read only through broadcasts, each indexed on its own
        else:
            level = "row" if n.id in folds else _level_of(n, shape, rows)
        if level == "row":
            row_level.add(n.id)
        waits = max((rounds[i] for i in n.inputs), default=0)
        if n.id in folds:
            waits += 1
        rounds[n.id] = waits
        if n.op == "broadcast_in_dim":
            src = body[n.inputs[0]]
            if src.op not in ("parameter", "constant") and src.shape != ():
                # a computed value is a scalar at each point: the broadcast must keep each of
                # its dimensions where the iteration space has it
                dims = tuple(n.attrs["broadcast_dimensions"])
                if any(d != 1 and dims[t] != t for t, d in enumerate(src.shape)):
                    raise PlanError(f"%{n.id} moves the dimensions of a computed value")
        elif n.op != "parameter" and n.id not in folds and level == "row":
            if any(i not in row_level for i in n.inputs):
                raise PlanError(f"%{n.id} ({n.op}) is per row but reads a per-point value")
    if output.id not in row_level and output.shape != shape:
        raise PlanError(f"the result's shape {output.shape} is not the iteration space {shape}")
    if output.id in row_level and output.shape not in (shape[:rows], row_shape(shape, rows)):
        raise PlanError(f"the result's shape {output.shape} is not one per row of {shape}")
    passes = tuple(tuple(r for r in reductions if rounds[r.id] == k)
                   for k in range(1, max(rounds[r.id] for r in reductions) + 1))
    return RowPlan(body, shape, rows, frozenset(row_level), passes, output)


def plan_any(body: Graph) -> KernelPlan | RowPlan:
    """The one-reduction form when the body has it, else the row form; when neither applies,
    PlanError says why the form the body was meant for (by its count of reductions) fails."""
    try:
        return plan_kernel(body)
    except PlanError as first:
        try:
            return plan_rows(body)
        except PlanError as second:
            several = sum(OPS[n.op].fuse == FusionRole.REDUCTION for n in body.nodes) > 1
            raise (second if several else first) from None


@dataclass(frozen=True)
class OutputPlan:
    """An output fusion (kind "output"): `dot` (its operands the body parameters at
    `operands`), then `epilogue`, an elementwise kernel body whose parameters are the body
    parameters at `kept` and, last, the dot's result."""

    dot: Node
    operands: tuple[int, ...]
    kept: tuple[int, ...]
    epilogue: Graph


def plan_output(body: Graph) -> OutputPlan:
    """Split an output-fusion body into its dot and the epilogue over the dot's result."""
    dots = [n for n in body.nodes if n.op == "dot_general"]
    if len(dots) != 1 or any(i not in body.params for i in dots[0].inputs):
        raise PlanError(f"{body.name}: an output fusion is one dot of the kernel's inputs")
    dot = dots[0]
    rest = [n for n in body.nodes if n.id != dot.id and n.op != "parameter"]
    read = {i for n in rest for i in n.inputs}
    kept = tuple(k for k, p in enumerate(body.params) if p in read)
    params = [body[body.params[k]] for k in kept] + [dot]
    nodes = [Node(p.id, "parameter", (), Attrs({"index": k, "name": f"in{k}"}), p.type)
             for k, p in enumerate(params)] + rest
    epilogue = Graph(nodes, [p.id for p in params], body.outputs, f"{body.name}_epilogue")
    return OutputPlan(dot, tuple(body.params.index(i) for i in dot.inputs), kept, epilogue)


def describe_output(name: str, plan: OutputPlan, unit: str) -> str:
    """The header of an output fusion's listed source (`unit`: what computes the dot)."""
    (lc, rc), (lb, rb) = plan.dot.attrs["dimension_numbers"]
    a, b = plan.operands
    return (f"output fusion {name}: first the dot, by {unit}:\n"
            f"  dot = dot_general(in{a}, in{b}, contracting {tuple(lc)} x {tuple(rc)}, "
            f"batch {tuple(lb)} x {tuple(rb)})\n"
            f"then the epilogue below over the dot's result, written in place; its inputs: "
            + ", ".join([f"in{j} = the kernel's in{k}" for j, k in enumerate(plan.kept)]
                        + [f"in{len(plan.kept)} = dot"]) + "\n")
