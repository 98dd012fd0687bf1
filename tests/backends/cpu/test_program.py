"""The CPU backend's generated program (backends/cpu/program.py) and gx.compile's call path:
one module per stage, in schedule order, values deleted at their last use, control flow
through generated body functions, the split loop handed to the interpreter core with a
visible note, and calls that trace once per signature."""

from __future__ import annotations

from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import registry
from explorer.backends.cpu import CpuInterpreter, CpuProgram
from explorer.backends.cpu import backend as cpu_backend
from explorer.backends.cpu.program import generate_program as generate
from explorer.backends.program_writer import ProgramError
from explorer.ir.ops import OPS
from explorer.ir.traits import Emit, OpKind

rng = np.random.default_rng(3)


def _f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def test_the_program_is_straight_line_code_in_schedule_order() -> None:
    a, b, v = _f32(30, 20), _f32(20, 10), _f32(10)
    t = gx.explore(lambda a, b, v: jnp.tanh((a @ b) @ v) + 1.0, a, b, v)
    p = generate(t.final.graph, CpuInterpreter)
    lines = [x.strip() for x in p.source.splitlines()]
    assert lines[lines.index("def program(a, b, v):") + 1].startswith('"""@')
    # every node is one line, in the graph's order, each value deleted after its last use
    order = [n.id for n in t.final.graph.nodes if n.op != "parameter"]
    assigned = [int(x[1:x.index(" ")]) for x in lines if x.startswith("v") and " = " in x]
    assert assigned == order
    assert "del b, v" in lines and lines[-1] == f"return [v{t.final.graph.outputs[0]}]"
    assert "matmul(b, v)" in p.source and not p.notes
    want = np.tanh((a @ b) @ v) + 1
    np.testing.assert_allclose(p.fn(a, b, v)[0], want, rtol=1e-4, atol=1e-6)


def test_runs_report_the_program_beside_the_kernels() -> None:
    x = _f32(64, 48)
    t = gx.explore(lambda x: jnp.sum(jnp.exp(x) * 2.0, -1), x)
    r = t.run(backend="cpu")
    np.testing.assert_allclose(r.value, np.sum(np.exp(x) * 2, -1), rtol=1e-5)
    assert "def program(x):" in r.program and r.kernels
    assert r.kernels[0].name.split("/")[-1] in r.program  # the program calls its kernel


