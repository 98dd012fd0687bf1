"""Scans and whiles compiled whole (backends/cpu/compiled_control_flow.py): one numba
function over all the iterations, matching the per-iteration body it falls back to; products
hoisted before the iterations and deferred after them, and what the memory plan counts of
them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import registry
from explorer.backends.cpu import backend as cpu_backend
from explorer.backends.cpu import compiled_control_flow as loops

rng = np.random.default_rng(3)


def _f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _rnn(p: dict, xs: jax.Array) -> tuple:
    def step(h: jax.Array, x: jax.Array) -> tuple:
        h = jnp.tanh(h @ p["wh"] + x @ p["wx"] + p["b"])
        return h, (h.sum(-1), jnp.maximum(h, 0.0).max(0) - 1.0)

    return jax.lax.scan(step, jnp.zeros((4, 6), xs.dtype), xs, reverse=True)


RNN_ARGS = ({"wh": _f32(6, 6), "wx": _f32(3, 6), "b": _f32(6)}, _f32(9, 4, 3))


@pytest.mark.parametrize("fn", [_rnn, jax.grad(lambda p, xs: _rnn(p, xs)[0].sum())], ids=["rnn", "grad"])
def test_a_scan_runs_as_one_numba_function_and_matches_its_python_body(fn) -> None:
    t = gx.explore(fn, *RNN_ARGS)
    exe = registry.executable(t.final.graph, "cpu")
    assert exe.program is not None and exe.program.control_flow
    assert all(loop.ok for loop in exe.program.control_flow), [x.reason for x in exe.program.control_flow]
    assert "in one numba function" in exe.source
    flat = exe.prepare(t.flat_args(RNN_ARGS))
    compiled = exe.execute(flat)
    kept = [loop.fn for loop in exe.program.control_flow]
    for loop in exe.program.control_flow:  # the same program with each scan's body run per iteration
        loop.fn = None
    per_step = exe.execute(flat)
    for loop, fn_ in zip(exe.program.control_flow, kept):
        loop.fn = fn_
    want = jax.tree_util.tree_leaves(jax.jit(fn)(*RNN_ARGS))
    for got, step, w in zip(compiled, per_step, want):
        np.testing.assert_allclose(got, step, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5)
    assert any("whole scan" in k.source for k in t.run(backend="cpu").kernels)


def test_a_scan_body_numba_does_not_take_runs_per_iteration_with_its_reason() -> None:
    def cumulative(xs: jax.Array) -> jax.Array:  # a sort: no numba form in a compiled scan
        return jax.lax.scan(lambda c, x: (c + jnp.sort(x)[0], c), jnp.float32(0), xs)

    xs = _f32(5, 3)
    t = gx.explore(cumulative, xs)
    r = t.run(backend="cpu")
    for got, w in zip(jax.tree_util.tree_leaves(r.value), jax.tree_util.tree_leaves(cumulative(xs))):
        np.testing.assert_allclose(got, w, rtol=1e-5)
    assert "# per iteration: %" in r.program and "sort inside a compiled scan" in r.program


@pytest.mark.parametrize("threads", [1, 2])
def test_a_scan_whose_steps_are_big_runs_per_iteration_where_there_are_threads(
        threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step of 64x256 @ 256x256 twice (16.8 MFLOP, over STEP_FLOPS) runs per iteration on
    threaded BLAS when numba has threads, with the reason; compiled whole on one thread."""
    monkeypatch.setattr(loops, "threads", lambda: threads)

    def rnn(w: jax.Array, xs: jax.Array) -> jax.Array:
        def step(h: jax.Array, x: jax.Array) -> tuple[jax.Array, None]:
            return jnp.tanh(jnp.tanh(h @ w) @ w + x) * threads, None  # (a program per case)
        return jax.lax.scan(step, xs[0], xs)[0]

    w, xs = _f32(256, 256) / 16, _f32(3, 64, 256)
    r = gx.explore(rnn, w, xs).run(backend="cpu")
    np.testing.assert_allclose(r.value, rnn(w, xs), rtol=2e-4, atol=2e-5)
    big = "MFLOP, enough for BLAS's threads and the parallel kernels"
    assert (big in r.program) == (threads > 1), r.program
    assert any("whole scan" in k.source for k in r.kernels) == (threads == 1)


