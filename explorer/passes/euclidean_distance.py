"""euclidean-distance: `sum((a[:,None,:] - b[None,:,:])**2, -1)` -> `|a|^2 + |b|^2 - 2 a.b^T`.

The naive pairwise squared distance materialises an N x M x K difference (it is
what runs out of GPU memory first); the quadratic form needs only the two norms and one matrix
product. The operands of the `sub` are read through their broadcasts (see
`broadcasts.broadcast_view`), so any axis order works: summed axes indexed by both
operands are the features, kept axes of one operand only are the point axes (at least one
each), kept axes of both are batch dims. The square may be `integer_pow` y=2, `square` or
`mul(d, d)`. Scaling and consumers such as `sqrt` or `exp(-gamma * d)` read the replaced
`reduce_sum` and are left as they are.

Not bit-exact, but exact at zero. `|a|^2 + |b|^2 - 2 a.b` cancels when points are close:
rounding leaves an error of a few units of roundoff u (2^-24 for float32, 2^-53 for float64)
times |a|^2 + |b|^2 (at most (2K + 1) u for K features, whatever the summation order), so
where the true distance is 0 (a point's distance to itself, or to a coincident point of the
other set) the plain form gives a tiny positive or negative number, which is no rounding
error any more under `sqrt` (0.002 instead of 0), comparisons (`d > 0` true) or
`floor(exp(-d))` (0 instead of 1). So the cross term is scaled by -2(1 + c) instead of -2,
with c = `noise_bound(dtype, K)` = min(2(K + 2), 128) u: at coincident points the form is then
-c (|a|^2 + |b|^2) plus rounding smaller than that, always negative, and the clamp
`max(., 0)` makes it an exact 0, also under sqrt, comparisons and floor. Elsewhere the bias
is -2c a.b, at most c (|a|^2 + |b|^2) by Cauchy-Schwarz, so every result is within
(c + (2K + 1) u) (|a|^2 + |b|^2) of the true distance (float32, K = 64: 7.6e-6 plus rounding
measured at most 12 u = 7e-7 for K = 2..4096), and under `sqrt` within the square root of
that. The cap of 128 u makes the zero exact by the bound for K <= 62 only; beyond that,
measured errors stay far below it (exact zeros in every measurement up to K = 4096).

With few features the form is computed in the next wider float type: up to
WIDE_MAX_FEATURES = 32 float32 features (float16 and bfloat16: the same, in float32) the two
operands are converted once, the norms, the cross term, their sum and the clamp are formed in
float64, and the result is rounded to float32 at the end. The cancellation error, now
(c + (2K + 1) u64)(|a|^2 + |b|^2), falls below half a float32 ulp of the distance unless the
distance is 2^-29 or less of the norms, so the result is the correctly rounded distance
almost everywhere: nearest neighbours are those of the naive program (which rounds K
float32 squares and sums) wherever their exact distances are more than a few float32 ulps
apart. Measured: kNN 2,000 x 20,000, 3 features, k = 8: 6 of 16,000 neighbour slots differed
from jax.jit of the naive program in float32, none in float64. The price is small there: with
so few features the product is bound by writing its N x M result (2K FLOPs per 8 bytes), not
by arithmetic. Beyond 32 features it is compute-bound, float64 would halve its speed, and
distances in that many dimensions are rarely small next to the norms (they concentrate), so
the form stays in the input's type. With 2 float32 features (1 for float16) the wide N x M
result is no smaller than the N x M x K difference: the rewrite saves nothing and declines.
The jax backend runs such graphs under x64 (backends/jax.py).

Where it declines a squared difference whose operands are both read through broadcasts (a
pairwise distance in form), a `missed` remark says why (explorer/ir/remarks.py): not a float
type, the difference or its square read elsewhere, a summed point axis or no point axis on one
side, or a wide result no smaller than the difference. It does not decline under consumers
sensitive at zero (see below), so there is no remark for those.

Why a biased constant rather than snapping small results to 0 (`select(total < bound, 0,
total)`) or declining to fire under consumers sensitive at zero: the constant replaces the
-2 that is there anyway, so the rewrite costs no extra op and no extra N x M temporary (a snap
adds three elementwise ops on the N x M result, which the reference backend materialises one
by one inside a fused kernel, and which took the memory-split seed programs over their
limit); and no list of consumers sensitive at zero is complete (`1/d`, `log`, `d**0.5`,
`argmin`, ...), while giving up the common `sqrt` (cdist) and radius (`d < r**2`) forms would
lose the rewrite where it pays most.

Non-finite inputs are a known divergence: where a point has an infinite coordinate (or one
whose square overflows) the naive form gives +inf, but the quadratic form gives NaN when the
other point's coordinate there has the same sign or is 0 (inf - inf, inf * 0); with the
opposite sign it gives +inf too, and with a NaN input both give NaN. Likewise where
|a|^2 + |b|^2 overflows (coordinates around 1e19 in float32) while the difference does not,
the form gives NaN (inf - inf) where the naive one is finite, 0 for coincident points. Telling
these apart would need an elementwise pass over the N x M result, which is what the rewrite
exists to avoid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from ..ir import dtypes
from ..ir.graph import Node
from ..ir.rewrite import RewriteContext, Rule, pat, var
from . import register
from .base import RulePass
from .broadcasts import broadcast_view, live_users, not_a_product, place, result_order, split_axes, squeeze_to

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
            *, wide_max: int) -> int | None:
    shape, summed = diff.shape, set(root.attrs["axes"])
    (ab, am), (bb, bm) = (broadcast_view(ctx, v.id, shape) for v in (x, y))

    def miss(why: str) -> None:  # only a difference of two broadcasts is a distance in form
        if ab != x.id and bb != y.id:
            ctx.miss(f"squared distance over %{diff.id} ({diff.type}) left as written: {why}",
                     [root, diff])

    if not dtypes.is_float(root.dtype):
        return miss(f"{root.dtype} is not a float type (the form's bias and clamp are for "
                    f"floats)")
    if ctx.is_output(sq) or ctx.is_output(diff) or live_users(ctx, sq) != (root.id,) \
            or set(live_users(ctx, diff)) != {sq.id}:
        return miss("the difference or its square is read elsewhere too (or is an output), "
                    "so the N x M x K temporary is made anyway: nothing saved")
    roles = split_axes(am, bm, shape, summed)
    if roles is None:
        return miss(not_a_product(am, bm, shape, summed))
    contract, batch, apoints, bpoints = roles
    if not (contract and apoints and bpoints):  # a feature axis, and points on both sides
        return miss("no summed feature axis indexes both operands" if not contract else
                    f"the {'first' if not apoints else 'second'} operand has no point axis of "
                    f"its own")
    (ab, am), (bb, bm) = squeeze_to(ctx, ab, am), squeeze_to(ctx, bb, bm)
    kept = [k for k in range(len(shape)) if k not in summed]
    out = root.shape
    features = math.prod(shape[k] for k in contract)
    wide = WIDER.get(root.dtype) if features <= wide_max else None
    dtype = wide or root.dtype
    if wide and features * dtypes.itemsize(root.dtype) <= dtypes.itemsize(wide):
        # the wide N x M result is no smaller than the N x M x K difference
        return miss(f"{features} {root.dtype} feature{'s' if features != 1 else ''}: the "
                    f"exact wide form's {wide} result ({root.type.size:,} x "
                    f"{dtypes.itemsize(wide)} bytes) is no smaller than the difference "
                    f"({diff.type.size:,} x {dtypes.itemsize(root.dtype)} bytes), so the "
                    f"rewrite saves nothing")
    if wide:  # few features: norms, cross term and sum in the wider type (module doc)
        widened = {v: ctx.emit("convert_element_type", (v,), {"new_dtype": wide})
                   for v in dict.fromkeys((ab, bb))}  # (one convert when a and b are one tensor)
        ab, bb = widened[ab], widened[bb]
    made: dict[tuple[int, ...], int] = {}
    norm_a = _norm(ctx, ab, am, contract, kept, out, made)
    norm_b = _norm(ctx, bb, bm, contract, kept, out, made)
    order, swap = result_order(am, bm, roles, shape, summed)
    if swap:  # b.a^T may come out in the user's order where a.b^T does not
        (ab, am), (bb, bm) = (bb, bm), (ab, am)
    dims = (tuple(am[k] for k in contract), tuple(bm[k] for k in contract)), \
        (tuple(am[k] for k in batch), tuple(bm[k] for k in batch))
    # -2(1 + c) * (a.b) == (-2(1 + c) a).b up to one rounding, so scale the smallest of the
    # three (a and b may be one tensor: the distances within one point set); c makes the
    # result at coincident points negative, so the clamp gives an exact 0 (module doc)
    sizes = (ctx.type(ab).size, ctx.type(bb).size, root.type.size)
    small = sizes.index(min(sizes))
    c = noise_bound(dtype, features)
    factor = ctx.constant(-2.0 * (1.0 + c), dtype)
    scale = lambda i: ctx.emit("mul", (i, factor))  # noqa: E731
    lhs, rhs = scale(ab) if small == 0 else ab, scale(bb) if small == 1 else bb
    cross = place(ctx, ctx.emit("dot_general", (lhs, rhs), {"dimension_numbers": dims}), order, out)
    # (|a|^2 + cross) + |b|^2: each broadcast norm is added to the N x M cross term. The
    # same two roundings as (|a|^2 + |b|^2) + cross, but XLA's CPU fusion of add(broadcast,
    # broadcast) into the dot's epilogue runs 1.5x slower (measured at 4000 x 4000 x 64)
    total = ctx.emit("add", (ctx.emit("add", (norm_a, scale(cross) if small == 2 else cross)), norm_b))
    clamped = ctx.emit("max", (total, ctx.constant(0.0, dtype)))
    if wide:
        return ctx.emit("convert_element_type", (clamped,), {"new_dtype": root.dtype})
    return clamped


# Up to this many features the quadratic form is computed in the next wider float type
# (float32 -> float64; float16, bfloat16 -> float32): its cancellation error then falls far
# below the result's own rounding, and with so few features the matrix product is bound by
# writing its N x M result, not by arithmetic (measured: module doc)
WIDE_MAX_FEATURES = 32
WIDER = {"f32": "f64", "f16": "f32", "bf16": "f32"}


# significand bits (the hidden bit included) by float type: the unit roundoff is 2^-bits
_BITS = {"bf16": 8, "f16": 11, "f32": 24, "f64": 53}


def noise_bound(dtype: str, features: int) -> float:
    """c, the relative bias of the cross term: 2(K + 2) units of roundoff, which bounds the
    rounding error of the quadratic form at coincident points for any summation order,
    capped at 128 units (7.6e-6 for float32; measured errors stay under 16 units)."""
    return min(2 * (features + 2), 128) * 2.0 ** -_BITS[dtype]


_DIFF = pat("sub", var("x"), var("y"), name="diff")


def rules(wide_max_features: int = WIDE_MAX_FEATURES) -> list[Rule]:
    """The rule in its three spellings of a square, taking the exact wide form up to
    `wide_max_features` features."""
    expand = partial(_expand, wide_max=wide_max_features)
    return [
        Rule(RULE_NAME, pat("reduce_sum", pat(op, _DIFF, name="sq", attrs=attrs), name="root"),
             expand)
        for op, attrs in (("integer_pow", {"y": 2}), ("square", None))
    ] + [Rule(RULE_NAME, pat("reduce_sum", pat("mul", _DIFF, _DIFF, name="sq"), name="root"),
              expand)]


RULES = rules()


@register
@dataclass(frozen=True)
class EuclideanDistance(RulePass):
    """Rewrite the naive pairwise squared distance into its quadratic form (see module doc)."""

    name: str = "euclidean-distance"
    # the exact wide form up to this many features (`euclidean-distance{wide-max-features=64}`)
    wide_max_features: int = WIDE_MAX_FEATURES

    def rule_list(self) -> Sequence[Rule]:
        return RULES if self.wide_max_features == WIDE_MAX_FEATURES \
            else rules(self.wide_max_features)