@pytest.mark.parametrize("name", ["scan", "while", "cond"])
def test_control_flow_bodies_are_functions_of_the_program(name: str) -> None:
    def scan(w: jax.Array, xs: jax.Array) -> jax.Array:
        return jax.lax.scan(lambda h, x: (jnp.tanh(h @ w + x), h.sum()), jnp.zeros(4), xs)

    def loop(x: jax.Array) -> jax.Array:
        return jax.lax.while_loop(lambda c: c[1].max() > 0.1, lambda c: (c[0] + 1, c[1] / 2),
                                  (0, x))

    def cond(x: jax.Array, i: jax.Array) -> jax.Array:
        return jax.lax.switch(i, [jnp.sin, jnp.cos, lambda y: y * 2], x)

    fn, args = {"scan": (scan, (_f32(4, 4), _f32(7, 4))), "while": (loop, (np.abs(_f32(5)) * 9,)),
                "cond": (cond, (_f32(5), np.int32(7)))}[name]
    t = gx.explore(fn, *args)
    r = t.run(backend="cpu")
    want = jax.jit(fn)(*args)
    for got, w in zip(jax.tree_util.tree_leaves(r.value), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
    exe = registry.executable(t.final.graph, "cpu")
    assert isinstance(exe, CpuProgram) and exe.program is not None and not exe.notes
    driver = {"scan": "in one numba function", "while": "the whole while in one numba function",
              "cond": "control_flow.run_conditional("}[name]
    assert driver in exe.source
    assert exe.source.count("def ") >= 2  # the bodies are functions of the module


def test_a_split_loop_runs_on_the_interpreter_core_with_a_note() -> None:
    x = _f32(256, 128)
    t = gx.explore(lambda x: jnp.tanh(x * 2.0).sum(0), x, memory_limit="64KiB")
    assert "loop" in t.final.graph.ops()
    r = t.run(backend="cpu")
    np.testing.assert_allclose(r.value, np.tanh(x * 2).sum(0), rtol=1e-4, atol=1e-4)
    assert "interpreted: loop %" in r.program
    assert r.peak_bytes <= 64 * 1024


def test_a_stage_the_generator_cannot_write_runs_on_the_interpreter(monkeypatch) -> None:
    def refuse(graph, make):  # noqa: ANN001, ANN202
        raise ProgramError("no writer for this")

    monkeypatch.setattr(cpu_backend, "generate_program", refuse)
    x = _f32(16, 8)
    t = gx.explore(lambda x: jnp.exp(x).sum(), x)
    exe = cpu_backend.CpuProgram(t.final.graph)
    assert exe.program is None and exe.notes == ["interpreted: the whole stage (no writer for this)"]
    np.testing.assert_allclose(exe.execute(exe.prepare([x]))[0], np.exp(x).sum(), rtol=1e-5)
    assert "interpreter core" in exe.source


def test_only_the_split_loop_and_shard_map_are_left_to_the_interpreter() -> None:
    """The program generator's fall-back set is a written-down choice, as the kernels' are
    (a shard_map's devices run as threads meeting at collectives: backends/spmd.py)."""
    interpreted = {n for n, row in OPS.items() if row.emit is Emit.INTERPRETED}
    assert interpreted == {"loop", "shard_map"}
    for name, row in OPS.items():
        assert (row.emit is Emit.CALL) == (row.kind != OpKind.REGION), name


# ---------------------------------------------------------------- gx.compile's call path


def test_compile_calls_trace_once_per_signature_and_convert_like_check_args() -> None:
    f = gx.compile(lambda p, x, s: jnp.tanh(x @ p["w"]) * s + p["b"])
    p = {"w": _f32(4, 3), "b": _f32(3)}
    x = _f32(5, 4)
    want = np.tanh(x @ p["w"]) * 2.0 + p["b"]
    np.testing.assert_allclose(f(p, x, 2.0), want, rtol=1e-5)
    np.testing.assert_allclose(f(p, x, 3.0), np.tanh(x @ p["w"]) * 3 + p["b"], rtol=1e-5)
    f(p, jnp.asarray(x), 4.0)  # a jax array for a NumPy one: the same graph
    assert len(f.traces) == 1
    np.testing.assert_allclose(f(p, x.astype(np.float16), 2.0), want, rtol=3e-3, atol=3e-3)
    f(p, x[:2], 2.0)
    assert len(f.traces) == 3  # float16 traces its own graph, as does a new shape
    # without x64, float64 arguments trace to a float32 graph: the call casts them
    g = gx.compile(lambda x: x * 2)
    got = g(x.astype(np.float64))
    assert got.dtype == np.float32 and g.trace_for(x).final.graph.param_nodes[0].dtype == "f32"
    np.testing.assert_allclose(got, x * 2, rtol=1e-6)


def test_compile_takes_typed_keys_and_the_jax_backend_gives_jax_arrays() -> None:
    def noisy(key: jax.Array, x: jax.Array) -> jax.Array:
        return x + jax.random.normal(key, x.shape)

    key, x = jax.random.key(3), _f32(4, 3)
    want = jax.jit(noisy)(key, x)
    for backend in ("cpu", "jax"):
        got = gx.compile(noisy, backend=backend)(key, x)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert isinstance(got, jax.Array if backend == "jax" else np.ndarray)


def test_the_jax_backend_calls_one_jit_of_the_whole_call_and_leaves_it_for_new_shapes() -> None:
    f = gx.compile(lambda p, x: {"y": jnp.tanh(x @ p["w"]).sum(0)}, backend="jax")
    p, big, small = {"w": _f32(4, 3)}, _f32(6, 4), _f32(2, 4)
    for x in (big, small, big, small.astype(np.float16), big):  # alternating signatures
        got = f(p, x)["y"]
        np.testing.assert_allclose(got, np.tanh(x.astype(np.float32) @ p["w"]).sum(0),
                                   rtol=2e-3, atol=2e-3)
    assert len(f.traces) == 3 and f._fast is not None
    assert all(e.tree_call is not None for e in f.entries.values())


def test_compile_retraces_for_a_new_static_value() -> None:
    f = gx.compile(lambda x, cfg: x * cfg["k"] if cfg["on"] else x, backend="jax")
    x = _f32(3)
    np.testing.assert_allclose(f(x, {"k": 2.0, "on": True}), x * 2, rtol=1e-6)
    np.testing.assert_allclose(f(x, {"k": 3.0, "on": True}), x * 3, rtol=1e-6)
    np.testing.assert_allclose(f(x, {"k": 3.0, "on": False}), x, rtol=1e-6)
    assert len(f.traces) == 3


def test_the_kernels_tab_lists_the_program_first() -> None:
    from explorer.view.runs import RunLog

    x = _f32(64, 48)
    t = gx.explore(lambda x: jnp.sum(jnp.exp(x) * 2.0, -1), x)
    log = RunLog(t, repeats=2)
    last = len(t.stages) - 1
    log.run(last, "cpu")
    rows = log.kernels(last)
    assert rows[0]["name"] == "the program" and "def program(x):" in rows[0]["source"]
    assert len(rows) == 1 + len(t.run(backend="cpu").kernels)
    log.run(last, "reference")  # the interpreter generates no program
    assert [r["name"] for r in log.kernels(last)].count("the program") == 1


def test_programs_that_call_lapack_run_their_dots_on_scipys_blas() -> None:
    """SciPy's OpenBLAS and NumPy's are two pools; a program with a cholesky runs its dots on
    SciPy's BLAS too (backends/cpu/pools.py), so one pool serves the whole program; other
    programs keep np.matmul. scipy_matmul is np.matmul on every layout and vector case."""
    from explorer.backends.cpu import dots, pools

    a = _f32(16, 16)
    spd = a @ a.T + 16 * np.eye(16, dtype=np.float32)
    chol = gx.explore(lambda m, b: jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(m), True), b)
                      @ b.T, spd, _f32(16, 3))
    plain = gx.explore(lambda m: m @ m, spd)
    assert pools.calls_lapack(chol.final.graph) and not pools.calls_lapack(plain.final.graph)
    exe, other = CpuProgram(chol.final.graph), CpuProgram(plain.final.graph)
    assert other.program is not None and "`matmul` is np.matmul," in other.program.source
    b = _f32(16, 3)
    got = exe.call(exe.prepare([spd, b]))[0]
    np.testing.assert_allclose(got, np.linalg.solve(spd, b) @ b.T, rtol=1e-3, atol=1e-4)
    if pools.scipy_pool() is None:
        pytest.skip("SciPy and NumPy share one BLAS here: there is one pool")
    assert exe.program is not None
    assert "`matmul` is SciPy's gemm (np.matmul beyond 2-D)," in exe.program.source
    rng = np.random.default_rng(0)
    gemm = mock.patch.object(dots, "ONE_THREAD", 0)  # (these small products too)
    for dtype in (np.float32, np.float64):
        x, y = rng.standard_normal((7, 5)).astype(dtype), rng.standard_normal((5, 4)).astype(dtype)
        for lhs, rhs in ((x, y), (np.asfortranarray(x), y), (x, np.asfortranarray(y)),
                         (x.T.copy().T, y.T.copy().T), (x[::2], y), (x[:, :3], y[:3, ::2]),
                         (x, y[:, 0]), (x[0], y), (x[0], y[:, 0]),
                         (np.stack([x, x]), y)):
            with gemm:
                got = dots.scipy_matmul(lhs, rhs)
            want = np.matmul(lhs, rhs)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with gemm:
        assert dots.scipy_matmul(x[:, :0], y[:0]).shape == (7, 4)
    # a product OpenBLAS runs on one thread anyway goes through np.matmul (3 us a call
    # where SciPy's wrapper costs 13-16)
    def no_gemm() -> None:
        raise AssertionError("a one-thread product went to SciPy's gemm")

    with mock.patch.object(dots, "_GEMM", {"float32": no_gemm, "float64": no_gemm}):
        assert np.array_equal(dots.scipy_matmul(x, y), np.matmul(x, y))


