"""euclidean-distance: `sum((a[:,None,:] - b[None,:,:])**2, -1)` -> `|a|^2 + |b|^2 - 2 a.b^T`.

The naive pairwise squared distance materialises an N x M x K difference (it is
what runs out of GPU memory first); the quadratic form needs only the two norms and one matrix
product. The operands of the `sub` are read through their broadcasts (see
`broadcasts.broadcast_view`), so any axis order works: summed axes indexed by both
operands are the features, kept axes of one operand only are the point axes (at least one
each), kept axes of both are batch dims. The square may be `integer_pow` y=2, `square` or
`mul(d, d)`. Scaling and consumers such as `sqrt` or `exp(-gamma * d)` read the replaced
`reduce_sum` and are left as they are.

Not bit-exact: `|a|^2 + |b|^2 - 2 a.b` cancels when points are close, losing about
log2(|a|^2 / d) bits, so the semantic tests compare with a tolerance relative to |a|^2 + |b|^2
(about 1e-5 for float32, 1e-12 for float64). The result is clamped at zero so that rounding
cannot make a distance negative (and `sqrt` of it NaN).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import dtypes
from ..ir.graph import Graph, Node
from ..ir.rewrite import RewriteContext, Rule, pat, rewrite, var
from . import register
from .base import PassReport
from .bodies import descend
from .broadcasts import broadcast_view, live_users, place, result_order, split_axes, squeeze_to

RULE_NAME = "expand-squared-distance"


def _norm(ctx: RewriteContext, base: int, amap: tuple[int | None, ...], contract: list[int],
          kept: list[int], shape: tuple[int, ...], made: dict[tuple[int, ...], int]) -> int:
    """sum(base**2) over the feature axes, laid out in the result's `shape`; `made` reuses
    the sum when a and b are one tensor."""
    summed = {amap[k] for k in contract}
    key = (base, *sorted(summed))
    if key not in made:
        sq = ctx.emit("mul", (base, base))
        made[key] = ctx.emit("reduce_sum", (sq,), {"axes": tuple(sorted(summed))})
    norm = made[key]
    owner = {a: k for k, a in enumerate(amap) if a is not None}
    left = [a for a in range(ctx.type(base).rank) if a not in summed]
    return place(ctx, norm, [kept.index(owner[a]) for a in left], shape)


def _expand(ctx: RewriteContext, root: Node, sq: Node, diff: Node, x: Node, y: Node,
            ) -> int | None:
    if not dtypes.is_float(root.dtype) or ctx.is_output(sq) or ctx.is_output(diff):
        return None
    if live_users(ctx, sq) != (root.id,) or set(live_users(ctx, diff)) != {sq.id}:
        return None  # the difference or its square is needed elsewhere: nothing saved
    shape, summed = diff.shape, set(root.attrs["axes"])
    (ab, am), (bb, bm) = (broadcast_view(ctx, v.id, shape) for v in (x, y))
    roles = split_axes(am, bm, shape, summed)
    if roles is None:
        return None
    contract, batch, apoints, bpoints = roles
    if not (contract and apoints and bpoints):
        return None  # needs a feature axis, and points on both sides
    (ab, am), (bb, bm) = squeeze_to(ctx, ab, am), squeeze_to(ctx, bb, bm)
    kept = [k for k in range(len(shape)) if k not in summed]
    out = root.shape
    made: dict[tuple[int, ...], int] = {}
    norms = ctx.emit("add", (_norm(ctx, ab, am, contract, kept, out, made),
                             _norm(ctx, bb, bm, contract, kept, out, made)))
    order, swap = result_order(am, bm, roles, shape, summed)
    if swap:  # b.a^T may come out in the user's order where a.b^T does not
        (ab, am), (bb, bm) = (bb, bm), (ab, am)
    dims = (tuple(am[k] for k in contract), tuple(bm[k] for k in contract)), \
        (tuple(am[k] for k in batch), tuple(bm[k] for k in batch))
    # -2 * (a.b) == (-2a).b exactly (a power of two), so scale the smallest of the three
    # (a and b may be one tensor: the distances within one point set)
    sizes = (ctx.type(ab).size, ctx.type(bb).size, root.type.size)
    small = sizes.index(min(sizes))
    scale = lambda i: ctx.emit("mul", (i, ctx.constant(-2.0, root.dtype)))  # noqa: E731
    lhs, rhs = scale(ab) if small == 0 else ab, scale(bb) if small == 1 else bb
    cross = place(ctx, ctx.emit("dot_general", (lhs, rhs), {"dimension_numbers": dims}), order, out)
    total = ctx.emit("add", (norms, scale(cross) if small == 2 else cross))
    return ctx.emit("max", (total, ctx.constant(0.0, root.dtype)))


_DIFF = pat("sub", var("x"), var("y"), name="diff")
RULES = [
    Rule(RULE_NAME, pat("reduce_sum", pat(op, _DIFF, name="sq", attrs=attrs), name="root"),
         _expand)
    for op, attrs in (("integer_pow", {"y": 2}), ("square", None))
] + [Rule(RULE_NAME, pat("reduce_sum", pat("mul", _DIFF, _DIFF, name="sq"), name="root"),
          _expand)]


@register
@dataclass(frozen=True)
class EuclideanDistance:
    """Rewrite the naive pairwise squared distance into its quadratic form (see module doc)."""

    name: str = "euclidean-distance"

    def __call__(self, graph: Graph) -> tuple[Graph, PassReport]:
        out, log = descend(graph, lambda g: rewrite(g, RULES, prune=True))
        return out, PassReport(changed=bool(log), rewrites=tuple(log))
