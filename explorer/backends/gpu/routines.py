"""Ops that are not fused kernels, as generated CUDA (and cuBLAS where a product is the bulk
of the work), their layout worked out when the program is made: convolutions (conv.py),
window reductions and the pooling gradients (window.py), gathers and scatters (indexing.py),
pads and concatenations (shape_ops.py).

Each of those modules gives, per op, a `Routine` (the CUDA module's source, the listing's
words for the method, and how a call runs it) or a reason string where the op's shapes or
types have no CUDA form here (the program then runs the op's reference on device arrays and
its listing says why); routine_table.py says which module lays out which op.

A routine's kernels take literal shapes and C-contiguous arrays only; a call launches them
through `call(kernel name, grid, arguments)`: CuPy's RawModule on a GPU (`cupy_launcher`),
tests/backends/cuda_host.py's host build where there is no GPU. Every kernel is a grid-stride
loop, so any block size computes the same result.

This module only writes text and Python glue (no CuPy needed at import).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...ir import dtypes
from ...ir.graph import TensorType, Type
from .cuda_dialect import PREAMBLE, RAW_MODULE_OPTIONS

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

    def bind(self, xp: Any, launcher: Launcher, name: str = "") -> BoundRoutine:
        """The routine as a function of its inputs, the module built on first use."""
        return BoundRoutine(self, name or self.op.replace("-", "_"), xp, launcher)


class BoundRoutine:
    """A routine as the program calls it, and as the kernels tab lists it (name, source,
    the seconds its calls took while `timed`, each call then waiting for the device)."""

    reason = ""  # (it runs as generated code)
    in_place: frozenset[int] = frozenset()  # (never writes over an input)

    def __init__(self, routine: Routine, name: str, xp: Any, launcher: Launcher) -> None:
        self.routine, self.name, self.xp, self.launcher = routine, name, xp, launcher
        self.how = routine.how
        self.call: Call | None = None
        self.seconds, self.timed = 0.0, False

    @property
    def source(self) -> str:
        return f"// {self.routine.op}: {self.how}\n{self.routine.source}"

    def __call__(self, *ins: Any) -> Any:
        t0 = time.perf_counter()
        if self.call is None:
            self.call = self.launcher(self.routine.source)
        out = self.routine.run([self.xp.ascontiguousarray(v) for v in ins], self.xp, self.call)
        if self.timed:
            stream = getattr(getattr(self.xp, "cuda", None), "get_current_stream", None)
            if stream is not None:
                stream().synchronize()
            self.seconds += time.perf_counter() - t0
        return out


def cupy_launcher(cp: Any) -> Launcher:
    """The launcher of CuPy's RawModule (each module built once per source)."""
    modules: dict[str, Any] = {}

    def launcher(source: str) -> Call:
        if source not in modules:
            modules[source] = cp.RawModule(code=source, options=RAW_MODULE_OPTIONS)
        module, functions = modules[source], {}

        def call(name: str, grid: tuple[int, ...], args: list[Any]) -> None:
            if name not in functions:
                functions[name] = module.get_function(name)
            functions[name](grid, (THREADS,), tuple(args))

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