@pytest.mark.parametrize("name", ["gather", "scatter", "scatter-add", "scatter-mul", "scatter-min",
                                  "scatter-max"])
def test_gather_and_scatters_run_as_numba_loops_with_the_rows_semantics(name: str) -> None:
    """The CPU program's gather and scatters (backends/cpu/indexing.py) agree with the op
    rows' NumPy references exactly: out-of-bounds windows dropped or filled or clipped as
    the mode says, repeated indices combined in order."""
    from explorer.backends.cpu import indexing

    assert indexing.REFERENCES[name] is not OPS[name].ref
    for seed in range(12):
        ins, attrs = OPS[name].sample(np.random.default_rng(seed))
        want = OPS[name].ref(*ins, **attrs)
        got = indexing.REFERENCES[name](*ins, **attrs)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_an_embedding_lookup_and_its_gradient_run_through_the_loops() -> None:
    table, ids = _f32(50, 8), rng.integers(0, 50, (30,)).astype(np.int32)
    ids[:3] = 7  # repeated rows: their gradients add up
    grad = gx.compile(jax.grad(lambda t, i: (t[i] ** 2).sum()), backend="cpu")
    program = grad.trace_for(table, ids).run(backend="cpu").program
    assert "scatter_add_" in program and "gather_" in program, program
    assert "ops.scatter_add(" not in program and "ops.gather(" not in program
    want = np.zeros_like(table)
    np.add.at(want, ids, 2 * table[ids])
    np.testing.assert_allclose(grad(table, ids), want, rtol=1e-6)


