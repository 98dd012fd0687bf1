"""The shape of a fused kernel, read off its body graph: what the CPU and GPU code generators
share.

A kernel body (explorer/passes/fuse.py) computes, for every point of an iteration space (the
`loop_shape`), a chain of elementwise ops and broadcasts (the prologue), optionally reduces
one of those values over some axes, and then runs more elementwise ops on the reduced values
(the epilogue, at the result's shape). Each body parameter is read at a point through an
`Access`: which iteration dimension indexes each of its dimensions (None: a size-1 or
broadcast dimension, read at 0). A body that does not have this form (a kernel imported from
XLA, say) raises `PlanError`, and backends then run it on the reference interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import Graph, Node, TensorType
from ..ir.ops import OPS
from ..ir.traits import Fuse


class PlanError(ValueError):
    """A kernel body that the code generators cannot express as one pass."""


@dataclass(frozen=True)
class Access:
    param: int  # the body parameter's position
    index: tuple[int | None, ...]  # per parameter dimension: the iteration dimension, or None


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


def plan_kernel(body: Graph) -> KernelPlan:
    if len(body.outputs) != 1 or not isinstance(body[body.outputs[0]].type, TensorType):
        raise PlanError("a kernel with several results")
    output = body[body.outputs[0]]
    reduces = [n for n in body.nodes if OPS[n.op].fuse == Fuse.REDUCTION]
    if len(reduces) > 1:
        raise PlanError("a kernel with more than one reduction")
    for n in body.nodes:
        ok = OPS[n.op].fuse != Fuse.NONE or n.op == "parameter" \
            or (n.op == "constant" and n.type.rank == 0)  # type: ignore[union-attr]
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
            if n.shape not in ((), shape):
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


def param_access(plan: KernelPlan, node: Node, shape: tuple[int, ...]) -> Access:
    """The access for parameter node `node` read directly at a point of `shape`."""
    return access(node.type, shape, position=plan.body.params.index(node.id))  # type: ignore[arg-type]


def broadcast_access(plan: KernelPlan, node: Node) -> Access:
    """The access for a broadcast_in_dim of a parameter."""
    src = plan.body[node.inputs[0]]
    return access(src.type, node.shape, tuple(node.attrs["broadcast_dimensions"]),  # type: ignore[arg-type]
                  plan.body.params.index(src.id))
