"""simplify: algebraic identities that are exact in IEEE arithmetic, shape-op clean-ups,
transposes folded into `dot_general`, and folding of small constants.

Applied (bit-exact for every input, NaN, infinities and signed zeros included):
  x * 1, 1 * x, x / 1 -> x          (integer and real floating types)
  x + (-0.0), x - (+0.0) -> x       (floats: -0.0 is the additive identity; integers: 0)
  neg(neg(x)) -> x;  x ** 1 -> x;  x ** 2 -> x * x  (what lax.integer_pow computes)
  convert_element_type to x's own type, reduce over no axes, and broadcast/reshape/transpose
  that keep x as it is -> x; broadcast of broadcast, reshape of reshape, transpose of
  transpose -> one op; transpose feeding dot_general -> new dimension numbers; a transpose
  that swaps a dot_general's two free blocks -> the dot with its operands swapped, except
  for an outer product (no contracting dim) bound for XLA (the `backend` option is "jax",
  passes/targets.py): XLA turns it into a broadcast multiply fused into its readers and
  places the transpose itself, and the swapped form ran 5x slower there (DP-SGD's
  per-example gradients, bench/jax_stages.py); a `missed` remark says so.
  An op whose inputs are all constants -> a constant, if the result has at most `fold_limit`
  elements and no more than its largest input (a broadcast of a splat stays a broadcast);
  the op table's NumPy reference computes it, as the reference interpreter would.

Not applied, because they are not exact:
  x + 0.0 -> x      (-0.0 + 0.0 is +0.0)        x - (-0.0) -> x  (same)
  0 - x -> neg(x)   (0 - 0 is +0.0, neg(0) is -0.0)
  x * 0 -> 0        (NaN * 0 and inf * 0 are NaN; -1 * 0 is -0.0)
  x - x -> 0, x / x -> 1   (NaN and inf; 0 / 0)
  x ** 0 -> 1       (exact, but it would materialise a constant of x's shape)
  re-association of + and * (rounding), and any identity on complex numbers (x * (1+0j)
  turns an infinite imaginary part into NaN).
Every replacement must have the root's exact type, so an identity that would change the
shape of the result through implicit broadcasting (a scalar x times a tensor of ones) is
left alone.

The identities refused as not exact are rules that never fire: each says, in a `missed`
remark on the op (explorer/ir/remarks.py), which identity it left alone and why
("mul-by-zero", "add-positive-zero", "sub-negative-zero", "zero-minus", "sub-self",
"div-self", "pow-zero"), as does "identity-changes-type" for an exact identity whose
replacement would have another shape and "complex-identity" for x * 1 on complex numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..ir import dtypes
from ..ir.graph import Node
from ..ir.ops import MONOID_REDUCTIONS, OPS, dot_dims
from ..ir.remarks import enabled
from ..ir.rewrite import RewriteContext, Rule, pat, splat, var
from ..ir.traits import OpKind
from .base import RulePass
from .targets import xla_lays_out

_EXACT = ("i", "u", "f", "b")  # first letters of integer and real float type names


def _value(ctx: RewriteContext, n: Node) -> Any:
    """The splat value of a constant, also seen through a broadcast of one."""
    if n.op == "broadcast_in_dim":
        n = ctx.node(n.inputs[0])
    return splat(n)


def _is(v: Any, want: float, dtype: str) -> bool:
    if v is None or isinstance(v, complex | bool):
        return False
    if dtypes.is_int(dtype):
        return v == want
    v = float(v)
    return v == want and bool(np.signbit(v)) == bool(np.signbit(want))


def _identity(want: float, int_want: float) -> Any:
    """A replacement: `root` -> x when `c` is the identity element of the root's op."""

    def fn(ctx: RewriteContext, root: Node, x: Node, c: Node) -> int | None:
        d = root.dtype
        if dtypes.is_bool(d):
            return None
        v = _value(ctx, c)
        if d[0] not in _EXACT:
            if d[0] == "c" and root.op in ("mul", "div") and v is not None and v == want:
                ctx.miss(f"{root.op} by {v} -> x refused on complex {d}: x * (1+0j) turns an "
                         f"infinite imaginary part into NaN, so no identity is applied to "
                         f"complex numbers", [root])
            return None
        if not _is(v, int_want if dtypes.is_int(d) else want, d):
            return None
        if x.type != root.type:
            ctx.miss(f"the identity would replace {root.type} by {x.type}: the constant "
                     f"broadcasts x, so the result is not x itself", [root])
            return None
        return x.id

    return fn


def _refused(op: str, test: Any, why: str) -> Any:
    """A rule that never fires: a float `root` matching `test(value of c)` gets a missed
    remark saying why the identity is not applied (it is not IEEE-exact)."""

    def fn(ctx: RewriteContext, root: Node, x: Node, c: Node | None = None) -> None:
        if not dtypes.is_float(root.dtype):
            return None
        v = None if c is None else _value(ctx, c)
        if c is None or (v is not None and not isinstance(v, complex | bool) and test(float(v))):
            ctx.miss(f"{op} refused: {why}", [root])
        return None

    return fn


