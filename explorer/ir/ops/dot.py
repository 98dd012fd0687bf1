"""`dot_general`: the contraction of two operands over paired dimensions, with batch
dimensions and an optional wider accumulation type (mixed precision, int8 products). Its
contraction merges with the add monoid (the split planner's ACCUMULATE), and its program form
is the one np.matmul its reference reaches.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtypes
from ..graph import Attrs, TensorType, Type
from ..traits import MONOIDS, OpKind, Split
from .table import OpDef, OpError, register, sample_array


def dot_dims(attrs: Attrs) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(lhs_contracting, rhs_contracting, lhs_batch, rhs_batch) of a dot_general."""
    (lc, rc), (lb, rb) = attrs["dimension_numbers"]
    return tuple(lc), tuple(rc), tuple(lb), tuple(rb)


def _dot_infer(ts: Sequence[TensorType], a: Attrs) -> TensorType:
    lhs, rhs = ts
    lc, rc, lb, rb = dot_dims(a)
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise OpError(f"dot_general: unpaired dimension numbers {a['dimension_numbers']}")
    for dims, t in ((lc + lb, lhs), (rc + rb, rhs)):
        if len(set(dims)) != len(dims) or any(not 0 <= d < t.rank for d in dims):
            raise OpError(f"dot_general: bad dimension numbers {a['dimension_numbers']} for {t}")
    for l, r in zip(lc + lb, rc + rb):
        if lhs.shape[l] != rhs.shape[r]:
            raise OpError(f"dot_general: dimension {l} of {lhs} does not match dimension {r} of {rhs}")
    if lhs.dtype != rhs.dtype:
        raise OpError(f"dot_general: element types differ: {lhs} and {rhs}")
    shape = [lhs.shape[d] for d in lb]
    shape += [d for i, d in enumerate(lhs.shape) if i not in lc + lb]
    shape += [d for i, d in enumerate(rhs.shape) if i not in rc + rb]
    pet = a.get("preferred_element_type") or lhs.dtype
    if not _widens(lhs.dtype, pet):
        raise OpError(f"dot_general: preferred_element_type {pet} for {lhs.dtype} operands is "
                      f"not a widening the row computes exactly (XLA then multiplies in "
                      f"{lhs.dtype} and converts the result)")
    return TensorType(tuple(shape), pet)


def _widens(src: str, dst: str) -> bool:
    """Whether a dot of `src` operands accumulating in `dst` is the product of the operands
    converted to `dst` (as XLA computes it): the same type, an integer to a float or to an
    integer at least as wide, or a float to a float that holds it exactly."""
    if src == dst:
        return True
    if dtypes.is_int(src):
        return dtypes.is_float(dst) or (dtypes.is_int(dst) and dtypes.bits(dst) >= dtypes.bits(src))
    return (src, dst) in {("bf16", "f32"), ("bf16", "f64"), ("f16", "f32"), ("f16", "f64"),
                          ("f32", "f64")}


def _dot_ref(lhs, rhs, dimension_numbers, preferred_element_type=None):
    (lc, rc), (lb, rb) = dimension_numbers
    lf = [i for i in range(lhs.ndim) if i not in (*lc, *lb)]
    rf = [i for i in range(rhs.ndim) if i not in (*rc, *rb)]
    shape_b = [lhs.shape[i] for i in lb]
    m = math.prod(lhs.shape[i] for i in lf)
    n = math.prod(rhs.shape[i] for i in rf)
    k = math.prod(lhs.shape[i] for i in lc)
    bsz = math.prod(shape_b)
    a = np.transpose(lhs, (*lb, *lf, *lc)).reshape(bsz, m, k)
    b = np.transpose(rhs, (*rb, *rc, *rf)).reshape(bsz, k, n)
    if preferred_element_type:
        a = a.astype(dtypes.to_numpy(preferred_element_type), copy=False)
        b = b.astype(dtypes.to_numpy(preferred_element_type), copy=False)
    out = np.matmul(a, b)
    return out.reshape((*shape_b, *[lhs.shape[i] for i in lf], *[rhs.shape[i] for i in rf]))


def _dot_program(x: list[str], ts: Sequence[Type], out: Type, a: Attrs) -> str:
    """The np.matmul `_dot_ref` reaches, written for these shapes (as `matmul`: see
    OpDef.program): operands as (*batch, m, k) and (*batch, k, n), transposed and reshaped
    only where they are not already."""
    (lc, rc), (lb, rb) = a["dimension_numbers"]
    lhs, rhs = ts
    pet = a.get("preferred_element_type")

    def operand(e: str, t: Any, batch: Sequence[int], first: Sequence[int],
                second: Sequence[int], vector: bool) -> str:
        perm = (*batch, *first, *second)
        if perm != tuple(range(t.rank)):
            e = f"{e}.transpose({perm})"
        shape = (*(t.shape[i] for i in batch), math.prod(t.shape[i] for i in first),
                 math.prod(t.shape[i] for i in second))
        if vector:  # no free dimensions and no batch: a vector, as np.matmul takes one
            shape = (math.prod(t.shape),)
        if shape != tuple(t.shape[i] for i in perm):
            e = f"{e}.reshape({shape})"
        return f"{e}.astype({dtypes.to_numpy(pet).name!r})" if pet and pet != t.dtype else e

    lf = [i for i in range(lhs.rank) if i not in (*lc, *lb)]  # type: ignore[union-attr]
    rf = [i for i in range(rhs.rank) if i not in (*rc, *rb)]  # type: ignore[union-attr]
    vl, vr = not lb and not lf, not rb and not rf
    expr = (f"matmul({operand(x[0], lhs, lb, lf, lc, vl)}, "
            f"{operand(x[1], rhs, rb, rc, rf, vr)})")
    made = (*(lhs.shape[i] for i in lb),  # type: ignore[union-attr]
            *(() if vl else (math.prod(lhs.shape[i] for i in lf),)),  # type: ignore[union-attr]
            *(() if vr else (math.prod(rhs.shape[i] for i in rf),)))  # type: ignore[union-attr]
    return expr if made == out.shape else f"{expr}.reshape({out.shape})"  # type: ignore[union-attr]


def _dot_flops(ins: Sequence[TensorType], out: Type, a: Attrs) -> int:
    lc = dot_dims(a)[0]
    k = math.prod(ins[0].shape[d] for d in lc)
    return 2 * out.size * k  # type: ignore[union-attr]


def _jax_dot(lhs, rhs, dimension_numbers, preferred_element_type=None):
    import jax.lax as lax

    pet = dtypes.to_numpy(preferred_element_type) if preferred_element_type else None
    return lax.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=pet)


def _dot_sample(rng: np.random.Generator) -> tuple[list[np.ndarray], dict]:
    dims = {"dimension_numbers": (((2,), (2,)), ((0,), (0,)))}
    kind = int(rng.integers(3))
    if kind == 0:
        return [sample_array(rng, (2, 3, 4)), sample_array(rng, (2, 5, 4))], dims
    src, pet = (("bf16", "f32"), ("i8", "i32"))[kind - 1]  # mixed precision, int8 products
    return [sample_array(rng, (2, 3, 4), src, -100, 100), sample_array(rng, (2, 5, 4), src, -100, 100)], \
        {**dims, "preferred_element_type": pet}


register(OpDef("dot_general", OpKind.DOT, 2, ("dimension_numbers", "preferred_element_type"),
               _dot_infer, _dot_ref, _dot_flops, _jax_dot, _dot_sample,
               monoid=MONOIDS["add"], split=Split.ACCUMULATE, program=_dot_program,
               optional=("preferred_element_type",)))
