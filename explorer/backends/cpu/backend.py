"""The CPU backend: each stage compiles to one generated program (program.py, the CPU target
of backends/program_writer.py) that calls the op table's NumPy references, BLAS through
NumPy's matmul, and the fused kernels generated as numba loop nests (kernel_codegen.py; split
map-reduce bodies: mapreduce.py).

`CpuInterpreter` is the interpreter core with those kernels: it runs what the program
generator leaves to it (a node whose row says `emit=Emit.INTERPRETED`), a whole stage whose
program could not be generated (the run's listing says why), and the dask backend's tasks.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ir.graph import Graph, Node
from ...ir.ops import OPS
from ...options import CompileOptions
from ..executable import Executable
from ..reference import NumpyInterpreter, check_args, measured
from ..registry import Backend, Run, Step, register
from ..result import Kernel
from .kernels import CompiledKernel, compile_kernel
from .mapreduce import body_peak as mapreduce_body_peak
from .mapreduce import compile_body
from .program import NUMBA_ROUTINES, generate_program
from .workspace import cpu_workspace, runs_body


class CpuInterpreter(NumpyInterpreter):
    """The reference interpreter with fused kernels compiled to numba loop nests, the ops the
    generated program runs as numba routines run so here too, and dots through NumPy's matmul
    (BLAS), as the reference does."""

    def __init__(self, graph: Graph, prefix: str = "") -> None:
        super().__init__(graph, prefix)
        self.warm = False
        self.compile_bodies()

    def compile_kernel(self, n: Node, name: str) -> CompiledKernel:
        return compile_kernel(n, name)

    def run_op(self, n: Node, vals: Sequence[Any]) -> Any:
        """The op as the generated program runs it: a numba routine where
        program.NUMBA_ROUTINES has one (small convolutions, gather and scatters, threefry,
        pooling), else its reference."""
        return NUMBA_ROUTINES.get(n.op, OPS[n.op].ref)(*vals, **n.attrs)

    def make_child(self, body: Graph, prefix: str) -> Any:
        """A split body of the map-reduce form runs as one generated kernel
        (cpu_mapreduce.py); any other body on a child interpreter."""
        if body.name.startswith("split_"):
            fused = compile_body(body, prefix.rstrip("/").replace("/", "_") or body.name)
            if fused is not None:
                return fused
        return type(self)(body, prefix)

    def warm_up(self, prepared: Sequence[np.ndarray]) -> None:
        if not self.warm:  # numba compiles on the first call: keep that out of the figures
            self.evaluate(prepared)
            self.warm = True


class CpuProgram(Executable):
    """A stage's executable on the CPU backend (executable.py): its generated program, or
    (when the writer cannot write it) the CpuInterpreter, with the reason in `notes`."""

    peak_how = "tracemalloc"  # the kernels allocate only through NumPy, in their launcher

    def __init__(self, graph: Graph) -> None:
        super().__init__(graph, lambda g: generate_program(g, CpuInterpreter), CpuInterpreter)

    def prepare(self, args: Sequence[Any]) -> list[np.ndarray]:
        return check_args(self.graph, args)

    def run_program(self, prepared: Sequence[np.ndarray]) -> list[np.ndarray]:
        with np.errstate(all="ignore"):
            return self.program.fn(*prepared)  # type: ignore[union-attr]

    call = Executable.execute  # gx.compile's call: its arguments have the traced shapes and types

    def measure(self, prepared: Sequence[np.ndarray]) -> Run:
        kernels = self.all_kernels()
        for k in kernels:
            k.seconds = 0.0
        steps: list[Step] = []
        with np.errstate(all="ignore"):
            outs, seconds, peak = measured(self.graph, prepared,
                                           lambda hook: self.stepped(prepared, hook), steps)
        listed = tuple(Kernel(k.name, k.source, k.seconds) for k in kernels)
        return Run(outs, seconds, peak, listed, self.peak_how, program=self.source,
                   steps=tuple(steps))


class CpuBackend(Backend):
    name = "cpu"
    peak_how = CpuProgram.peak_how
    temporaries = staticmethod(cpu_workspace)
    runs_body = staticmethod(runs_body)
    loop_body = staticmethod(mapreduce_body_peak)

    def unavailable_reason(self) -> str | None:
        if importlib.util.find_spec("numba") is None:
            return "numba is not installed"
        return None

    def compile(self, graph: Graph, options: CompileOptions) -> CpuProgram:
        return CpuProgram(graph)


register(CpuBackend())