def _zero(v: float) -> bool:
    return v == 0.0


def _plus_zero(v: float) -> bool:
    return v == 0.0 and not np.signbit(v)


def _minus_zero(v: float) -> bool:
    return v == 0.0 and bool(np.signbit(v))


def _same(ctx: RewriteContext, root: Node, x: Node) -> int | None:
    return x.id if x.type == root.type else None


def _identity_perm(n: Node) -> bool:
    return tuple(n.attrs["permutation"]) == tuple(range(len(n.attrs["permutation"])))


def _square(ctx: RewriteContext, x: Node) -> int:
    return ctx.emit("mul", [x, x])


def _broadcasts(ctx: RewriteContext, root: Node, inner: Node, x: Node) -> int:
    mid = inner.attrs["broadcast_dimensions"]
    dims = tuple(root.attrs["broadcast_dimensions"][d] for d in mid)
    return ctx.emit("broadcast_in_dim", [x], {"shape": root.shape, "broadcast_dimensions": dims})


def _reshapes(ctx: RewriteContext, root: Node, x: Node) -> int:
    return ctx.emit("reshape", [x], {"new_sizes": root.shape})


def _transposes(ctx: RewriteContext, root: Node, inner: Node, x: Node) -> int:
    first, second = inner.attrs["permutation"], root.attrs["permutation"]
    return ctx.emit("transpose", [x], {"permutation": tuple(first[p] for p in second)})


