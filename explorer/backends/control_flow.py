"""The control-flow drivers: how a `scan`, a `while` and a `conditional` run their bodies, in
one place for every target.

The interpreter core (interpreter.py) calls them with its child interpreters as the bodies,
and a generated program (program_writer.py) with the functions it wrote for the bodies; both
pass an array namespace `xp` (NumPy, CuPy, or jax.numpy in an eager run) for the arrays a
driver allocates. A body is a function of its parameters returning the list of its results.

The semantics are HLO's: a `scan` writes each iteration's rows into stacked results allocated
once (so one iteration's temporaries are live at a time), a `while` runs its condition before
each body call, a `conditional` clamps its selector into range.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir.graph import TensorType, TupleType, Type
from ..ir.ops.regions import scan_groups
from .combine import Arrays

Body = Callable[..., list[Any]]


def one_or_tuple(outs: Sequence[Any]) -> Any:
    """A region's value: its one result, or the tuple of its results."""
    return outs[0] if len(outs) == 1 else tuple(outs)


def elements(t: Type) -> tuple[TensorType, ...]:
    """The tensor types of a value of type `t` (one, or a tuple's)."""
    return t.elements if isinstance(t, TupleType) else (t,)  # type: ignore[return-value]


def run_scan(body: Body, vals: Sequence[Any], t: Type, length: int, reverse: bool,
             num_consts: int, num_carry: int, xp: Any = np) -> Any:
    """Iteration i calls `body` on the constants, the carries and row i of each scanned
    input, and writes row i of each stacked result (of the scan's type `t`, allocated once
    with `xp`; rebuilt per row where `xp`'s arrays are immutable)."""
    consts, carry, xs = scan_groups(vals, {"num_consts": num_consts, "num_carry": num_carry})
    arrays = Arrays(xp)
    ys = [arrays.empty(e) for e in elements(t)[num_carry:]]
    for step in range(length):
        i = length - 1 - step if reverse else step
        outs = body(*consts, *carry, *(x[i] for x in xs))
        carry = outs[:num_carry]
        ys = [arrays.set_row(y, i, row) for y, row in zip(ys, outs[num_carry:])]
        del outs
    return one_or_tuple([*carry, *ys])


def run_while(cond: Body, body: Body, vals: Sequence[Any]) -> Any:
    """The body on the state for as long as the condition (first result) holds."""
    state = list(vals)
    while bool(cond(*state)[0]):
        state = body(*state)
    return one_or_tuple(state)


def run_conditional(branches: Sequence[Body], arities: Sequence[int], vals: Sequence[Any]) -> Any:
    """Branch `vals[0]` (clamped into range) on its own operands: the operands follow the
    selector, branch after branch, `arities[k]` of them for branch k."""
    selector = int(vals[0])
    pick = selector if 0 <= selector < len(branches) else len(branches) - 1
    start = 1 + sum(arities[:pick])
    return one_or_tuple(branches[pick](*vals[start:start + arities[pick]]))
