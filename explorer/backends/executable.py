"""A stage's executable on a program-writing backend: its generated program
(program_writer.py), or, when the writer cannot write it, the backend's interpreter, with the
reason in `notes`. The CPU and GPU backends run stages through it.

A target subclasses `Executable` and supplies how arguments reach it (`prepare`), how the
program's entry is called (`run_program`), how to wait for its work (`sync`), and one
measured run (`measure`); the program-or-interpreter choice and everything that follows from
it is here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ..ir.graph import Graph
from .program_writer import Program, ProgramError
from .registry import Run


class Executable:
    """The generated program of `graph` (`write(graph)`), or the interpreter `interpret(graph)`
    when the writer raises ProgramError, with the reason in `notes`."""

    peak_how: ClassVar[str]
    # what the source says runs a stage the writer could not write
    interpreter_name: ClassVar[str] = "the interpreter core"

    def __init__(self, graph: Graph, write: Callable[[Graph], Program],
                 interpret: Callable[[Graph], Any]) -> None:
        self.graph, self.warm = graph, False
        self.program: Program | None = None
        self.interpreter: Any = None
        try:
            self.program = write(graph)
            self.notes = list(self.program.notes)
        except ProgramError as e:
            self.interpreter = interpret(graph)
            self.notes = [f"interpreted: the whole stage ({e})"]

    # ---- what a target supplies

    def prepare(self, args: Sequence[Any]) -> list[Any]:
        """The arguments as the program takes them (checked against the graph's)."""
        raise NotImplementedError

    def run_program(self, prepared: Sequence[Any]) -> list[Any]:
        """One call of the program's entry, its work done when it returns."""
        assert self.program is not None
        return self.program.fn(*prepared)

    def sync(self) -> None:
        """Wait until the work launched so far has finished (nothing to wait for here: every
        call returns when its work is done)."""

    def measure(self, prepared: Sequence[Any]) -> Run:
        """One measured run of the program (warmed up) on prepared arguments."""
        raise NotImplementedError

    # ---- the program, or the interpreter

    @property
    def source(self) -> str:
        """The generated program's source (the interpreter's note when there is none)."""
        if self.program is not None:
            return self.program.source
        return f"# runs on {self.interpreter_name}: {'; '.join(self.notes)}\n"

    def all_kernels(self) -> list[Any]:
        if self.program is not None:
            return self.program.all_kernels()
        return self.interpreter.all_kernels()

    def execute(self, prepared: Sequence[Any]) -> list[Any]:
        if self.program is None:
            return self.interpreter.execute(prepared)
        return self.run_program(prepared)

    def stepped(self, prepared: Sequence[Any], after_step: Any) -> list[Any]:
        """A bare run calling `after_step(node, value)` after each top-level node: the
        generated program's measured twin (its `_step` hook), or the interpreter's walk. The
        caller sets NumPy's error state (the profile does so outside its clock)."""
        if self.program is None:
            return self.interpreter.evaluate(prepared, after_step)
        return self.program.measured(*prepared, after_step)

    def warm_up(self, prepared: Sequence[Any]) -> None:
        """One run first (kernels compile on their first call: kept out of the figures)."""
        if not self.warm:
            self.execute(prepared)
            self.warm = True

    def run(self, args: Sequence[Any]) -> Run:
        if self.program is None:
            return self.interpreter.run(args)
        prepared = self.prepare(args)
        self.warm_up(prepared)
        return self.measure(prepared)