@pytest.mark.parametrize("name", ["gather", "scatter", "scatter-add", "scatter-mul", "scatter-min",
                                  "scatter-max"])
def test_prepared_gathers_and_scatters_are_the_rows_semantics(name: str) -> None:
    """indexing_prepared's forms (shapes laid out when the program is made, indices read per
    call) agree with the op rows' references bit for bit on the rows' samples: out-of-range
    indices, fill and clip modes, repeated indices combined in order."""
    from explorer.backends.cpu.indexing_prepared import prepare
    from explorer.ir import dtypes
    from explorer.ir.graph import Attrs, TensorType

    for seed in range(40):
        ins, attrs = OPS[name].sample(np.random.default_rng(seed))
        want = OPS[name].ref(*ins, **attrs)
        fn = prepare(name, [TensorType(np.shape(x), dtypes.from_numpy(np.asarray(x).dtype))
                            for x in ins], Attrs(attrs))
        assert fn is not None
        got = fn(*ins)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


_X, _U = _f32(6, 5, 4), _f32(6, 5, 4)
_ROWS = np.array([0, 5, 2, 2, -1, 7], np.int32)  # repeated and out of range
_PAIRS = rng.integers(-2, 7, (3, 4)).astype(np.int64)
INDEXING = {
    "rows": (lambda x, i: x[i], (_X, _ROWS)),
    "axis 1, 2-d indices": (lambda x, i: jnp.take(x, i, axis=1), (_X, _PAIRS)),
    "fill": (lambda x, i: jnp.take(x, i, axis=2, mode="fill", fill_value=-3.0), (_X, _PAIRS)),
    "clip": (lambda x, i: jnp.take(x, i, axis=0, mode="clip"), (_X, _PAIRS)),
    "two index dims, fill": (lambda x, i: x.at[i[:, 0], i[:, 1]].get(mode="fill"), (_X, _PAIRS)),
    "take_along_axis (batching dims)": (
        lambda x, i: jnp.take_along_axis(x, i, -1),
        (_X, rng.integers(0, 4, (6, 5, 2)).astype(np.int32))),
    "add": (lambda x, i, u: x.at[i].add(u), (_X, _ROWS, _U)),
    "set": (lambda x, i, u: x.at[i].set(u), (_X, _ROWS, _U)),
    "multiply, clip": (lambda x, i, u: x.at[i].multiply(u, mode="clip"), (_X, _ROWS, _U)),
    "max along axis 1": (lambda x, i, u: x.at[:, i].max(u[:, :4]), (_X, _ROWS[:4], _U)),
    "min, two index dims": (lambda x, i, u: x.at[i[:, 0], :, i[:, 1]].min(u[:3, :, 0]),
                            (_X, _PAIRS, _U)),
    "int16 table": (lambda x, i: x[i], (np.arange(30, dtype=np.int16).reshape(6, 5), _ROWS)),
    "large (parallel)": (lambda x, i: x[i], (_f32(3000, 128),
                                             rng.integers(0, 3000, 9000).astype(np.int32))),
}


