"""Reading the operands of a product through the broadcasts that made them, for the passes
that recognise products (recognize-dot, euclidean-distance, dot-order).

`broadcast_view` says, for each axis of an elementwise product, which axis of which base
tensor it indexes (or that it is broadcast); `split_axes` turns two such views into the roles
of a dot_general's dimensions; `place` lays a result back out in the user's axis order.
`live_users` ignores readers that earlier passes left dead for dce.
"""

from __future__ import annotations

from ..ir.graph import Node
from ..ir.rewrite import RewriteContext

AxisMap = tuple[int | None, ...]  # for each axis of the full product: the base's axis, or None


def _live(ctx: RewriteContext, nid: int, depth: int = 0) -> bool:
    """Whether a node's value reaches an output. Earlier passes leave dead nodes for dce, and
    a dead reader must not stop a rewrite; past a few levels a node counts as live (safe)."""
    users = set(ctx.users(nid))
    return ctx.is_output(nid) or depth > 8 and bool(users) or any(
        _live(ctx, u, depth + 1) for u in users)


def live_users(ctx: RewriteContext, n: Node) -> tuple[int, ...]:
    """The readers of `n` whose values are used (a reader that reads `n` twice is listed twice)."""
    return tuple(u for u in ctx.users(n) if _live(ctx, u))


def _peel(n: Node, ctx: RewriteContext) -> tuple[int, AxisMap] | None:
    """(input, for each axis of `n` the input's axis or None) if `n` only re-indexes or
    broadcasts its input; None if `n` computes something."""
    if n.op == "broadcast_in_dim":
        x = ctx.node(n.inputs[0])
        src = {d: j for j, d in enumerate(n.attrs["broadcast_dimensions"])}
        return x.id, tuple(src[k] if k in src and x.shape[src[k]] == size else None
                           for k, size in enumerate(n.shape))
    if n.op == "expand_dims":
        rest = iter(range(n.type.rank))
        dims = set(n.attrs["dimensions"])
        return n.inputs[0], tuple(None if k in dims else next(rest) for k in range(n.type.rank))
    if n.op == "tile":
        x = ctx.node(n.inputs[0])
        if any(r != 1 and x.shape[k] != 1 for k, r in enumerate(n.attrs["reps"])):
            return None
        return x.id, tuple(k if r == 1 else None for k, r in enumerate(n.attrs["reps"]))
    if n.op == "reshape":
        x = ctx.node(n.inputs[0])
        ours = [k for k, d in enumerate(n.shape) if d != 1]
        theirs = [k for k, d in enumerate(x.shape) if d != 1]
        if [n.shape[k] for k in ours] != [x.shape[k] for k in theirs]:
            return None
        to = dict(zip(ours, theirs, strict=True))
        return x.id, tuple(to.get(k) for k in range(n.type.rank))
    return None


def broadcast_view(ctx: RewriteContext, nid: int, shape: tuple[int, ...]) -> tuple[int, AxisMap]:
    """Read operand `nid` of an elementwise op of result `shape` as a base tensor and, per
    result axis, the base axis it indexes (None: broadcast or size 1). Base axes of size > 1
    are each indexed once; the others have size 1."""
    n = ctx.node(nid)
    amap: AxisMap = tuple(k if n.type.rank == len(shape) and n.shape[k] == d > 1 else None
                          for k, d in enumerate(shape))
    while (step := _peel(n, ctx)) is not None:
        base, inner = step
        amap = tuple(None if a is None else inner[a] for a in amap)
        n = ctx.node(base)
    return n.id, tuple(a if a is not None and n.shape[a] > 1 else None for a in amap)


def squeeze_to(ctx: RewriteContext, nid: int, amap: AxisMap) -> tuple[int, AxisMap]:
    """Drop the base's size-1 axes that `amap` does not index (a reshape), renumbering."""
    shape = ctx.type(nid).shape
    used = sorted(a for a in amap if a is not None)
    if len(used) == len(shape):
        return nid, amap
    new = ctx.emit("reshape", (nid,), {"new_sizes": tuple(shape[a] for a in used)})
    return new, tuple(None if a is None else used.index(a) for a in amap)


def place(ctx: RewriteContext, nid: int, axes: list[int], shape: tuple[int, ...]) -> int:
    """Lay out tensor `nid`, whose axis i is axis `axes[i]` of `shape`, as `shape`: a
    transpose into increasing order, then a broadcast for the axes it lacks."""
    order = sorted(range(len(axes)), key=lambda i: axes[i])
    if order != list(range(len(axes))):
        nid = ctx.emit("transpose", (nid,), {"permutation": tuple(order)})
    if ctx.type(nid).shape != shape:
        nid = ctx.emit("broadcast_in_dim", (nid,), {"shape": shape,
                                                     "broadcast_dimensions": tuple(sorted(axes))})
    return nid


Roles = tuple[list[int], list[int], list[int], list[int]]


def split_axes(xm: AxisMap, ym: AxisMap, shape: tuple[int, ...], summed: set[int],
               ) -> Roles | None:
    """(contracting, batch, x-only, y-only) axes of a product of two broadcast views; None
    when a summed axis is one operand's only (not a product) or a kept axis of size > 1 is
    neither's (a broadcast of the result)."""
    contract: list[int] = []
    batch: list[int] = []
    xfree: list[int] = []
    yfree: list[int] = []
    for k in range(len(shape)):
        kind = (xm[k] is not None, ym[k] is not None)
        if kind == (True, True):
            (contract if k in summed else batch).append(k)
        elif kind != (False, False) and k in summed:
            return None
        elif kind != (False, False):
            (xfree if kind[0] else yfree).append(k)
        elif shape[k] != 1:
            return None
    xfree.sort(key=lambda k: xm[k])  # dot_general keeps each operand's own axis order
    yfree.sort(key=lambda k: ym[k])
    return contract, batch, xfree, yfree


def not_a_product(xm: AxisMap, ym: AxisMap, shape: tuple[int, ...], summed: set[int]) -> str:
    """Why `split_axes` found no roles, in words (for a remark)."""
    for k in range(len(shape)):
        kind = (xm[k] is not None, ym[k] is not None)
        if kind in ((True, False), (False, True)) and k in summed:
            side = "first" if kind[0] else "second"
            return (f"axis {k} (size {shape[k]}) is summed but indexes the {side} operand "
                    f"only: a sum over one operand's own axis is not a product")
        if kind == (False, False) and shape[k] != 1:
            return (f"axis {k} (size {shape[k]}) indexes neither operand: the product is "
                    f"broadcast along it")
    return "the operands' axes do not pair up"


def result_order(xm: AxisMap, ym: AxisMap, roles: Roles, shape: tuple[int, ...], summed: set[int],
              ) -> tuple[list[int], bool]:
    """Where each axis of dot_general(x, y)'s result goes in the sum's result, and whether
    dot_general(y, x) gives the sum's order directly (then no transpose is needed)."""
    _, batch, xfree, yfree = roles
    kept = [k for k in range(len(shape)) if k not in summed]
    order = [kept.index(k) for k in batch + xfree + yfree]
    swapped = [kept.index(k) for k in batch + yfree + xfree]
    if swapped == sorted(swapped) != order:
        return swapped, True
    return order, False
