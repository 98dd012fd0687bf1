"""The program-or-interpreter executable (backends/executable.py), through a target with
nothing of its own: its generated program when the writer writes one, else the interpreter
with the reason in `notes`; both give the same values, steps and listings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.backends import reference
from explorer.backends.executable import Executable
from explorer.backends.program_writer import ProgramError, generate
from explorer.backends.reference import NumpyInterpreter
from explorer.backends.registry import Run
from explorer.ir import Graph
from tests.backends.test_program_writer import ToyWriter


class ToyExecutable(Executable):
    peak_how = "none"

    def __init__(self, graph: Graph, refuse: bool = False) -> None:
        def write(g: Graph) -> Any:
            if refuse:
                raise ProgramError("no writer for this")
            return generate(g, lambda reuse: ToyWriter(NumpyInterpreter, np.matmul, reuse))

        super().__init__(graph, write, NumpyInterpreter)

    def prepare(self, args: Sequence[Any]) -> list[np.ndarray]:
        return reference.check_args(self.graph, args)

    def measure(self, prepared: Sequence[Any]) -> Run:
        outs = self.stepped(prepared, lambda n, v: None)
        return Run(outs, 0.0, 0, (), self.peak_how, program=self.source)


def _graph() -> tuple[Graph, list[np.ndarray]]:
    x = np.random.default_rng(1).standard_normal((6, 5)).astype(np.float32)
    t = gx.explore(lambda x: jnp.exp(x).sum(1) * 2.0, x)
    return t.final.graph, [x]


def test_the_program_runs_when_the_writer_writes_one() -> None:
    g, args = _graph()
    exe = ToyExecutable(g)
    assert exe.program is not None and exe.interpreter is None and exe.notes == []
    assert exe.source == exe.program.source and exe.all_kernels() == exe.program.kernels
    want = reference.evaluate(g, args)
    np.testing.assert_allclose(exe.execute(exe.prepare(args))[0], want[0], rtol=1e-6)
    r = exe.run(args)
    assert exe.warm and r.program == exe.source
    np.testing.assert_allclose(r.outputs[0], want[0], rtol=1e-6)


def test_the_interpreter_runs_with_the_reason_when_the_writer_cannot() -> None:
    g, args = _graph()
    exe = ToyExecutable(g, refuse=True)
    assert exe.program is None and isinstance(exe.interpreter, NumpyInterpreter)
    assert exe.notes == ["interpreted: the whole stage (no writer for this)"]
    assert exe.source == "# runs on the interpreter core: interpreted: the whole stage (no writer for this)\n"
    want = reference.evaluate(g, args)
    prepared = exe.prepare(args)
    seen: list[int] = []
    np.testing.assert_allclose(exe.stepped(prepared, lambda n, v: seen.append(n.id))[0], want[0],
                               rtol=1e-6)
    assert seen == [n.id for n in g.nodes]  # (the interpreter's loop: parameters too)
    np.testing.assert_allclose(exe.run(args).outputs[0], want[0], rtol=1e-6)
