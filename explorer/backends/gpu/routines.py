"""Ops that are not fused kernels, as generated CUDA (and cuBLAS where a product is the bulk
of the work), their layout worked out when the program is made: convolutions (conv.py),
window reductions and the pooling gradients (window.py), gathers and scatters (indexing.py),
pads and concatenations (shape_ops.py).

`prepare(op, input types, result type, attrs)` gives a `Routine` (the CUDA module's source,
the listing's words for the method, and how a call runs it), a reason string where the op is
one of these but its shapes or types have no CUDA form here (the program then runs the op's
reference on device arrays and its listing says why), or None for every other op.

A routine's kernels take literal shapes and C-contiguous arrays only; a call launches them
through `call(kernel name, grid, arguments)`: CuPy's RawModule on a GPU (`cupy_launcher`),
tests/backends/cuda_host.py's host build where there is no GPU. Every kernel is a grid-stride
loop, so any block size computes the same result.

This module only writes text and Python glue (no CuPy needed at import).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...ir import dtypes
from ...ir.graph import Attrs, TensorType, Type
from .cuda_dialect import PREAMBLE

THREADS = 256  # threads per block on the device
MAX_BLOCKS = 4096  # blocks of a grid-stride launch (an H200 holds about 1,100 at once)

# call(kernel name, grid, arguments): one launch of THREADS-thread blocks
Call = Callable[[str, tuple[int, ...], list[Any]], None]
# launcher(module source) -> the module's `call`
Launcher = Callable[[str], Call]


@dataclass(frozen=True)
class Routine:
    """One op's generated CUDA: `source` (a module of `extern "C"` kernels), `how` (the
    listing's words: the method), and `run(inputs, xp, call)`, which allocates the result
    with array module `xp` and launches the kernels (and cuBLAS through `xp.matmul`)."""

    op: str
    how: str
    source: str
    run: Callable[[Sequence[Any], Any, Call], Any]

    def bind(self, xp: Any, launcher: Launcher) -> Callable[..., Any]:
        """The routine as a function of its inputs, the module built on first use."""
        built: list[Call] = []

        def routine(*ins: Any) -> Any:
            if not built:
                built.append(launcher(self.source))
            return self.run([xp.ascontiguousarray(v) for v in ins], xp, built[0])

        routine.__name__ = self.op.replace("-", "_")
        routine.source = self.source  # type: ignore[attr-defined]
        routine.how = self.how  # type: ignore[attr-defined]
        return routine


def cupy_launcher(cp: Any) -> Launcher:
    """The launcher of CuPy's RawModule (each module built once per source)."""
    modules: dict[str, Any] = {}

    def launcher(source: str) -> Call:
        if source not in modules:
            modules[source] = cp.RawModule(code=source, options=("--std=c++14", "--fmad=false"))
        module = modules[source]

        def call(name: str, grid: tuple[int, ...], args: list[Any]) -> None:
            module.get_function(name)(grid, (THREADS,), tuple(args))

        return call

    return launcher


def blocks(n: int) -> tuple[int]:
    """The grid of a grid-stride loop over `n` elements."""
    return (max(1, min(math.ceil(n / THREADS), MAX_BLOCKS)),)


def loop(n: int) -> str:
    """The head of a grid-stride loop of `t` over `n` elements."""
    return (f"  for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < {n}L; "
            f"t += (long)gridDim.x * blockDim.x) {{")


def unflatten(flat: str, shape: Sequence[int], prefix: str) -> list[str]:
    """`const long <prefix><d> = ...;` for each dimension of `shape`, from the C-order flat
    index `flat`."""
    lines = []
    for d, size in enumerate(shape):
        after = math.prod(shape[d + 1:])
        expr = flat if after == 1 else f"({flat} / {after}L)"
        if d:
            expr = f"{expr} % {size}L"
        lines.append(f"const long {prefix}{d} = {expr};")
    return lines


def flat(index: Sequence[str], shape: Sequence[int]) -> str:
    """The C-order flat offset of `index` (expressions) in an array of `shape`."""
    terms = []
    for d, v in enumerate(index):
        stride = math.prod(shape[d + 1:])
        if shape[d] != 1 and v != "0":
            terms.append(v if stride == 1 else f"({v}) * {stride}L")
    return " + ".join(terms) or "0"


def module(*kernels: str, helpers: str = "") -> str:
    """A module's source: the device helpers, then the kernels."""
    return PREAMBLE + helpers + "\n".join(kernels)


def tensor_types(types: Sequence[Type]) -> list[TensorType] | None:
    return list(types) if all(isinstance(t, TensorType) for t in types) else None  # type: ignore[arg-type]


def c_takes(*ds: str) -> str | None:
    """Why element types `ds` have no CUDA form here, or None."""
    bad = sorted({d for d in ds if d not in dtypes.C_TYPES})
    return f"element type {', '.join(bad)} has no CUDA form here" if bad else None


def prepare(op: str, ins: Sequence[Type], out: Type, attrs: Attrs) -> Routine | str | None:
    """The generated CUDA of `op` for these types, a reason it has none here, or None when
    `op` is not one that this module lays out."""
    from . import conv, indexing, shape_ops, window

    for table in (conv.PREPARERS, window.PREPARERS, indexing.PREPARERS, shape_ops.PREPARERS):
        if op in table:
            types = tensor_types([*ins, out])
            if types is None:
                return f"{op} of tuple values"
            return table[op](op, types[:-1], types[-1], attrs)
    return None
