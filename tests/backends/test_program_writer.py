"""The program writer (backends/program_writer.py), through the smallest target: a writer
whose kernels run their bodies on the reference interpreter. The walk is the target-neutral
part: one line per node in schedule order, values deleted after their last use, values that
depend on no parameter computed once, the measured twin's hook after every top-level node,
control flow through the drivers, and the target's hooks where it differs."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import program_writer, reference
from explorer.backends.program_writer import ProgramError, ProgramWriter, generate
from explorer.backends.reference import NumpyInterpreter
from explorer.ir import Graph, Node

rng = np.random.default_rng(7)


class ReferenceKernel:
    """A fused kernel that runs its body on the reference interpreter."""

    in_place: frozenset[int] = frozenset()
    reason = ""

    def __init__(self, node: Node, name: str) -> None:
        self.name, self.body, self.seconds = name, node.attrs["body"], 0.0

    def __call__(self, vals: list[Any]) -> Any:
        return reference.evaluate(self.body, list(vals))[0]


class ToyWriter(ProgramWriter):
    """A target with nothing of its own but its kernels and its header."""

    def compile_kernel(self, n: Node, name: str) -> ReferenceKernel:
        return ReferenceKernel(n, name)

    def header(self, graph: Graph) -> str:
        return f'"""toy program of @{graph.name}"""\n'


def _write(fn: Any, *args: Any, writer: Any = ToyWriter) -> tuple[Any, Graph, list[np.ndarray]]:
    t = gx.explore(fn, *args)
    g = t.final.graph
    program = generate(g, lambda reuse: writer(NumpyInterpreter, np.matmul, reuse))
    return program, g, reference.check_args(g, t.flat_args(args))


def test_one_line_per_node_in_schedule_order_with_the_references_results() -> None:
    a, b = rng.standard_normal((8, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    program, g, prepared = _write(lambda a, b: jnp.tanh(a @ b).sum(0) + 1.0, a, b)
    assert program.source.startswith('"""toy program of @')
    text = program.source
    nodes = [n for n in g.nodes if n.op != "parameter"]
    at = [text.index(f"# %{n.id} = {n.op}") for n in nodes]
    assert at == sorted(at)
    assert "def program(a, b):" in text and "program_measured" not in text  # (the twin is not shown)
    assert text.count("    del ") >= 2  # (each value after its last use)
    with np.errstate(all="ignore"):
        got = program.fn(*prepared)
    np.testing.assert_allclose(got[0], reference.evaluate(g, prepared)[0], rtol=1e-5)
    assert program.kernels and all(isinstance(k, ReferenceKernel) for k in program.kernels)


def test_the_measured_twin_calls_the_hook_after_every_top_level_node() -> None:
    x = rng.standard_normal((6, 4)).astype(np.float32)
    program, g, prepared = _write(lambda x: jnp.exp(x).sum(1) * 2.0, x)
    seen: list[int] = []
    with np.errstate(all="ignore"):
        program.measured(*prepared, lambda n, v: seen.append(n.id))
    assert seen == [n.id for n in g.nodes if n.op != "parameter"]


def test_values_that_depend_on_no_parameter_are_computed_when_the_program_is_made() -> None:
    x = rng.standard_normal((4, 4)).astype(np.float32)
    program, g, prepared = _write(lambda x: x + jnp.arange(4.0, dtype=jnp.float32), x)
    assert "computed when the program was made" in program.source
    np.testing.assert_allclose(program.fn(*prepared)[0], x + np.arange(4, dtype=np.float32))


def test_control_flow_runs_through_the_drivers_and_a_targets_hook_may_take_it() -> None:
    taken: list[str] = []

    class Whole(ToyWriter):
        def scan_or_while(self, n: Node, target: str, args: str, prefix: str, driver: str,
                          same: str, fallback: Any) -> list[str]:
            taken.append(n.op)
            return [f"{target} = {self.bind(f'whole_{n.id}', fallback)}([{args}])"]

    def fn(xs: Any) -> Any:
        return jax.lax.scan(lambda c, x: (c + x.sum(), c), jnp.float32(0), xs)

    xs = rng.standard_normal((5, 3)).astype(np.float32)
    plain, g, prepared = _write(fn, xs)
    assert "control_flow.run_scan(" in plain.source
    whole, _, _ = _write(fn, xs, writer=Whole)
    assert taken == ["scan", "scan"] and "control_flow.run_scan(" not in whole.source  # (both walks)
    want = reference.evaluate(g, prepared)
    for got in (plain.fn(*prepared), whole.fn(*prepared)):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-6)


def test_a_kernel_without_generated_code_is_noted_in_the_targets_words() -> None:
    class Declines(ReferenceKernel):
        reason = "no form for this"

    class Host(ToyWriter):
        fallback_words = "on the host"

        def compile_kernel(self, n: Node, name: str) -> ReferenceKernel:
            return Declines(n, name)

    x = rng.standard_normal((6, 4)).astype(np.float32)
    program, _, _ = _write(lambda x: jnp.tanh(x) * 2.0, x, writer=Host)
    assert any(note.startswith("on the host: kernel ") and "(no form for this)" in note
               for note in program.notes), program.notes


def test_a_syntax_error_in_the_written_module_is_a_program_error() -> None:
    class Broken(ToyWriter):
        def header(self, graph: Graph) -> str:
            return "def (:\n"

    with pytest.raises(ProgramError, match="does not parse"):
        _write(lambda x: x * 2.0, np.ones(3, np.float32), writer=Broken)


def test_names_and_literals() -> None:
    assert program_writer.ident("split_3/body-x") == "split_3_body_x"
    assert program_writer.ident("3d") == "_3d" and program_writer.ident("lambda") == "_lambda"
    assert program_writer.literal((1, 2.5, "a", None)) == "(1, 2.5, 'a', None)"
    assert program_writer.literal(float("nan")) is None and program_writer.literal(np.ones(2)) is None
