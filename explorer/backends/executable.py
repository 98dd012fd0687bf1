"""What a generated CPU program (program.py) calls besides the op table's NumPy references and
its kernels: the casts that give each value its node's element type, and the drivers of
control flow, whose bodies are generated functions of the same module.

The drivers follow the interpreter core's semantics (backends/interpreter.py) exactly: a
`scan` writes each iteration's rows into stacked results allocated once, a `while` runs its
condition function before each body call, a `conditional` clamps its selector into range.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.control_ops import scan_groups
from ...ir.graph import TensorType, TupleType, Type

Body = Callable[..., list[Any]]


def caster(dtype: str, xp: Any = np) -> Callable[[Any], np.ndarray]:
    """`as_f32(x)`: x as an ndarray of array module `xp` (NumPy; CuPy in GPU programs) and
    that element type; free when it already is one (a NumPy scalar from a 0-d op, or a
    Python number, becomes a 0-d array)."""
    want, array = dtypes.to_numpy(dtype), xp.ndarray

    def cast(x: Any) -> np.ndarray:
        if type(x) is array and x.dtype == want:
            return x
        return xp.asarray(x, dtype=want)

    cast.__name__ = f"as_{dtype}"
    return cast


def tuple_caster(casts: Sequence[Callable[[Any], np.ndarray]]) -> Callable[[Any], tuple]:
    """The cast of a tuple-typed value: each element by its own type."""

    def cast(xs: Any) -> tuple:
        return tuple(c(x) for c, x in zip(casts, xs, strict=True))

    return cast


def one_or_tuple(outs: Sequence[Any]) -> Any:
    return outs[0] if len(outs) == 1 else tuple(outs)


def _elements(t: Type) -> tuple[TensorType, ...]:
    return t.elements if isinstance(t, TupleType) else (t,)  # type: ignore[return-value]


def run_scan(body: Body, vals: Sequence[Any], t: Type, length: int, reverse: bool,
             num_consts: int, num_carry: int, empty: Callable[..., Any] = np.empty) -> Any:
    """Iteration i calls `body` on the constants, the carries and row i of each scanned
    input, and writes row i of each stacked result (allocated by `empty`: CuPy's in GPU
    programs)."""
    consts, carry, xs = scan_groups(vals, {"num_consts": num_consts, "num_carry": num_carry})
    ys = [empty(e.shape, dtypes.to_numpy(e.dtype)) for e in _elements(t)[num_carry:]]
    for step in range(length):
        i = length - 1 - step if reverse else step
        outs = body(*consts, *carry, *(x[i] for x in xs))
        carry = outs[:num_carry]
        for y, row in zip(ys, outs[num_carry:]):
            y[i] = row
        del outs
    return one_or_tuple([*carry, *ys])


def run_while(cond: Body, body: Body, vals: Sequence[Any]) -> Any:
    state = list(vals)
    while bool(cond(*state)[0]):
        state = body(*state)
    return one_or_tuple(state)


def run_conditional(branches: Sequence[Body], arities: Sequence[int], vals: Sequence[Any]) -> Any:
    selector = int(vals[0])
    pick = selector if 0 <= selector < len(branches) else len(branches) - 1
    start = 1 + sum(arities[:pick])
    return one_or_tuple(branches[pick](*vals[start:start + arities[pick]]))
