"""What an op *is*, as the op table declares it and every planner, fuser, codegen, memory
model and importer reads it: its kind, whether it is a view, the monoid of a reduction, what
the split and fuse passes may do with it.

These are plain data; the op table (ir/ops/) fills them in, row by row. Nothing outside `explorer/ir`
should list ops by name to learn one of these facts: it asks the row.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from . import dtypes


class OpKind(str, Enum):
    """The broad class of an op (a str, so `row.kind == "elementwise"` reads naturally)."""

    ELEMENTWISE = "elementwise"  # one element of the result from the same element of each input
    REDUCE = "reduce"  # folds axes away (a monoid, or argmax/argmin)
    SHAPE = "shape"  # moves or re-indexes elements, computes nothing
    DOT = "dot"  # dot_general
    SOURCE = "source"  # parameter, constant, iota: no inputs
    REGION = "region"  # carries graph bodies (kernel, loop, call, while, conditional, shard_map)
    # combines the values of a mesh's devices (psum, all_gather, ...): only inside a shard_map
    # body, where the devices the interpreter runs meet; a barrier to every pass
    COLLECTIVE = "collective"
    OTHER = "other"  # sort, top_k, cumulative ops, opaque


class View(str, Enum):
    """Whether an op's result aliases its input's buffer (as NumPy views do)."""

    NONE = "none"  # allocates its result
    STRIDED = "strided"  # always a view, possibly non-contiguous (broadcast, transpose, slice)
    RESHAPE = "reshape"  # a view of a contiguous input, a copy of a strided one


@dataclass(frozen=True)
class Monoid:
    """An associative combine with an identity: how a reduction's partial results merge.

    `name` is the combine's name in a `loop`'s combine specs; `array_fn` the function of that
    name in an array namespace (NumPy, CuPy, jax.numpy); `identity` one of "zero", "one",
    "lowest", "highest", "true", "false"; `hlo` the opcode of XLA's reducer computation."""

    name: str
    array_fn: str
    identity: str
    hlo: str | None

    def identity_value(self, dtype: str) -> Any:
        """The identity as a Python value for element type `dtype` (lowest/highest are -inf/inf
        for floats, the type's range ends for integers, False/True for pred)."""
        if self.identity in ("lowest", "highest"):
            low = self.identity == "lowest"
            if dtypes.is_bool(dtype):
                return not low
            if dtypes.is_int(dtype):
                info = dtypes.iinfo(dtype)  # (the 4-bit ones too)
                return int(info.min if low else info.max)
            return -np.inf if low else np.inf
        if self.identity == "true" and dtypes.is_int(dtype):  # all bits set
            return -1 if dtype.startswith("i") else int(dtypes.iinfo(dtype).max)
        return {"zero": 0, "one": 1, "true": True, "false": False}[self.identity]


MONOIDS: dict[str, Monoid] = {m.name: m for m in (
    Monoid("add", "add", "zero", "add"),
    Monoid("mul", "multiply", "one", "multiply"),
    Monoid("max", "maximum", "lowest", "maximum"),
    Monoid("min", "minimum", "highest", "minimum"),
    Monoid("and", "bitwise_and", "true", "and"),  # (bitwise: pred, and integers' bits)
    Monoid("or", "bitwise_or", "false", "or"),
    # log(exp(a) + exp(b)), stable: how chunked logsumexp results merge (no HLO reducer)
    Monoid("logsumexp", "logaddexp", "lowest", None),
)}


class Split(str, Enum):
    """What the split planner may do with an op when one of its operands is split."""

    NONE = "none"  # a barrier: the region stops here
    MAP = "map"  # chunks map to chunks (elementwise, and shape ops with per-op axis rules)
    ACCUMULATE = "accumulate"  # reduces the split axis away: chunk results fold with a monoid
    ARG = "arg"  # argmax/argmin across the split axis: value and index merge
    TOP_K = "top_k"  # top_k across the split axis: running top k merge


class Emit(str, Enum):
    """How the CPU backend's program generator (backends/cpu/program.py) writes an op."""

    CALL = "call"  # a call of the row's NumPy reference (a view, a BLAS dot, a NumPy ufunc)
    REGION = "region"  # written out: its bodies become functions of the same program
    INTERPRETED = "interpreted"  # the one node runs on the interpreter core (a visible choice)


class FusionRole(str, Enum):
    """What the fuse pass (passes/fuse.py) may do with an op: its role in a fused kernel."""

    NONE = "none"  # never inside a generated kernel
    POINTWISE = "pointwise"  # a member of a kernel's iteration space
    REDUCTION = "reduction"  # the (one) reduction of a kernel
