"""dot-order: re-associate chains of matrix products to the cheapest order.

`(A @ B) @ v` costs O(NMD) where `A @ (B @ v)` costs O(MD + NM); XLA keeps the order the user
wrote. A chain is a tree of `dot_general`s (and batch-preserving transposes between them)
whose intermediates each have a single user; its leaves, read as matrices, are re-multiplied
in the order that the matrix-chain dynamic programme finds cheapest in FLOPs, ties broken by
the bytes of the intermediates. Transposes are flipped through rather than kept:
`(A @ B).T = B.T @ A.T`, and a transposed leaf is read through the dot's contracting
dimension, so the new chain has no transpose nodes. Vectors are matrices with a unit
dimension that is never materialised. Batched chains must share the same leading batch
dimensions. The pass fires only on a strict improvement, so it settles; a chain of three or more
left as written gets an `analysis` remark with both costs (explorer/ir/remarks.py).

A scalar factor is a link of the chain too: `dot(s * x, W)` multiplies every element of x by
s, where `s * dot(x, W)` multiplies only the result's (and `dot(x / s, W)` likewise for a
float s). When a dot operand is such a product (read by that dot alone, s a 0-d value or a
splat constant), and the operand has more elements than the result, the factor moves to the
result ("scale-out-of-dot"); the output fusion then folds it into the dot's epilogue. That is
XLA's own algebraic rewrite for a scaled dot operand, and like the reassociation it rounds
differently, and meets an overflow or an infinity in another order (README, Numerics).

Outer products (per-example gradients' x_b g_b^T) read only through a batch-weighted sum or
their squared norms are never formed: outer_products.py's rules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..ir import dtypes
from ..ir.graph import Node
from ..ir.ops import dot_dims
from ..ir.rewrite import RewriteContext, Rule, pat, splat
from . import outer_products, register
from .base import RulePass
from .broadcasts import live_users


@dataclass(frozen=True)
class Leaf:
    """A chain operand read as a matrix: which tensor axis is the row and which the column
    (None: the unit dimension of a vector)."""

    node: int
    row: int | None
    col: int | None


Tree = Leaf | tuple["Tree", "Tree"]


def _batch_dims(n: Node) -> int | None:
    """How many leading batch dims a dot with one contracting dim per side has, else None."""
    if n.op != "dot_general":
        return None
    lc, _, lb, rb = dot_dims(n.attrs)
    return len(lb) if len(lc) == 1 and lb == rb == tuple(range(len(lb))) else None


def _free(rank: int, nb: int, contracting: int) -> int | None:
    others = [a for a in range(nb, rank) if a != contracting]
    return others[0] if others else None


def _fits(ctx: RewriteContext, n: Node, nb: int) -> bool:
    """A chain link: a dot with `nb` batch dims, operands of rank nb+1 (vectors) or nb+2
    (matrices), and no type conversion."""
    ins = [ctx.node(i) for i in n.inputs]
    return _batch_dims(n) == nb and all(x.dtype == n.dtype and x.type.rank in (nb + 1, nb + 2)
                                        for x in ins)


def _out_axes(ctx: RewriteContext, n: Node, nb: int) -> tuple[int | None, int | None]:
    """The (row, col) tensor axes of a chain dot's result."""
    (lc,), (rc,), _, _ = dot_dims(n.attrs)
    lhs, rhs = (ctx.node(i) for i in n.inputs)
    has_row = _free(lhs.type.rank, nb, lc) is not None
    has_col = _free(rhs.type.rank, nb, rc) is not None
    return (nb if has_row else None), (nb + has_row if has_col else None)


def _single_use(ctx: RewriteContext, n: Node) -> int | None:
    users = live_users(ctx, n)
    return users[0] if len(users) == 1 and not ctx.is_output(n) else None


def _batch_transpose(n: Node, nb: int) -> bool:
    return n.op == "transpose" and tuple(n.attrs["permutation"][:nb]) == tuple(range(nb))


