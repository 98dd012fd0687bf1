"""Which op the GPU program lays out as generated CUDA, and by which module (routines.py
says what a routine is): `prepare(op, input types, result type, attrs)` gives the op's
`Routine`, a reason string where it is one of these ops but its shapes or types have no CUDA
form here, or None for every other op."""

from __future__ import annotations

from collections.abc import Sequence

from ...ir.graph import Attrs, Type
from . import conv, indexing, shape_ops, window
from .routines import Routine, tensor_types

PREPARERS = {**conv.PREPARERS, **window.PREPARERS, **indexing.PREPARERS, **shape_ops.PREPARERS}


def prepare(op: str, ins: Sequence[Type], out: Type, attrs: Attrs) -> Routine | str | None:
    """The generated CUDA of `op` for these types, a reason it has none here, or None when
    `op` is not one that the GPU program lays out."""
    if op not in PREPARERS:
        return None
    types = tensor_types([*ins, out])
    if types is None:
        return f"{op} of tuple values"
    return PREPARERS[op](op, types[:-1], types[-1], attrs)
