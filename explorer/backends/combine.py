"""How a split `loop`'s chunk results combine into its results, written once against an
array namespace (NumPy, CuPy or jax.numpy), for every backend.

A loop's `combine` specs (see the `loop` row of the op table) say, per result: `concat` (the
chunk's rows land at their place), a monoid name from `ir.traits.MONOIDS` (sum, product, max,
min, and, or, logsumexp: folded with the monoid's array function), `top_k` (the running top k
merged with the chunk's), or `index` (argmax/argmin/top_k positions that follow the value
result they index, offset by the chunk's start).

`Combiner(xp, specs, types)` holds the running results; `add(start, outs)` folds one
iteration's body outputs in; `results()` gives the loop's results. On a namespace with
mutable arrays it allocates the results once and updates them in place, so a loop's live
memory is its results plus one iteration's temporaries (as the memory planner assumes); on
jax.numpy (immutable, traced) the same code builds new values instead. It never writes into
the arrays it is given.

`merge(xp, specs, types, parts)` is the same Combiner applied to partial results of
consecutive ranges of the loop (Interpreter.loop_range): the step of a tree reduction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir import dtypes
from ..ir.graph import TensorType
from ..ir.ops import top_k_key
from ..ir.traits import MONOIDS


def chunk_index(axis: int, start: int, stop: int) -> tuple[slice, ...]:
    return (slice(None),) * axis + (slice(start, stop),)


def chunk_of(x: Any, axis: int, start: int, stop: int) -> Any:
    """The view of `x` that one iteration sees."""
    return x[chunk_index(axis, start, stop)]


def is_jax(xp: Any) -> bool:
    return getattr(xp, "__name__", "").startswith("jax")


class Arrays:
    """The few array updates a combiner needs, in place where the namespace allows it."""

    def __init__(self, xp: Any) -> None:
        self.xp = xp
        self.mutable = not is_jax(xp)

    def fold(self, fn_name: str, acc: Any, new: Any) -> Any:
        fn = getattr(self.xp, fn_name)
        return fn(acc, new, out=acc) if self.mutable else fn(acc, new)

    def put(self, acc: Any, axis: int, start: int, value: Any) -> Any:
        index = chunk_index(axis, start, start + value.shape[axis])
        if self.mutable:
            acc[index] = value
            return acc
        return acc.at[index].set(value)

    def set_row(self, acc: Any, i: int, row: Any) -> Any:
        """`acc` with row `i` (of its first axis) set to `row`."""
        if self.mutable:
            acc[i] = row
            return acc
        return acc.at[i].set(row)

    def where(self, win: Any, new: Any, old: Any) -> Any:
        if self.mutable:
            self.xp.copyto(old, new, where=win)
            return old
        return self.xp.where(win, new, old)

    def copy(self, x: Any) -> Any:
        return self.xp.array(x, copy=True) if self.mutable else x

    def empty(self, t: TensorType) -> Any:
        return self.xp.empty(t.shape, dtypes.to_numpy(t.dtype))


def better(xp: Any, new: Any, old: Any, kind: str) -> Any:
    """Where the chunk's value wins an argmax/argmin merge: strictly better, or NaN over a
    number (argmax/argmin return the first NaN); ties keep the running entry."""
    win = xp.greater(new, old) if kind == "max" else xp.less(new, old)
    if np.issubdtype(new.dtype, np.inexact):
        win = win | (xp.isnan(new) & ~xp.isnan(old))
    return win


def merge_top_k(xp: Any, values: Any, indices: Any | None, new_values: Any,
                new_indices: Any | None, axis: int) -> tuple[Any, Any | None]:
    """The top k (k = values' size along `axis`) of running and chunk entries together; the
    running entries come first, so a stable sort keeps lower indices first among ties."""
    k = values.shape[axis]
    both = xp.concatenate([values, new_values], axis=axis)
    if is_jax(xp):  # (traced: no float64 without x64 mode) lax.top_k's own order
        import jax

        _, order = jax.lax.top_k(xp.moveaxis(both, axis, -1), both.shape[axis])
        order = xp.moveaxis(order, -1, axis)
    else:
        key = top_k_key(xp, both)  # as the top_k reference orders them
        order = xp.argsort(key, axis=axis, kind="stable")
        del key
    order = chunk_of(order, axis, 0, k)
    merged = xp.take_along_axis(both, order, axis)
    del both
    if indices is None or new_indices is None:
        return merged, None
    all_idx = xp.concatenate([indices, new_indices], axis=axis)
    return merged, xp.take_along_axis(all_idx, order, axis)


class Combiner:
    """The running results of one loop; see the module docstring."""

    def __init__(self, xp: Any, specs: Sequence[tuple], types: Sequence[TensorType]) -> None:
        self.xp, self.arrays = xp, Arrays(xp)
        self.specs = [tuple(s) for s in specs]
        self.types = list(types)
        self.acc: list[Any] = [self.arrays.empty(t) if s[0] == "concat" else None
                               for s, t in zip(self.specs, self.types)]
        # value output j -> the index outputs that follow it
        self.followers: dict[int, list[int]] = {}
        for k, spec in enumerate(self.specs):
            if spec[0] == "index":
                self.followers.setdefault(spec[1], []).append(k)

    def add(self, start: int, outs: Sequence[Any]) -> None:
        xp, arrays, acc = self.xp, self.arrays, self.acc
        outs = list(outs)
        for k, spec in enumerate(self.specs):  # index outputs count from the chunk's start
            if spec[0] == "index":
                outs[k] = xp.add(outs[k], xp.asarray(start, dtype=outs[k].dtype))
        for k, spec in enumerate(self.specs):
            kind = spec[0]
            if kind == "concat":
                acc[k] = arrays.put(acc[k], spec[1], start, outs[k])
            elif kind == "index":
                continue  # merged with the value output it follows
            elif acc[k] is None:
                acc[k] = arrays.copy(outs[k])
                for f in self.followers.get(k, ()):
                    acc[f] = arrays.copy(outs[f])
            elif kind == "top_k":
                follower = self.followers.get(k, [None])[0]
                old_i = None if follower is None else acc[follower]
                new_i = None if follower is None else outs[follower]
                acc[k], merged_i = merge_top_k(xp, acc[k], old_i, outs[k], new_i, spec[1])
                if follower is not None:
                    acc[follower] = merged_i
            else:
                if self.followers.get(k):
                    win = better(xp, outs[k], acc[k], kind)
                    for f in self.followers[k]:
                        acc[f] = arrays.where(win, outs[f], acc[f])
                    del win
                acc[k] = arrays.fold(MONOIDS[kind].array_fn, acc[k], outs[k])

    def results(self) -> list[Any]:
        assert all(a is not None for a in self.acc), "a loop ran no iteration"
        return list(self.acc)


def span_types(types: Sequence[TensorType], specs: Sequence[tuple], rows: int) -> list[TensorType]:
    """The loop's result types over `rows` positions: concat results hold only those rows."""
    out = []
    for spec, t in zip(specs, types):
        if spec[0] == "concat":
            t = TensorType(tuple(rows if i == spec[1] else d for i, d in enumerate(t.shape)),
                           t.dtype)
        out.append(t)
    return out


def merge(xp: Any, specs: Sequence[tuple], types: Sequence[TensorType],
          parts: Sequence[tuple[int, int, Sequence[Any]]]) -> list[Any]:
    """Partial results of consecutive ranges [lo, hi) of a loop, in order, each in the frame of
    its own lo (as Interpreter.loop_range gives them) -> the results over their union, in the
    frame of the first lo. `types` are the loop's result types."""
    lo, hi = parts[0][0], parts[-1][1]
    for (_, end, _), (start, _, _) in zip(parts, parts[1:]):
        if end != start:
            raise ValueError(f"merge: ranges are not consecutive ({end} then {start})")
    combiner = Combiner(xp, specs, span_types(types, specs, hi - lo))
    for start, _, outs in parts:
        combiner.add(start - lo, outs)
    return combiner.results()