def test_scalar_carries_and_rows_stay_numba_scalars() -> None:
    def running(xs: jax.Array, k: jax.Array) -> tuple:  # 0-d carry, rows and constant
        return jax.lax.scan(lambda c, x: (c * k + x.sum(), (c, x.max())), jnp.float32(1), xs)

    xs, k = _f32(6, 3), np.float32(0.5)
    t = gx.explore(running, xs, k)
    r = t.run(backend="cpu")
    assert "in one numba function" in r.program, r.program
    for got, w in zip(jax.tree_util.tree_leaves(r.value), jax.tree_util.tree_leaves(running(xs, k))):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


def test_a_scan_numba_fails_to_type_falls_back_once_and_says_why() -> None:
    from numba.core.errors import TypingError

    t = gx.explore(_rnn, *RNN_ARGS)
    exe = cpu_backend.CpuProgram(t.final.graph)
    (loop,) = exe.program.control_flow

    def refuse(*args):  # noqa: ANN002, ANN202
        raise TypingError("cannot type this")

    loop.fn = refuse
    got = exe.execute(exe.prepare(t.flat_args(RNN_ARGS)))
    assert loop.fn is None and loop.reason.startswith("numba: cannot type this")
    for g, w in zip(got, jax.tree_util.tree_leaves(_rnn(*RNN_ARGS))):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_a_scans_input_projection_runs_once_before_the_loop() -> None:
    """x @ W of the step's row and a constant reads no carry: loops.hoisted computes it for
    every step at once before the loop (rows of rank 2 and 1, forward and reverse, an empty
    scan), the loop reads its row, and the results are those of the per-iteration body."""
    def vector_rnn(w: jax.Array, u: jax.Array, xs: jax.Array) -> tuple:  # rank-1 rows
        return jax.lax.scan(lambda h, x: (jnp.tanh(h @ w + x @ u), h), jnp.zeros(5), xs)

    cases = [(_rnn, RNN_ARGS), (vector_rnn, (_f32(5, 5), _f32(3, 5), _f32(7, 3))),
             (vector_rnn, (_f32(5, 5), _f32(3, 5), _f32(0, 3)))]
    for fn, args in cases:
        t = gx.explore(fn, *args)
        exe = cpu_backend.CpuProgram(t.final.graph)
        (loop,) = exe.program.control_flow
        assert loop.ok, loop.reason
        assert len(loops.hoisted(loop.node)) == 1  # the input projection, not h @ wh
        assert "one product over all steps" in loop.source and "before the loop" in loop.source
        flat = exe.prepare(t.flat_args(args))
        got = exe.execute(flat)
        fn_ = loop.fn
        loop.fn = None  # the per-iteration body
        want = exe.execute(flat)
        loop.fn = fn_
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(fn(*args))):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    # a product larger than HOIST_MAX_BYTES stays in the loop
    t = gx.explore(_rnn, *RNN_ARGS)
    (loop,) = cpu_backend.CpuProgram(t.final.graph).program.control_flow
    saved, loops.HOIST_MAX_BYTES = loops.HOIST_MAX_BYTES, 9 * 4 * 6 * 4 - 1
    try:
        assert loops.hoisted(loop.node) == {}
        assert "before the loop" not in loops.generate_scan(loop.node, "")[0]
    finally:
        loops.HOIST_MAX_BYTES = saved


