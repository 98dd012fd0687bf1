"""How a `loop` node's chunk results combine into its results (see the `loop` row in
explorer/ir/ops.py): NumPy code shared by every backend that runs loops on the host.

A `Combiner` holds the running results; `add(start, outs)` folds in one iteration's body
outputs (start = the chunk's first position along the split dimension), `results()` gives the
loop's results. It allocates the results once and updates them in place, so that a loop's
live memory is its results plus one iteration's temporaries (as analysis/memory.py plans).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ir import dtypes
from ..ir.graph import TensorType

_ACCUMULATE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
               "and": np.logical_and, "or": np.logical_or}


def chunk_of(x: np.ndarray, axis: int, start: int, stop: int) -> np.ndarray:
    """The view of `x` that one iteration sees."""
    return x[(slice(None),) * axis + (slice(start, stop),)]


def _better(new: np.ndarray, old: np.ndarray, kind: str) -> np.ndarray:
    """Where the chunk's value wins an argmax/argmin merge: strictly better, or NaN over a
    number (NumPy's argmax/argmin return the first NaN); ties keep the running entry."""
    win = np.greater(new, old) if kind == "max" else np.less(new, old)
    if np.issubdtype(new.dtype, np.inexact):
        win |= np.isnan(new) & ~np.isnan(old)
    return win


def merge_top_k(values: np.ndarray, indices: np.ndarray | None, new_values: np.ndarray,
                new_indices: np.ndarray | None, axis: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The top k (k = values' size along `axis`) of running and chunk entries together; the
    running entries come first, so a stable sort keeps lower indices first among ties."""
    k = values.shape[axis]
    both = np.concatenate([values, new_values], axis=axis)
    key = np.negative(both, dtype=np.float64)  # as the top_k reference orders them
    order = np.argsort(key, axis=axis, kind="stable")
    del key
    order = chunk_of(order, axis, 0, k)
    merged = np.take_along_axis(both, order, axis)
    del both
    if indices is None or new_indices is None:
        return merged, None
    all_idx = np.concatenate([indices, new_indices], axis=axis)
    return merged, np.take_along_axis(all_idx, order, axis)


class Combiner:
    """The running results of one loop; see the module docstring."""

    def __init__(self, specs: Sequence[tuple], types: Sequence[TensorType]) -> None:
        self.specs = [tuple(s) for s in specs]
        self.types = list(types)
        self.acc: list[np.ndarray | None] = [None] * len(self.specs)
        for k, (spec, t) in enumerate(zip(self.specs, self.types)):
            if spec[0] == "concat":
                self.acc[k] = np.empty(t.shape, dtypes.to_numpy(t.dtype))
        # value output j -> the index outputs that follow it
        self.followers: dict[int, list[int]] = {}
        for k, spec in enumerate(self.specs):
            if spec[0] == "index":
                self.followers.setdefault(spec[1], []).append(k)

    def add(self, start: int, outs: Sequence[np.ndarray]) -> None:
        outs = list(outs)
        for k, spec in enumerate(self.specs):  # index outputs count from the chunk's start
            if spec[0] == "index":
                outs[k] = np.add(outs[k], outs[k].dtype.type(start))
        for k, spec in enumerate(self.specs):
            kind = spec[0]
            if kind == "concat":
                rows = outs[k].shape[spec[1]]
                chunk_of(self.acc[k], spec[1], start, start + rows)[...] = outs[k]
            elif kind == "index":
                continue  # merged with the value output it follows
            elif self.acc[k] is None:
                self.acc[k] = np.array(outs[k], copy=True)
                for f in self.followers.get(k, ()):
                    self.acc[f] = np.array(outs[f], copy=True)
            elif kind == "top_k":
                follower = self.followers.get(k, [None])[0]
                old_i = None if follower is None else self.acc[follower]
                new_i = None if follower is None else outs[follower]
                self.acc[k], merged_i = merge_top_k(self.acc[k], old_i, outs[k], new_i, spec[1])
                if follower is not None:
                    self.acc[follower] = merged_i
            else:
                acc = self.acc[k]
                assert acc is not None
                if self.followers.get(k):
                    win = _better(outs[k], acc, kind)
                    for f in self.followers[k]:
                        np.copyto(self.acc[f], outs[f], where=win)
                    del win
                _ACCUMULATE[kind](acc, outs[k], out=acc)

    def results(self) -> list[np.ndarray]:
        assert all(a is not None for a in self.acc), "a loop ran no iteration"
        return self.acc  # type: ignore[return-value]