@pytest.mark.parametrize("name", list(INDEXING))
def test_programs_run_gathers_and_scatters_laid_out_ahead(name: str) -> None:
    """Gathers and scatters at run-time indices in a CPU program: the prepared form, the
    reference's results exactly (the op alone in the program: no fused float arithmetic)."""
    fn, args = INDEXING[name]
    compiled = gx.compile(fn, backend="cpu")
    program = compiled.trace_for(*args).run(backend="cpu").program
    assert "# its shapes laid out ahead" in program, program
    got, want = compiled(*args), gx.compile(fn, backend="reference")(*args)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["threefry2x32", "random_bits", "random_split", "random_fold_in"])
def test_random_numbers_run_threefry_as_one_numba_loop_bit_for_bit(name: str) -> None:
    from explorer.backends.cpu import random

    for seed in range(12):
        ins, attrs = OPS[name].sample(np.random.default_rng(seed))
        want = OPS[name].ref(*ins, **attrs)
        got = random.REFERENCES[name](*ins, **attrs)
        for w, g in zip(want if isinstance(want, tuple) else [want],
                        got if isinstance(got, tuple) else [got], strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("batch", [(), (2, 3), (0,)])
@pytest.mark.parametrize("shape", [(), (0,), (4, 5)])
def test_draws_in_one_loop_equal_the_rows_for_any_keys_and_shape(batch, shape) -> None:  # noqa: ANN001
    from explorer.backends.cpu import random

    keys = np.random.default_rng(7).integers(0, 2**32, (*batch, 2), dtype=np.uint64).astype(np.uint32)
    for width in (8, 16, 32, 64):
        want = OPS["random_bits"].ref(keys, bit_width=width, shape=shape)
        got = random.REFERENCES["random_bits"](keys, bit_width=width, shape=shape)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    want = OPS["random_split"].ref(keys, shape=shape)
    got = random.REFERENCES["random_split"](keys, shape=shape)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_dropout_and_normal_draws_match_jax_in_one_generated_kernel() -> None:
    """jax.random.normal's erf_inv and uniform's bitcast have numba forms: the dropout
    program's epilogue is one generated kernel, and its draws are JAX's, bit for bit."""
    def dropout(key: jax.Array, x: jax.Array) -> jax.Array:
        k1, k2 = jax.random.split(key)
        keep = jax.random.bernoulli(k1, 0.8, x.shape)
        return jnp.where(keep, x / 0.8, 0.0) + 0.01 * jax.random.normal(k2, x.shape)

    key, x = jax.random.key(3), _f32(5, 7)
    r = gx.explore(dropout, key, x).run(backend="cpu")
    assert r.kernels and all("runs on the reference interpreter" not in k.source
                             for k in r.kernels)
    np.testing.assert_allclose(r.value, jax.jit(dropout)(key, x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["reduce_window_sum", "reduce_window_max", "reduce_window_min"])
def test_pooling_runs_as_one_numba_loop_with_the_rows_semantics(name: str) -> None:
    """Rank-4 pooling (backends/cpu/window.py) agrees with the op row's reference: padding
    (the identity fills it), strides, window dilation and NaN; base dilation keeps the
    reference."""
    from explorer.backends.cpu import window

    x = rng.standard_normal((2, 9, 8, 3)).astype(np.float32)
    x[1, 4, 4, 1] = np.nan
    cases = [dict(window_dimensions=(1, 2, 2, 1), window_strides=(1, 2, 2, 1),
                  padding=((0, 0),) * 4),
             dict(window_dimensions=(1, 3, 2, 1), window_strides=(1, 2, 1, 1),
                  padding=((0, 0), (1, 1), (0, 1), (0, 0)), window_dilation=(1, 2, 1, 1)),
             dict(window_dimensions=(2, 3, 3, 2), window_strides=(1, 1, 1, 1),
                  padding=((1, 0), (1, 1), (1, 1), (0, 1)))]
    for attrs in cases:
        want = OPS[name].ref(x, **attrs)
        got = window.REFERENCES[name](x, **attrs)
        assert got.dtype == want.dtype
        # (a sum folds in another order: float32 rounding, within 1e-5)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
    big = rng.standard_normal((4, 64, 64, 32)).astype(np.float32)  # runs on every core
    assert 4 * 32 * 32 * 32 * 4 >= window.PARALLEL_MIN  # (out size x window size)
    np.testing.assert_allclose(window.REFERENCES[name](big, **cases[0]),
                               OPS[name].ref(big, **cases[0]), rtol=1e-5, atol=1e-5)
    dilated = dict(cases[0], base_dilation=(1, 2, 1, 1))
    np.testing.assert_array_equal(window.REFERENCES[name](x, **dilated),
                                  OPS[name].ref(x, **dilated))


def test_the_max_pool_gradient_runs_as_one_numba_loop_with_the_rows_semantics() -> None:
    """select_and_scatter_add (backends/cpu/window.py) picks what the op row picks: the first
    maximum ("ge") or minimum ("le") in window order, a NaN over a number, padding never
    better than a real element; overlapping windows add up."""
    from explorer.backends.cpu import window

    name = "select_and_scatter_add"
    for seed in range(16):
        (src, x), attrs = OPS[name].sample(np.random.default_rng(seed))
        if seed % 4 == 0:
            x = x.copy()
            x.flat[seed % x.size] = np.nan
        if seed % 4 == 1:
            x = np.round(x, 1)  # ties: the first one wins
        want = OPS[name].ref(src, x, **attrs)
        got = window.REFERENCES[name](src, x, **attrs)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # NHWC pools (first and last dimensions unwindowed) select a whole row at once
    rng = np.random.default_rng(3)
    x = np.round(rng.standard_normal((3, 9, 8, 5)), 1).astype(np.float32)  # ties
    x[0, 1, 1, 2] = x[2, 4, 3, 0] = np.nan
    for select, window_dims, strides, padding in (
            ("ge", (1, 2, 2, 1), (1, 2, 2, 1), ((0, 0), (0, 1), (0, 0), (0, 0))),
            ("le", (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (1, 1), (0, 0))),  # overlapping
            ("ge", (1, 3, 2, 1), (1, 1, 3, 1), ((0, 0), (2, 0), (0, 2), (0, 0)))):
        attrs = dict(select_prim=select, window_dimensions=window_dims, window_strides=strides,
                     padding=padding)
        out = [(n + lo + hi - w) // s + 1 for n, w, s, (lo, hi)
               in zip(x.shape, window_dims, strides, padding)]
        src = rng.standard_normal(out).astype(np.float32)
        np.testing.assert_allclose(window.REFERENCES[name](src, x, **attrs),
                                   OPS[name].ref(src, x, **attrs), rtol=1e-6, atol=1e-6)
    x, src = _f32(4, 64, 64, 32), _f32(4, 32, 32, 32)  # large: rows of the batch in parallel
    attrs = dict(select_prim="ge", window_dimensions=(1, 2, 2, 1), window_strides=(1, 2, 2, 1),
                 padding=((0, 0),) * 4)
    np.testing.assert_allclose(window.REFERENCES[name](src, x, **attrs),
                               OPS[name].ref(src, x, **attrs), rtol=1e-6)


def test_programs_lay_out_convolutions_ahead() -> None:
    """A CPU program calls each convolution of a CNN's gradient (forward, weight gradient,
    transposed input gradient) in the form laid out when the program was made, and gives
    the reference's results."""
    from tests.corpora.zoo import zoo

    fn, args = zoo()["cnn_grad"]
    t = gx.explore(fn, *args)
    r = t.run(backend="cpu")
    convs = [line for line in r.program.splitlines()
             if "conv_general_dilated" in line and not line.lstrip().startswith("#")]
    assert len(convs) == 5 and all("laid out ahead" in line for line in convs), convs
    for got, want in zip(jax.tree_util.tree_leaves(r.value),
                         jax.tree_util.tree_leaves(t.run(backend="reference").value)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _diag_mask_sum(x: jax.Array) -> jax.Array:
    """A value that depends on no parameter (a mask from two iotas) read by a kernel."""
    n = x.shape[0]
    return jnp.sum(x * jnp.eye(n) + jnp.diagonal(x)[:, None] * jnp.tri(n), -1)


def test_values_that_depend_on_no_parameter_are_computed_when_the_program_is_made() -> None:
    x = _f32(12, 12)
    t = gx.explore(_diag_mask_sum, x)
    p = generate(t.final.graph, CpuInterpreter)
    ahead = [x for x in p.source.splitlines() if "computed when the program was made" in x]
    assert any("= iota" in x for x in ahead), p.source
    # the function reads them by their module-level names and never deletes them
    names = [x.split(": ")[-1].split(",")[0] for x in ahead]
    body = p.source[p.source.index("def program("):]
    code = [x.strip() for x in body.splitlines() if not x.strip().startswith("#")]
    assert any(n in x for n in names for x in code if " = " in x), body
    dels = [v.strip() for x in code if x.startswith("del ") for v in x[4:].split(",")]
    assert not set(dels) & set(names), body
    want = np.sum(x * np.eye(12) + np.diagonal(x)[:, None] * np.tri(12), -1)
    for _ in range(3):  # a kernel never writes over a value computed ahead
        np.testing.assert_allclose(p.fn(x)[0], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gx.compile(_diag_mask_sum, backend="cpu")(x), want,
                               rtol=1e-5, atol=1e-6)


def test_outputs_and_large_values_are_computed_on_every_call() -> None:
    big = 1 << 15  # an iota of 128 KiB: over FOLD_BYTES

    def f(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jnp.arange(8.0) * 2, x + jnp.arange(big, dtype=jnp.float32)

    x = _f32(big)
    t = gx.explore(f, x)
    p = generate(t.final.graph, CpuInterpreter)
    ahead = [x for x in p.source.splitlines() if "computed when the program was made" in x]
    assert ahead and not any(f"({big},)" in x for x in ahead), p.source  # the small iota only
    assert f"ops.iota(dtype='f32', shape=({big},)" in p.source  # the large one on every call
    assert len([x for x in ahead if "= mul" in x]) == 0  # the output itself on every call
    a, _ = p.fn(x)
    b, _ = p.fn(x)
    assert a is not b and a.flags.writeable  # a caller's result is its own
    np.testing.assert_array_equal(a, np.arange(8.0, dtype=np.float32) * 2)


@pytest.mark.parametrize("name", ["diagonal", "permutation", "fill", "clip", "bf16"])
def test_a_gather_at_indices_computed_ahead_is_laid_out_when_the_program_is_made(name: str) -> None:
    perm = np.array([3, 0, 2, 1, 5, 4])
    out_of_bounds = np.array([[0, 1], [5, 2], [-1, 0], [7, 9], [2, 2]])
    fns = {
        "diagonal": lambda x: jnp.diagonal(x) * 2.0,
        "permutation": lambda x: x[perm] + 1.0,
        "fill": lambda x: x.at[out_of_bounds[:, 0], out_of_bounds[:, 1]].get(
            mode="fill", fill_value=-7.0) * 3.0,
        "clip": lambda x: x.at[out_of_bounds[:, 0], out_of_bounds[:, 1]].get(mode="clip") - 1.0,
        "bf16": lambda x: x.astype(jnp.bfloat16)[perm].astype(jnp.float32),
    }
    x = _f32(6, 6)
    fn = fns[name]
    t = gx.explore(fn, x)
    p = generate(t.final.graph, CpuInterpreter)
    assert "# indices laid out ahead" in p.source, p.source
    want = np.asarray(fn(jnp.asarray(x)))
    for _ in range(2):
        np.testing.assert_allclose(p.fn(x)[0], want, rtol=1e-6)


def test_cholesky_and_triangular_solves_call_lapack_laid_out_ahead() -> None:
    """backends/cpu/lapack.py: potrf and trtrs looked up when the program is made give the
    op rows' references bit for bit on every side, triangle, transpose, unit diagonal,
    element type and memory order; a failure LAPACK reports runs the reference (NaNs for a
    matrix that is not positive definite, SciPy's error for a singular triangle); batches
    keep the reference; a GP gradient's program calls them."""
    import scipy.linalg as sla

    from explorer.backends.cpu import lapack
    from explorer.ir.graph import Attrs, TensorType

    rng = np.random.default_rng(3)
    for dtype, name in ((np.float32, "f32"), (np.float64, "f64")):
        a = rng.standard_normal((6, 6)).astype(dtype)
        spd = a @ a.T + 6 * np.eye(6, dtype=dtype)
        chol = lapack.prepare_cholesky([TensorType((6, 6), name)], Attrs({}))
        for m in (spd, np.asfortranarray(spd)):
            assert np.array_equal(chol(m), OPS["cholesky"].ref(m))
        bad = -spd
        assert np.isnan(chol(bad)).all() and np.isnan(OPS["cholesky"].ref(bad)).all()
        tri = np.tril(a) + 3 * np.eye(6, dtype=dtype)
        for left in (True, False):
            b = rng.standard_normal((6, 4) if left else (4, 6)).astype(dtype)
            for lower, transpose_a, unit in ((True, False, False), (True, True, False),
                                             (False, False, True), (False, True, True)):
                attrs = dict(left_side=left, lower=lower, transpose_a=transpose_a,
                             conjugate_a=False, unit_diagonal=unit)
                t = tri if lower else tri.T.copy()
                solve = lapack.prepare_triangular_solve(
                    [TensorType((6, 6), name), TensorType(b.shape, name)], Attrs(attrs))
                for tt, bb in ((t, b), (np.asfortranarray(t), b), (t, np.asfortranarray(b))):
                    got, want = solve(tt, bb), OPS["triangular_solve"].ref(tt, bb, **attrs)
                    assert got.dtype == want.dtype and np.array_equal(got, want), attrs
        singular = tri.copy()
        singular[2, 2] = 0
        attrs = dict(left_side=True, lower=True, transpose_a=False, conjugate_a=False,
                     unit_diagonal=False)
        solve = lapack.prepare_triangular_solve([TensorType((6, 6), name)] * 2, Attrs(attrs))
        with pytest.raises(sla.LinAlgError):
            solve(singular, tri)
    assert lapack.prepare_cholesky([TensorType((2, 6, 6), "f32")], Attrs({})) is None
    assert lapack.prepare_cholesky([TensorType((6, 6), "bf16")], Attrs({})) is None
    from tests.corpora.zoo import zoo

    fn, args = zoo()["gp_grad"]
    t = gx.explore(fn, *args)
    r = t.run(backend="cpu")
    calls = [line for line in r.program.splitlines() if line.lstrip().startswith("v")
             and ("cholesky" in line or "triangular_solve" in line)]
    assert len(calls) == 5 and all("laid out ahead" in line for line in calls), calls
    for got, want in zip(jax.tree_util.tree_leaves(r.value),
                         jax.tree_util.tree_leaves(t.run(backend="reference").value)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
