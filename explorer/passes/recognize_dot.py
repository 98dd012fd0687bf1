"""recognize-dot: a broadcast-multiply-reduce_sum is a matrix product.

`sum(A[:, :, None] * B[None, :, :], axis=1)` materialises an N x K x M product and then sums
it; it is `A @ B`. XLA keeps the broadcast and the product (and pays for them), we
emit a `dot_general`. Each operand of the `mul` is read through the broadcasts, expand_dims,
unit-dimension reshapes and tiles of size-1 axes that made it (`broadcast_view`), so every
axis of the product is known to come from the left operand, the right one, both or neither:
summed axes of both are contracting dims, kept axes of both are batch dims, axes of one only
are its free dims. A transpose restores the user's axis order when it differs from
dot_general's (batch, lhs free, rhs free). A sum over an axis of one operand only is not a
product and is left alone, as is a plain `sum(x * y)` of unbroadcast operands (no temporary
to save, and the Euclidean-distance pass wants that form). Not bit-exact: the summation order
changes, as in any matmul.

Bound for XLA (the `backend` option is "jax", passes/targets.py), a product in which one
operand has no free axis (a matrix-vector product, batched or not) is left alone: XLA fuses
the broadcast multiply into the sum without making the product, the dot would do as many
FLOPs, and XLA fuses no producer into a dot, so the operand it would read is made in memory
(DP-SGD's clipped mean of per-example gradients ran 2x slower as a dot, bench/jax_stages.py).

A sum of a product with an operand read through a broadcast that is left alone gets a
`missed` remark naming the condition that failed (explorer/ir/remarks.py); a plain
`sum(x * y)` of unbroadcast operands gets none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from ..ir import dtypes
from ..ir.graph import Node
from ..ir.rewrite import RewriteContext, Rule, pat, var
from . import register
from .base import RulePass
from .broadcasts import broadcast_view, live_users, not_a_product, place, result_order, split_axes, squeeze_to
from .targets import xla_lays_out


def _to_dot(ctx: RewriteContext, root: Node, prod: Node, x: Node, y: Node,
            widen: Node | None = None, backend: str | None = None) -> int | None:
    """`widen`: a float conversion between the product and the sum (jnp.sum of f16/bf16
    products accumulates in f32); the dot then accumulates in that type. `backend`: the
    one that runs the result (module doc: matrix-vector products bound for XLA)."""
    reader = widen or root
    if dtypes.is_bool(prod.dtype):
        return None
    shape, summed = prod.shape, set(root.attrs["axes"])
    (xb, xm), (yb, ym) = (broadcast_view(ctx, v.id, shape) for v in (x, y))

    def miss(why: str) -> None:  # only a product read through a broadcast almost matched
        if xb != x.id or yb != y.id:
            ctx.miss(f"sum of the broadcast product %{prod.id} ({prod.type}) left as it is: "
                     f"{why}", [root, prod])

    users = live_users(ctx, prod)
    if users != (reader.id,) or ctx.is_output(prod):
        others = [f"%{u}" for u in users if u != reader.id] + \
            (["an output"] if ctx.is_output(prod) else [])
        return miss(f"the product is read elsewhere too ({', '.join(others)}), so it is "
                    f"computed anyway")
    if widen is not None and (live_users(ctx, widen) != (root.id,) or ctx.is_output(widen)
                              or not dtypes.is_float(prod.dtype) or not dtypes.is_float(widen.dtype)
                              or dtypes.itemsize(widen.dtype) < dtypes.itemsize(prod.dtype)):
        return miss(f"the conversion %{widen.id} to {widen.dtype} between product and sum is "
                    f"read elsewhere or narrows {prod.dtype}")
    roles = split_axes(xm, ym, shape, summed)
    if roles is None:
        return miss(not_a_product(xm, ym, shape, summed))
    contract, batch, xfree, yfree = roles
    peeled = xb != x.id and yb != y.id
    if not contract:
        return miss(f"no summed axis (axes {sorted(summed)}) indexes both operands: nothing "
                    f"to contract")
    if not (xfree or yfree or peeled):
        return miss("only one operand is broadcast and neither has an axis of its own: the "
                    "product has no temporary larger than its operands to save")
    if xla_lays_out(backend) and not (xfree and yfree):
        return miss(f"a matrix-vector product ({'first' if not xfree else 'second'} operand "
                    f"without a free axis) on the {backend} backend: XLA fuses the broadcast "
                    f"multiply into the sum without making the product, with as many FLOPs "
                    f"as the dot, and could fuse no producer into a dot (DP-SGD's clipped "
                    f"mean of per-example gradients: 2x slower as a dot on XLA:CPU)")
    order, swap = result_order(xm, ym, roles, shape, summed)
    if swap:
        (xb, xm), (yb, ym) = (yb, ym), (xb, xm)
    xb, xm = squeeze_to(ctx, xb, xm)
    yb, ym = squeeze_to(ctx, yb, ym)
    dims = (tuple(xm[k] for k in contract), tuple(ym[k] for k in contract)), \
        (tuple(xm[k] for k in batch), tuple(ym[k] for k in batch))
    attrs = {"dimension_numbers": dims}
    if root.dtype != prod.dtype:
        attrs["preferred_element_type"] = root.dtype
    dot = ctx.emit("dot_general", (xb, yb), attrs)
    return place(ctx, dot, order, root.shape)


_PROD = pat("mul", var("x"), var("y"), name="prod")


def rules(backend: str | None = None) -> list[Rule]:
    """The rule, for the products of a sum and of a widened sum, bound for `backend`."""
    to_dot = partial(_to_dot, backend=backend)
    return [
        Rule("broadcast-mul-sum-to-dot", pat("reduce_sum", _PROD, name="root"), to_dot),
        Rule("broadcast-mul-sum-to-dot",
             pat("reduce_sum", pat("convert_element_type", _PROD, name="widen"), name="root"),
             to_dot),
    ]


RULES = rules()


@register
@dataclass(frozen=True)
class RecognizeDot(RulePass):
    """Turn broadcast-multiply-reduce_sum into dot_general (with batch dims if any)."""

    name: str = "recognize-dot"
    backend: str | None = None  # the backend that runs the result (the compile options')
    options_read: ClassVar[tuple[str, ...]] = ("backend",)

    def rule_list(self) -> Sequence[Rule]:
        return rules(self.backend) if xla_lays_out(self.backend) else RULES
