"""The op table itself: `OpDef` (one row), `OPS` (every row, by name), `register`, and the
shared helpers the family modules declare their rows with.

A row declares an op's name, arity, attributes, shape/dtype rule, NumPy reference, FLOP count
and JAX lowering, and what the op *is* (ir/traits.py): its kind, whether it is a view, the
monoid it folds with, what the split and fuse passes may do with it, and the HLO opcodes that
import as it. Planners, passes, code generators and importers read these rows rather than
listing ops by name. (How a code generator spells an elementwise op is the generator's own:
backends/cpu/numba_forms.py, backends/gpu/cuda_forms.py.)

The helpers, for the family modules:

    register            add one OpDef row to OPS
    tensor_type         an operand's type as a TensorType, or OpError if it is a tuple
    check_axes          an `axes`-like attribute, checked against a rank
    per_element_flops   the FLOP rule "k per result element"
    no_flops            the FLOP rule of rows that only move data: 0
    lax_fn              a row's JAX lowering that calls jax.lax's function of a name
    sample_array        a random input array for a row's `sample` (the op tests)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes
from ..graph import Attrs, TensorType, Type
from ..traits import Emit, FusionRole, Monoid, OpKind, Split, View

Ref = Callable[..., Any]
Infer = Callable[[Sequence[TensorType], Attrs], Type]
Flops = Callable[[Sequence[TensorType], Type, Attrs], int]
SplitAxes = Callable[[Sequence[TensorType], Type, Attrs], dict[int, tuple[int | None, ...]]]


class OpError(TypeError):
    """An op applied to inputs or attributes it does not accept."""


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: OpKind
    arity: int | None  # None: variadic
    attrs: tuple[str, ...]
    infer: Infer
    ref: Ref
    flops: Flops
    jax: Callable[..., Any] | None = None  # (*inputs, **attrs) -> jax value(s)
    sample: Callable[[np.random.Generator], tuple[list[np.ndarray], dict]] | None = None
    # Whether the result aliases the input's buffer (as the NumPy reference's result does).
    view: View = View.NONE
    # How partial results over a reduced axis merge: a reduction's fold, dot_general's
    # contraction (add), argmax/argmin's values (max/min; their indices follow).
    monoid: Monoid | None = None
    split: Split = Split.NONE  # what the split planner may do with it
    # For a MAP op whose axis rule the row states itself (gather, conv, windows): (input
    # types, result type, attrs) -> {result axis: per-operand axis (None: passed whole)}.
    split_axes: SplitAxes | None = None
    fuse: FusionRole = FusionRole.NONE  # what the fuse pass may do with it
    emit: Emit = Emit.CALL  # how the CPU program generator writes it
    # Its NumPy form as program text, where it beats calling `ref` (shapes are known when the
    # program is written, so a dot becomes the one matmul its ref would reach; `matmul` is
    # np.matmul, or a backend's function of the same semantics bound under that name):
    # (operand expressions, input types, result type, attrs) -> expression, or None where the
    # form declines (the program calls `ref` then). None: call `ref`.
    program: Callable[[list[str], Sequence[Type], Type, Attrs], str | None] | None = None
    # The HLO opcodes (with the attributes they imply) that import as this op, elementwise.
    hlo: tuple[tuple[str, dict[str, Any]], ...] = ()
    optional: tuple[str, ...] = ()  # attributes it lists that may be absent (lax's defaults)
    # A collective's reference over a mesh (ops/sharding.py): (one value per device, the
    # MeshSpec, attrs) -> one result per device.
    spmd: Callable[..., list[Any]] | None = None
    # A barrier to every pass: no pass folds, fuses, splits or moves values across it (a
    # collective, a sharding constraint, a shard_map: what they say is about devices).
    barrier: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", OpKind(self.kind))

    def check_arity(self, n: int) -> None:
        if self.arity is not None and n != self.arity:
            raise OpError(f"{self.name} takes {self.arity} inputs, got {n}")


OPS: dict[str, OpDef] = {}

# Ops whose operands may be tuples (infer_type checks that all other ops read tensors).
TUPLE_OPERANDS = frozenset({"get_tuple_element", "opaque", "tuple", "call", "while", "conditional"})


def register(op: OpDef) -> None:
    """Add `op` to OPS; a family module calls it once per row, at import. A name may be
    registered once."""
    assert op.name not in OPS, op.name
    OPS[op.name] = op


def get(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise OpError(f"unknown op {name!r}") from None


def infer_type(op: str, input_types: Sequence[Type], attrs: Attrs) -> Type:
    """The result type of `op` on inputs of these types; raises OpError naming the problem."""
    d = get(op)
    d.check_arity(len(input_types))
    missing = [k for k in d.attrs if k not in attrs and k not in d.optional]
    if missing:
        raise OpError(f"{op}: missing attribute(s) {', '.join(missing)}")
    if op not in TUPLE_OPERANDS:
        for t in input_types:
            tensor_type(t, f"{op} operand")
    return d.infer(input_types, attrs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- shape/dtype rule helpers


def tensor_type(t: Type, what: str) -> TensorType:
    """`t` if it is a tensor, else OpError saying `what` must be one: shape rules call it on
    operands (or region outputs) that could be tuples."""
    if not isinstance(t, TensorType):
        raise OpError(f"{what} must be a tensor, got tuple {t}")
    return t


def check_axes(attrs: Attrs, rank: int, key: str = "axes") -> tuple[int, ...]:
    """Attribute `key` (a tuple of axes) of a row, each in range for `rank` and none twice."""
    axes = tuple(attrs[key])
    for a in axes:
        if not 0 <= a < rank:
            raise OpError(f"{key} {axes} out of range for rank {rank}")
    if len(set(axes)) != len(axes):
        raise OpError(f"{key} {axes} repeats an axis")
    return axes


# ---------------------------------------------------------------- cost helpers


def per_element_flops(k: int) -> Flops:
    """The FLOP rule of a row that costs `k` per element of its result."""

    def flops(ins: Sequence[TensorType], out: Type, attrs: Attrs) -> int:
        return k * out.size  # type: ignore[union-attr]

    return flops


def no_flops(ins: Sequence[TensorType], out: Type, attrs: Attrs) -> int:
    """The FLOP rule of a row that only moves, selects or relabels data: 0."""
    return 0


# ---------------------------------------------------------------- JAX lowerings


def lax_fn(name: str) -> Callable[..., Any]:
    """A JAX lowering that calls `jax.lax.<name>` (imported when it runs)."""

    def call(*xs: Any, **attrs: Any) -> Any:
        import jax.lax as lax

        return getattr(lax, name)(*xs, **attrs)

    return call


# ---------------------------------------------------------------- samples for the op tests


def sample_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "f32",
                 low: float = -2.0, high: float = 2.0) -> np.ndarray:
    """A random array for a row's `sample` (the op tests' inputs): floats uniform in
    [low, high), integers a little wider (non-negative if unsigned), pred coin flips."""
    npd = dtypes.to_numpy(dtype)
    if dtypes.is_bool(dtype):
        return rng.random(shape) < 0.5
    if dtypes.is_int(dtype):
        lo = 0 if dtype.startswith("u") else int(low) - 3
        return rng.integers(lo, int(high) + 4, size=shape).astype(npd)
    return rng.uniform(low, high, size=shape).astype(npd)
