"""The CPU backend: each stage compiles to one generated program (program.py) that calls the
op table's NumPy references, BLAS through NumPy's matmul, and the fused kernels generated as
numba loop nests (kernel_codegen.py; split map-reduce bodies: mapreduce.py).

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
from ..reference import NumpyInterpreter, check_args, measured
from ..registry import Backend, Run, Step, register
from ..result import Kernel
from .kernels import CompiledKernel, compile_kernel, cpu_workspace, runs_body
from .mapreduce import body_peak as mapreduce_body_peak
from .mapreduce import compile_body
from .program import LOOPS, Program, ProgramError, generate


class CpuInterpreter(NumpyInterpreter):
    """The reference interpreter with fused kernels compiled to numba loop nests, the ops the
    generated program runs as numba loops run so here too, and dots through NumPy's matmul
    (BLAS), as the reference does."""

    def __init__(self, graph: Graph, prefix: str = "") -> None:
        super().__init__(graph, prefix)
        self.warm = False
        self.compile_bodies()

    def compile_kernel(self, n: Node, name: str) -> CompiledKernel:
        return compile_kernel(n, name)

    def run_op(self, n: Node, vals: Sequence[Any]) -> Any:
        """The op as the generated program runs it: numba loops where program.LOOPS has one
        (small convolutions, gather and scatters, threefry, pooling), else its reference."""
        return LOOPS.get(n.op, OPS[n.op].ref)(*vals, **n.attrs)

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


class CpuProgram:
    """A stage's executable on the CPU backend: its generated program, or (when the
    generator cannot write it) the CpuInterpreter, with the reason in `notes`."""

    peak_how = "tracemalloc"  # the kernels allocate only through NumPy, in their launcher

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.warm = False
        self.program: Program | None = None
        self.interpreter: CpuInterpreter | None = None
        try:
            self.program = generate(graph, CpuInterpreter)
            self.notes = list(self.program.notes)
        except ProgramError as e:
            self.interpreter = CpuInterpreter(graph)
            self.notes = [f"interpreted: the whole stage ({e})"]

    @property
    def source(self) -> str:
        """The generated program's source (the interpreter's note when there is none)."""
        if self.program is not None:
            return self.program.source
        return f"# runs on the interpreter core: {'; '.join(self.notes)}\n"

    def all_kernels(self) -> list[Any]:
        if self.program is not None:
            return self.program.all_kernels()
        assert self.interpreter is not None
        return self.interpreter.all_kernels()

    def prepare(self, args: Sequence[Any]) -> list[np.ndarray]:
        return check_args(self.graph, args)

    def execute(self, prepared: Sequence[np.ndarray]) -> list[np.ndarray]:
        if self.program is None:
            assert self.interpreter is not None
            return self.interpreter.execute(prepared)
        with np.errstate(all="ignore"):
            return self.program.fn(*prepared)

    def stepped(self, prepared: Sequence[np.ndarray], after_step: Any) -> list[np.ndarray]:
        """A bare run calling `after_step(node, value)` after each top-level node: the
        generated program's measured twin (its `_step` hook), or the interpreter's loop. The
        caller sets NumPy's error state (the profile does so outside its clock)."""
        if self.program is None:
            assert self.interpreter is not None
            return self.interpreter.evaluate(prepared, after_step)
        return self.program.measured(*prepared, after_step)

    def sync(self) -> None:
        """Nothing to wait for: every call returns when its work is done."""

    call = execute  # gx.compile's call: its arguments have the traced shapes and types

    def warm_up(self, prepared: Sequence[np.ndarray]) -> None:
        if not self.warm:  # numba compiles on the first call: keep that out of the figures
            self.execute(prepared)
            self.warm = True

    def run(self, args: Sequence[Any]) -> Run:
        if self.program is None:
            assert self.interpreter is not None
            return self.interpreter.run(args)
        prepared = self.prepare(args)
        self.warm_up(prepared)
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