def test_the_memory_plan_counts_a_scans_products_before_the_loop() -> None:
    from explorer.analysis import memory
    t = gx.explore(_rnn, *RNN_ARGS)
    g = t.final.graph
    (scan,) = [n for n in g.nodes if n.op == "scan"]
    assert loops.hoisted_bytes(scan) == 9 * 4 * 6 * 4  # length x the (4, 6) f32 product
    saved, loops.HOIST_MAX_BYTES = loops.HOIST_MAX_BYTES, 0
    try:
        without = memory.plan(g, "cpu").peak_bytes
    finally:
        loops.HOIST_MAX_BYTES = saved
    assert memory.plan(g, "cpu").peak_bytes >= without + 9 * 4 * 6 * 4 - 4 * 6 * 4


def _loop_against_its_body(exe, t, args) -> None:  # noqa: ANN001
    """Each compiled loop of `exe` gives what its per-iteration body gives, and JAX's values."""
    flat = exe.prepare(t.flat_args(args))
    got = exe.execute(flat)
    saved = [(loop, loop.fn) for loop in exe.program.control_flow]
    for loop, _ in saved:
        loop.fn = None  # the per-iteration body
    want = exe.execute(flat)
    for loop, fn in saved:
        loop.fn = fn
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_a_gradients_weight_sums_run_once_after_the_loop() -> None:
    """An RNN gradient's backward scan adds h_prev^T @ delta and x^T @ delta to carries that
    nothing else reads: loops.deferred stacks delta (one buffer for both) and the two
    products run once after the loop, over every step's rows. Rows as the dot's left or
    right operand, forward and reverse, an empty scan; a carry read elsewhere stays."""
    grad = jax.grad(lambda p, xs: _rnn(p, xs)[0].sum())

    def right(w: jax.Array, xs: jax.Array, ds: jax.Array) -> jax.Array:  # delta^T @ x
        def step(acc: jax.Array, xd: tuple) -> tuple:
            x, d = xd
            return acc + jnp.tanh(d @ w).T @ x, x.sum()
        return jax.lax.scan(step, jnp.zeros((5, 3)), (xs, ds))

    def read(w: jax.Array, xs: jax.Array, ds: jax.Array) -> jax.Array:  # the carry is read
        def step(acc: jax.Array, xd: tuple) -> tuple:
            x, d = xd
            return acc + x.T @ jnp.tanh(d @ w), acc.sum()
        return jax.lax.scan(step, jnp.zeros((3, 5)), (xs, ds), reverse=True)

    for fn, args, n in [(grad, RNN_ARGS, 2), (right, (_f32(4, 5), _f32(7, 2, 3), _f32(7, 2, 4)), 1),
                        (right, (_f32(4, 5), _f32(0, 2, 3), _f32(0, 2, 4)), 1),
                        (read, (_f32(4, 5), _f32(7, 2, 3), _f32(7, 2, 4)), 0)]:
        t = gx.explore(fn, *args)
        exe = cpu_backend.CpuProgram(t.final.graph)
        assert all(loop.ok for loop in exe.program.control_flow), [x.reason for x in exe.program.control_flow]
        found = [loops.deferred(loop.node) for loop in exe.program.control_flow]
        assert sum(map(len, found)) == n, found
        if n:
            (loop,) = [x for x, f in zip(exe.program.control_flow, found) if f]
            assert "one product after the loop" in loop.source
            assert loop.source.count("= np.empty((length,") == 1  # (one stacked value)
        _loop_against_its_body(exe, t, args)
        for g, w in zip(jax.tree_util.tree_leaves(exe.execute(exe.prepare(t.flat_args(args)))),
                        jax.tree_util.tree_leaves(fn(*args))):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    t = gx.explore(grad, *RNN_ARGS)  # the stacked value counts in the memory plan
    (back,) = [n for n in t.final.graph.nodes if n.op == "scan" and loops.deferred(n)]
    assert loops.hoisted_bytes(back) >= 9 * 4 * 6 * 4  # length x the (4, 6) f32 delta
    saved, loops.HOIST_MAX_BYTES = loops.HOIST_MAX_BYTES, 9 * 4 * 6 * 4 - 1
    try:
        assert loops.deferred(back) == {}  # larger than HOIST_MAX_BYTES: stays in the loop
    finally:
        loops.HOIST_MAX_BYTES = saved
