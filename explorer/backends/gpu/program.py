"""The GPU backend's program: a stage as one generated Python module, as on the CPU backend.

The program writer (backends/program_writer.py) walks the stage in schedule order and writes
one line per node, deleting each value after its last use; this module is the GPU target of
that one walk. Its lines call the generated CUDA kernels (`fused_3([v1, v2])`: CuPy kernels,
grid reductions and row kernels, reduce.py), cuBLAS through `cupy.matmul` for dots, and for
every other op its NumPy reference on device arrays (`ops.X`: NumPy hands CuPy arrays to
CuPy through `__array_function__`; an op CuPy lacks runs on the host and comes back, as in
the interpreter); control flow runs the same drivers with device allocations; split loops
stay with the GPU interpreter (one node each, noted in the module); constants, and values
that depend on no parameter (program_writer.py), go to the
device once, when the program is made. Values stay on the device from the program's first
line to its last: no Python per node but the module's own lines.

Everything here takes the array module (`xp`) and the kernel compiler as arguments, so the
same generator runs on the host with NumPy standing in for CuPy
(tests/backends/gpu/test_program.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir.graph import Graph, Node
from ...ir.ops import OPS
from ..program_writer import Program, ProgramWriter, generate, ident
from . import oom, routine_table, routines

HEADER = '''"""The generated program of @{name} (gambit-explorer's GPU backend): one line per node, in
schedule order, every value on the device; `ops.X` is op X's NumPy reference on device arrays
(on the host where {xp} lacks it), `matmul` is {xp}.matmul (cuBLAS), the kernels are
generated CUDA, `as_T` casts to element type T (free when the value has it), each value is
deleted after its last use.{notes}"""
'''


def to_device(xp: Any, value: Any, dtype: Any = None) -> Any:
    """`value` as an array of module `xp` (of `dtype` when given). A 0-d host value goes as a
    one-element copy: CuPy 14.2's `asarray` of a 0-d array gives +0.0 for -0.0 (seen on an
    H200: `x / c` with c = -0.0 gave +inf where JAX gives -inf), its 1-d copy keeps the bits."""
    if isinstance(value, xp.ndarray) and xp is not np:
        return value if dtype is None else value.astype(dtype, copy=False)
    host = np.asarray(value, dtype)
    if host.dtype.itemsize == 0:  # float0 holds no data (and CuPy has no such type): host
        return host
    if host.ndim == 0:
        return xp.asarray(host.reshape(1)).reshape(())
    return xp.asarray(host)


def device_op(ref: Callable[..., Any], xp: Any) -> Callable[..., Any]:
    """Op reference `ref` on device arrays of module `xp`; where it fails there or leaves
    the device (scipy.special's functions), it runs on host copies and the result comes back
    to the device."""
    host = getattr(xp, "asnumpy", None)

    def run(*vals: Any, **attrs: Any) -> Any:
        try:
            out = ref(*vals, **attrs)
        except (TypeError, ValueError, NotImplementedError):
            out = None
        if isinstance(out, xp.ndarray | tuple):
            return out
        if out is not None and host is None:  # (NumPy itself: a scalar is as good)
            return out
        back = ref(*[host(v) if host and isinstance(v, xp.ndarray) else v for v in vals], **attrs)
        if isinstance(back, tuple):
            return tuple(to_device(xp, b) for b in back)
        return to_device(xp, back)

    run.__name__ = getattr(ref, "__name__", "op")
    return run


class GpuWriter(ProgramWriter):
    """The program writer (program_writer.py) writing for the device: kernels from
    `compile_kernel(node, name)`, arrays of `xp`, scans and whiles through the drivers."""

    fallback_words = "on the host"  # a kernel with no CUDA form runs its host reference

    def __init__(self, make_interpreter: Callable[[Graph], Any], xp: Any,
                 compile_kernel: Callable[[Node, str], Any], reuse: GpuWriter | None = None,
                 launcher: routines.Launcher | None = None) -> None:
        super().__init__(make_interpreter, xp.matmul, reuse, xp)
        self.compile_kernel = compile_kernel  # type: ignore[method-assign]
        self.launcher = launcher  # builds the routines' CUDA modules (routines.py)
        if reuse is None:
            self.ns["xp"] = xp

    def op_function(self, name: str) -> Callable[..., Any]:
        return device_op(OPS[name].ref, self.xp)

    def constant(self, value: np.ndarray) -> Any:
        """A value computed ahead goes to the device once, when the program is made."""
        return to_device(self.xp, value)

    def laid_out_ahead(self, g: Graph, n: Node, target: str, ins: list[str],
                       prefix: str) -> str | None:
        """Convolutions, pooling, gathers, scatters, pads and concatenations as generated
        CUDA (routine_table.py); one that has no CUDA form here keeps its reference line,
        and a note says why."""
        if self.launcher is None:
            return None
        r = routine_table.prepare(n.op, [g[i].type for i in n.inputs], n.type, n.attrs)
        if isinstance(r, str):
            where = f" at {n.source.file}:{n.source.line}" if n.source else ""
            self.notes.append(f"reference on device arrays: {n.op} %{n.id}{where} ({r})")
        if not isinstance(r, routines.Routine):
            return None
        name = ident(f"{n.op}_{prefix}{n.id}")
        # (listed with the kernels, in program order; the measured twin takes the first walk's)
        bound = (next(self.reuse_kernels) if self.reuse_kernels is not None
                 else r.bind(self.xp, self.launcher, name))
        self.kernels.append(bound)
        fn = self.bind(name, bound)
        return f"{target} = {self.cast(n.type)}({fn}({', '.join(ins)}))  # {r.how}"

    def header(self, graph: Graph) -> str:
        return HEADER.format(name=graph.name, xp=self.xp.__name__,
                             notes="".join(f"\n{x}." for x in self.notes))


def generate_program(graph: Graph, xp: Any, compile_kernel: Callable[[Node, str], Any],
                     make_interpreter: Callable[[Graph], Any],
                     launcher: routines.Launcher | None = None) -> Program:
    """The GPU program of `graph` over arrays of `xp` (ProgramError when it cannot be
    written); `launcher` builds routines.py's CUDA modules (CuPy's RawModule by default
    where `xp` is CuPy; none, so the references run, on NumPy unless given)."""
    if launcher is None and xp is not np:
        launcher = routines.cupy_launcher(xp)
    program = generate(graph, lambda reuse: GpuWriter(make_interpreter, xp, compile_kernel,  # type: ignore[arg-type]
                                                      reuse, launcher))
    # an out-of-memory error on the device names the node that asked (oom.py)
    program.fn = oom.guard(program.fn, program.source, xp)
    program.measured = oom.guard_measured(program.measured, graph, xp)
    return program
