"""The control-flow drivers (backends/control_flow.py): HLO's semantics on plain bodies, on
mutable and immutable array namespaces, and the one set both the interpreter core and a
generated program call."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import control_flow, reference
from explorer.backends.cpu import CpuInterpreter
from explorer.backends.cpu.program import generate_program
from explorer.ir import TensorType, TupleType


def test_one_or_tuple() -> None:
    assert control_flow.one_or_tuple([3]) == 3
    assert control_flow.one_or_tuple([1, 2]) == (1, 2)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("xp", [np, jnp], ids=["numpy", "jax.numpy"])
def test_a_scan_writes_each_iterations_row_into_its_stacked_results(reverse: bool, xp: Any) -> None:
    """A running sum: one constant (a scale), one carry, one scanned input; the stacked
    result holds each step's carry, written in place (NumPy) or rebuilt (jax.numpy)."""
    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    t = TupleType((TensorType((3,), "f32"), TensorType((4, 3), "f32")))

    def body(k: Any, c: Any, x: Any) -> list[Any]:
        return [c + k * x, c]

    carry, ys = control_flow.run_scan(body, [np.float32(2), np.zeros(3, np.float32), xs], t,
                                      length=4, reverse=reverse, num_consts=1, num_carry=1, xp=xp)
    order = range(3, -1, -1) if reverse else range(4)
    c, want = np.zeros(3, np.float32), np.zeros((4, 3), np.float32)
    for i in order:
        want[i], c = c, c + 2 * xs[i]
    np.testing.assert_array_equal(np.asarray(carry), c)
    np.testing.assert_array_equal(np.asarray(ys), want)


def test_a_while_runs_its_condition_before_each_body_call() -> None:
    calls: list[int] = []

    def cond(i: int, x: float) -> list[bool]:
        calls.append(i)
        return [i < 3]

    assert control_flow.run_while(cond, lambda i, x: [i + 1, x * 2], [0, 1.0]) == (3, 8.0)
    assert calls == [0, 1, 2, 3]
    assert control_flow.run_while(lambda x: [False], lambda x: [x + 1], [5]) == 5


@pytest.mark.parametrize("selector, want", [(0, 10), (1, 73), (2, 32), (7, 32), (-1, 32)])
def test_a_conditional_clamps_its_selector_and_passes_each_branch_its_operands(
        selector: int, want: int) -> None:
    branches = [lambda a: [a * 10], lambda a, b: [a * 10 + b * 3 + 2], lambda a: [a * 32]]
    assert control_flow.run_conditional(branches, [1, 2, 1], [selector, 1, 5, 7, 1]) == want


def _program(fn: Any, *args: Any) -> tuple[Any, list[np.ndarray]]:
    t = gx.explore(fn, *args)
    return t.final.graph, t.flat_args(args)


@pytest.mark.parametrize("driver", ["run_scan", "run_while", "run_conditional"])
def test_the_interpreter_core_and_generated_programs_call_the_same_drivers(
        driver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each program runs through the driver once on the interpreter core and once as a
    generated CPU program (a sort in the scan and while bodies: not compiled whole), with the
    same results."""
    cases = {
        "run_scan": (lambda xs: jax.lax.scan(lambda c, x: (c + jnp.sort(x)[0], c),
                                             jnp.float32(0), xs), np.ones((5, 3), np.float32)),
        "run_while": (lambda x: jax.lax.while_loop(lambda c: c.sum() < 100.0, lambda c: jnp.sort(c) * 2.0, x),
                      np.ones(3, np.float32)),
        "run_conditional": (lambda i, x: jax.lax.switch(i, [jnp.sin, jnp.cos], x),
                            np.int32(1)),
    }
    fn, first = cases[driver]
    args = (first, np.ones(3, np.float32)) if driver == "run_conditional" else (first,)
    g, flat = _program(fn, *args)
    calls: list[str] = []
    real = getattr(control_flow, driver)

    def spy(*a: Any, **k: Any) -> Any:
        calls.append(driver)
        return real(*a, **k)

    monkeypatch.setattr(control_flow, driver, spy)
    prepared = reference.check_args(g, flat)
    want = reference.evaluate(g, prepared)
    assert calls == [driver]
    program = generate_program(g, CpuInterpreter)
    assert f"control_flow.{driver}(" in program.source
    with np.errstate(all="ignore"):
        got = program.fn(*prepared)
    assert calls == [driver, driver]
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