def _through(perm: tuple[int, ...], contract: tuple[int, ...], batch: tuple[int, ...],
             ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Dimension numbers read through a transpose, if the free dims keep their order."""
    free = [perm[d] for d in range(len(perm)) if d not in contract + batch]
    if free != sorted(free):
        return None
    return tuple(perm[d] for d in contract), tuple(perm[d] for d in batch)


def _dot_through_transpose(ctx: RewriteContext, root: Node) -> int | None:
    lc, rc, lb, rb = dot_dims(root.attrs)
    lhs, rhs = (ctx.node(i) for i in root.inputs)
    if lhs.op == "transpose" and (got := _through(lhs.attrs["permutation"], lc, lb)):
        lc, lb = got
        lhs = ctx.node(lhs.inputs[0])
    if rhs.op == "transpose" and (got := _through(rhs.attrs["permutation"], rc, rb)):
        rc, rb = got
        rhs = ctx.node(rhs.inputs[0])
    if (lhs.id, rhs.id) == root.inputs:
        return None
    attrs = root.attrs.replace(dimension_numbers=((lc, rc), (lb, rb)))
    return ctx.emit("dot_general", [lhs, rhs], attrs)


def _dot_transposed(backend: str | None) -> Any:
    """transpose(dot_general(a, b)) that swaps the two free blocks (batch dims kept first)
    -> dot_general(b, a): the product comes out in the order it is read, with no transposed
    view for later ops to stride through. Declined where XLA compiles the result
    (`xla_lays_out`, module doc) for an outer product, a dot with no contracting dim."""

    def fn(ctx: RewriteContext, root: Node, dot: Node) -> int | None:
        if ctx.users(dot) != (root.id,) or ctx.is_output(dot):
            return None  # the untransposed product is needed as well: one dot, not two
        lc, rc, lb, rb = dot_dims(dot.attrs)
        lhs, rhs = (ctx.node(i) for i in dot.inputs)
        nb = len(lb)
        nl = lhs.type.rank - len(lc) - nb  # type: ignore[union-attr]
        nr = rhs.type.rank - len(rc) - nb  # type: ignore[union-attr]
        want = (*range(nb), *range(nb + nl, nb + nl + nr), *range(nb, nb + nl))
        if tuple(root.attrs["permutation"]) != want or nl == 0 or nr == 0:
            return None
        if xla_lays_out(backend) and not lc:
            ctx.miss(f"outer product %{dot.id} ({dot.type}, no contracting dim) keeps its "
                     f"transpose on the {backend} backend: XLA makes it a broadcast multiply "
                     f"that it fuses into its readers, and places the transpose itself; "
                     f"with the operands swapped, XLA:CPU ran DP-SGD's per-example gradients "
                     f"5x slower", [root, dot])
            return None
        return _swapped(ctx, dot)

    return fn


def _swapped(ctx: RewriteContext, dot: Node) -> int:
    lc, rc, lb, rb = dot_dims(dot.attrs)
    lhs, rhs = (ctx.node(i) for i in dot.inputs)
    attrs = dot.attrs.replace(dimension_numbers=((rc, lc), (rb, lb)))
    return ctx.emit("dot_general", [rhs, lhs], attrs)


def _fold(limit: int) -> Any:
    def fn(ctx: RewriteContext, root: Node) -> int | None:
        op = OPS[root.op]
        if (not root.inputs or op.kind in (OpKind.SOURCE, OpKind.REGION) or op.barrier
                or not hasattr(root.type, "shape")
                or root.type.size > limit):
            return None
        ins = [ctx.node(i) for i in root.inputs]
        if any(n.op != "constant" for n in ins) or root.type.size > max(n.type.size for n in ins):
            return None  # folding an expansion (a broadcast of a splat) would only grow it
        try:
            with np.errstate(all="ignore"):
                out = op.ref(*(n.attrs["value"].array for n in ins), **root.attrs)
            value = np.asarray(out, dtype=dtypes.to_numpy(root.dtype))
        except Exception:  # an op the reference cannot run on these values: leave it
            return None
        return ctx.constant(value, root.dtype) if value.shape == root.shape else None

    return fn


def rules(fold_limit: int = 64, backend: str | None = None) -> list[Rule]:
    x, c = var("x"), var("c")
    return [
        Rule("mul-by-one", pat("mul", x, c, name="root", commute=True), _identity(1.0, 1)),
        Rule("div-by-one", pat("div", x, c, name="root"), _identity(1.0, 1)),
        Rule("add-zero", pat(("add", "add_any"), x, c, name="root", commute=True),
             _identity(-0.0, 0)),
        Rule("sub-zero", pat("sub", x, c, name="root"), _identity(0.0, 0)),
        Rule("neg-neg", pat("neg", pat("neg", x), name="root"), _same),
        Rule("pow-one", pat("integer_pow", x, name="root", attrs={"y": 1}), _same),
        Rule("pow-two", pat("integer_pow", x, attrs={"y": 2}), _square),
        Rule("convert-same-type", pat("convert_element_type", x, name="root"), _same),
        Rule("reduce-no-axes", pat(tuple(MONOID_REDUCTIONS.values()), x, name="root",
                                   attrs={"axes": ()}), _same),
        Rule("noop-shape-op", pat(("broadcast_in_dim", "reshape"), x, name="root"), _same),
        Rule("noop-shape-op", pat("transpose", x, name="root", where=_identity_perm), _same),
        Rule("broadcast-of-broadcast", pat("broadcast_in_dim", pat("broadcast_in_dim", x,
                                           name="inner"), name="root"), _broadcasts),
        Rule("reshape-of-reshape", pat("reshape", pat("reshape", x), name="root"), _reshapes),
        Rule("transpose-of-transpose", pat("transpose", pat("transpose", x, name="inner"),
                                           name="root"), _transposes),
        Rule("transpose-into-dot", pat("dot_general", name="root"), _dot_through_transpose),
        Rule("transpose-of-dot", pat("transpose", pat("dot_general", name="dot"), name="root"),
             _dot_transposed(backend)),
        Rule("fold-constant", var("root"), _fold(fold_limit)),
    ]


def refusals() -> list[Rule]:
    """The identities that are not exact: rules that never fire, each says why (module doc).
    The pass runs them only while remarks are made (explorer/ir/remarks.py `enabled`)."""
    x, c = var("x"), var("c")
    return [
        Rule("mul-by-zero", pat("mul", x, c, name="root", commute=True), _refused(
            "x * 0 -> 0", _zero, "NaN * 0 and inf * 0 are NaN, and -1 * 0 is -0.0")),
        Rule("add-positive-zero", pat(("add", "add_any"), x, c, name="root", commute=True),
             _refused("x + 0.0 -> x", _plus_zero, "-0.0 + 0.0 is +0.0, not -0.0 (only "
                      "x + (-0.0) is exact)")),
        Rule("sub-negative-zero", pat("sub", x, c, name="root"), _refused(
            "x - (-0.0) -> x", _minus_zero, "-0.0 - (-0.0) is +0.0, not -0.0 (only x - 0.0 "
            "is exact)")),
        Rule("zero-minus", pat("sub", c, x, name="root"), _refused(
            "0 - x -> neg(x)", _zero, "0 - 0 is +0.0 where neg(0) is -0.0")),
        Rule("sub-self", pat("sub", x, x, name="root"), _refused(
            "x - x -> 0", _zero, "inf - inf and NaN - NaN are NaN")),
        Rule("div-self", pat("div", x, x, name="root"), _refused(
            "x / x -> 1", _zero, "0 / 0, inf / inf and NaN / NaN are NaN")),
        Rule("pow-zero", pat("integer_pow", x, name="root", attrs={"y": 0}), _refused(
            "x ** 0 -> 1", _zero, "exact, but it would materialise a constant of x's shape")),
    ]


@dataclass(frozen=True)
class Simplify(RulePass):
    name: str = "simplify"
    fold_limit: int = 64  # fold constants of at most this many elements
    backend: str | None = None  # the backend that runs the result (the compile options')
    options_read: ClassVar[tuple[str, ...]] = ("backend",)

    def rule_list(self) -> Sequence[Rule]:
        return rules(self.fold_limit, self.backend) + (refusals() if enabled() else [])
