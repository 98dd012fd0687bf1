"""dot-order's rules for outer products (a `dot_general` without contracting dims, batched
or not): what `vmap(grad)` makes of a dense layer's per-example gradient, O_b = x_b g_b^T.
DP-SGD materialises one such B x m x n tensor per layer only to read it twice: its per-example
squared norms, and its sum over the batch weighted by the clipping factors. Both have a
closed form in x and g (the "ghost norm" of per-example clipping, Goodfellow 2015; Li et al.
2022), at O(B (m + n)) and one gemm instead of O(B m n) memory traffic:

- "contract-outer-product": `dot_general(O, s)` contracting O's batch dims against every dim
  of s is `sum_b s_b x_b g_b^T`, the product x^T (s * g) (s broadcast over g's free dims);
- "norm-of-outer-product": `reduce_sum(R * R)` over every non-batch dim of R (O, or a reshape
  of O that keeps its batch dims in front) is sum_ij x_bi^2 g_bj^2 = |x_b|^2 |g_b|^2.

Once both readers of O are rewritten, nothing reads O and it is gone. Not bit-exact for
floats (a product rounds in another order; exact for integers, modulo their width, as the
original is), like dot-order's re-association (README, Numerics).
"""

from __future__ import annotations

from ..ir import dtypes
from ..ir.graph import Node
from ..ir.ops import dot_dims
from ..ir.rewrite import RewriteContext, Rule, pat


def _outer(ctx: RewriteContext, o: Node) -> tuple[Node, Node, tuple[int, ...], tuple[int, ...]] | None:
    """(x, g, x's batch dims, g's batch dims) when `o` is an outer product of plain
    operands of its own element type; else None."""
    if o.op != "dot_general" or _widens(ctx, o) or dtypes.is_bool(o.dtype):
        return None
    lc, rc, lb, rb = dot_dims(o.attrs)
    if lc or rc:
        return None
    return ctx.node(o.inputs[0]), ctx.node(o.inputs[1]), lb, rb


def _widens(ctx: RewriteContext, dot: Node) -> bool:
    """Whether `dot` accumulates in a type other than its operands' (jnp.einsum names the
    operands' own type for integers: that one is no widening)."""
    pet = dot.attrs.get("preferred_element_type")
    return bool(pet) and pet != ctx.type(dot.inputs[0]).dtype


def _in_order(ctx: RewriteContext, v: int, order: tuple[int, ...]) -> int:
    """`v`, whose dims are `sorted(order)`, transposed to `order` (as given) where it differs."""
    ranked = sorted(order)
    perm = tuple(ranked.index(d) for d in order)
    return v if perm == tuple(range(len(perm))) else \
        ctx.emit("transpose", (v,), {"permutation": perm})


def _contract(ctx: RewriteContext, root: Node) -> int | None:
    if root.op != "dot_general" or _widens(ctx, root):
        return None
    lc, rc, lb, _ = dot_dims(root.attrs)
    if lb:
        return None
    for side in (0, 1):
        o, s = ctx.node(root.inputs[side]), ctx.node(root.inputs[1 - side])
        found = _outer(ctx, o)
        if found is None:
            continue
        x, g, xb, gb = found
        oc, sc = (lc, rc) if side == 0 else (rc, lc)
        # every batch dim of o contracted, against every dim of s, and nothing else
        if sorted(oc) != list(range(len(xb))) or s.type.rank != len(sc) or s.dtype != o.dtype:
            continue
        # s's dim sc[i] meets o's batch dim oc[i], which is g's dim gb[oc[i]]
        on_g = {sc[i]: gb[oc[i]] for i in range(len(sc))}
        dims = tuple(on_g[d] for d in range(s.type.rank))
        sv = s.id
        if list(dims) != sorted(dims):  # broadcast_in_dim wants increasing target dims
            sv = ctx.emit("transpose", (s.id,), {"permutation": tuple(sorted(
                range(len(dims)), key=lambda d: dims[d]))})
            dims = tuple(sorted(dims))
        wide = ctx.emit("broadcast_in_dim", (sv,), {"shape": g.shape, "broadcast_dimensions": dims})
        scaled = ctx.emit("mul", (g.id, wide))
        return ctx.emit("dot_general", (x.id, scaled),
                        {"dimension_numbers": ((xb, gb), ((), ()))})
    return None


def _norm(ctx: RewriteContext, root: Node) -> int | None:
    if root.op != "reduce_sum":
        return None
    sq = ctx.node(root.inputs[0])
    if sq.op != "mul" or sq.inputs[0] != sq.inputs[1]:
        return None
    r = ctx.node(sq.inputs[0])
    o = ctx.node(r.inputs[0]) if r.op == "reshape" else r
    found = _outer(ctx, o)
    if found is None:
        return None
    x, g, xb, gb = found
    nb = len(xb)
    if r.shape[:nb] != o.shape[:nb] or tuple(sorted(root.attrs["axes"])) != tuple(range(nb, r.type.rank)):
        return None

    def squares(v: Node, batch: tuple[int, ...]) -> int:
        free = tuple(d for d in range(v.type.rank) if d not in batch)
        sq = ctx.emit("mul", (v.id, v.id))
        summed = ctx.emit("reduce_sum", (sq,), {"axes": free}) if free else sq
        return _in_order(ctx, summed, batch)

    return ctx.emit("mul", (squares(x, xb), squares(g, gb)))


RULES = [Rule("contract-outer-product", pat("dot_general", name="root"), _contract),
         Rule("norm-of-outer-product", pat("reduce_sum", name="root"), _norm)]