def _absorbed(ctx: RewriteContext, n: Node, nb: int) -> bool:
    """Whether `n` is the inside of a larger chain (so that chain's root handles it)."""
    user = _single_use(ctx, n)
    if user is None:
        return False
    u = ctx.node(user)
    return _fits(ctx, u, nb) or (_batch_transpose(u, nb) and _absorbed(ctx, u, nb))


def _flatten(ctx: RewriteContext, nid: int, row: int | None, col: int | None, nb: int,
             top: bool = False) -> Tree:
    n = ctx.node(nid)
    if top or _single_use(ctx, n) is not None:
        if _batch_transpose(n, nb):
            perm = n.attrs["permutation"]
            return _flatten(ctx, n.inputs[0], *(None if a is None else perm[a]
                                                 for a in (row, col)), nb)
        if _fits(ctx, n, nb):
            (lc,), (rc,), _, _ = dot_dims(n.attrs)
            lhs, rhs = (ctx.node(i) for i in n.inputs)
            lf, rf = _free(lhs.type.rank, nb, lc), _free(rhs.type.rank, nb, rc)
            if (row, col) == _out_axes(ctx, n, nb):
                return (_flatten(ctx, lhs.id, lf, lc, nb), _flatten(ctx, rhs.id, rc, rf, nb))
            return (_flatten(ctx, rhs.id, rf, rc, nb), _flatten(ctx, lhs.id, lc, lf, nb))
    return Leaf(nid, row, col)


def _leaves(t: Tree) -> list[Leaf]:
    return [t] if isinstance(t, Leaf) else _leaves(t[0]) + _leaves(t[1])


Cost = tuple[int, int]  # (FLOPs, bytes of intermediates), compared lexicographically


def _product(dim: dict[int, int], i: int, k: int, j: int, batch: int, item: int) -> Cost:
    """Multiplying leaves i..k-1 by k..j-1: a (dim[i] x dim[k]) by (dim[k] x dim[j]) product."""
    out = batch * dim[i] * dim[j]
    return 2 * out * dim[k], out * item


def _tree_cost(t: Tree, dim: dict[int, int], first: int, batch: int, item: int) -> Cost:
    """Cost of multiplying out `t`, whose leaves start at index `first` of the chain."""
    if isinstance(t, Leaf):
        return (0, 0)
    k = first + len(_leaves(t[0]))
    j = k + len(_leaves(t[1]))
    parts = (_tree_cost(t[0], dim, first, batch, item), _tree_cost(t[1], dim, k, batch, item),
             _product(dim, first, k, j, batch, item))
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def _best(dim: dict[int, int], leaves: list[Leaf], batch: int, item: int) -> tuple[Cost, Tree]:
    """The matrix-chain DP: best[(i, j)] = cheapest way to multiply leaves i..j-1."""
    best: dict[tuple[int, int], tuple[Cost, Tree]] = {
        (i, i + 1): ((0, 0), leaf) for i, leaf in enumerate(leaves)}
    for span in range(2, len(leaves) + 1):
        for i in range(len(leaves) - span + 1):
            j = i + span
            options = []
            for k in range(i + 1, j):
                (lf, lb), lt = best[(i, k)]
                (rf, rb), rt = best[(k, j)]
                f, b = _product(dim, i, k, j, batch, item)
                options.append(((lf + rf + f, lb + rb + b), (lt, rt)))
            best[(i, j)] = min(options, key=lambda o: o[0])
    return best[(0, len(leaves))]


def _emit(ctx: RewriteContext, t: Tree, nb: int) -> Leaf:
    if isinstance(t, Leaf):
        return t
    lhs, rhs = _emit(ctx, t[0], nb), _emit(ctx, t[1], nb)
    batch = tuple(range(nb))
    nid = ctx.emit("dot_general", (lhs.node, rhs.node),
                   {"dimension_numbers": (((lhs.col,), (rhs.row,)), (batch, batch))})
    has_row = lhs.row is not None
    return Leaf(nid, nb if has_row else None, nb + has_row if rhs.col is not None else None)


def _reorder(ctx: RewriteContext, root: Node) -> int | None:
    nb = _batch_dims(root)
    if nb is None or not _fits(ctx, root, nb) or _absorbed(ctx, root, nb):
        return None
    tree = _flatten(ctx, root.id, *_out_axes(ctx, root, nb), nb, top=True)
    leaves = _leaves(tree)
    if len(leaves) < 3:
        return None
    shape = lambda leaf, axis: 1 if axis is None else ctx.type(leaf.node).shape[axis]  # noqa: E731
    dim = {i: shape(leaf, leaf.row) for i, leaf in enumerate(leaves)}
    dim[len(leaves)] = shape(leaves[-1], leaves[-1].col)
    if any(shape(a, a.col) != dim[i + 1] for i, a in enumerate(leaves)):
        return None  # not a chain after all (cannot happen for well-typed dots)
    batch, item = math.prod(root.shape[:nb]), dtypes.itemsize(root.dtype)
    cost, order = _best(dim, leaves, batch, item)
    written = _tree_cost(tree, dim, 0, batch, item)
    if cost >= written:
        chain = " @ ".join(f"{dim[i]}x{dim[i + 1]}" for i in range(len(leaves)))
        ctx.miss(f"chain of {len(leaves)} matrices ({chain}"
                 f"{f', {batch:,} batches' if nb else ''}) left as written: already the "
                 f"cheapest order, {written[0]:,} FLOPs and {written[1]:,} bytes of "
                 f"intermediates; the best order costs {cost[0]:,} FLOPs and {cost[1]:,} bytes",
                 kind="analysis")
        return None
    return _emit(ctx, order, nb).node


def _factor(ctx: RewriteContext, m: Node) -> tuple[int, int] | None:
    """(x, s) for an operand `m` = x * s, s * x or x / s with `s` a 0-d value or a splat
    constant (then a new 0-d constant) and x of m's type; else None."""
    if m.op not in ("mul", "div") or not dtypes.is_float(m.dtype) and (
            m.op == "div" or not dtypes.is_int(m.dtype)):
        return None  # integer division does not distribute over a sum
    sides = [(0, 1), (1, 0)] if m.op == "mul" else [(0, 1)]
    for xi, si in sides:
        x, s = (ctx.node(m.inputs[i]) for i in (xi, si))
        if x.type != m.type or s.dtype != m.dtype:
            continue
        if s.type.rank == 0:
            return x.id, s.id
        if s.op == "broadcast_in_dim" and ctx.type(s.inputs[0]).rank == 0:
            return x.id, s.inputs[0]
        if splat(s) is not None:
            return x.id, ctx.constant(s.attrs["value"].array.reshape(-1)[0], m.dtype)
    return None


def _scale_out(ctx: RewriteContext, root: Node) -> int | None:
    if root.op != "dot_general":
        return None
    for k, i in enumerate(root.inputs):
        m = ctx.node(i)
        if m.dtype != root.dtype or math.prod(m.shape) <= math.prod(root.shape) \
                or live_users(ctx, m) != (root.id,) or ctx.is_output(m):
            continue
        found = _factor(ctx, m)
        if found is None:
            continue
        x, s = found
        ins = list(root.inputs)
        ins[k] = x
        return ctx.emit(m.op, (ctx.emit("dot_general", ins, root.attrs), s))
    return None


RULES = [Rule("reassociate-dot-chain", pat("dot_general", name="root"), _reorder),
         Rule("scale-out-of-dot", pat("dot_general", name="root"), _scale_out),
         *outer_products.RULES]


@register
@dataclass(frozen=True)
class DotOrder(RulePass):
    """Re-associate dot_general chains to the order with the fewest FLOPs."""

    name: str = "dot-order"

    def rule_list(self) -> Sequence[Rule]:
        return RULES
