"""The GPU backend's grid reductions and row kernels (backends/gpu/reduce.py), run where there
is no GPU: their CUDA source compiled as C++ for the host, each block's threads running as
threads with barriers for `__syncthreads` and the warp shuffles (tests/backends/cuda_host.py),
launched through the backend's own `reduce.launch` with the grid the GPU would get. Results
must be the reference interpreter's: full reductions of 0 to 10^7 elements with NaN, +-inf
and empty inputs, row reductions wider than a block, and every row kernel of the CPU's
row-kernel programs (softmax, log-softmax, layer norm, cross-entropy). Where nvcc is
installed the same sources compile for the device; on a GPU, tests/backends/gpu/test_backend.py
runs them."""

from __future__ import annotations

import math
import shutil
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference
from explorer.backends.codegen.kernel_plan import KernelPlan, PlanError, RowPlan, plan_any
from explorer.backends.gpu import reduce
from explorer.backends.gpu.backend import kernel_code
from explorer.ir import Graph
from explorer.measure.inputs import random_inputs
from tests.backends.conftest import PROGRAMS, explore, kernels_of
from tests.backends.cpu import test_kernel_codegen as cpu_rows
from tests.backends.cuda_host import build_module, host_call, host_compiler, nvcc_ptx
from tests.backends.gpu.test_mapreduce import PROGRAMS as MEMORY_PROGRAMS
from tests.backends.gpu.test_mapreduce import _explored
from tests.passes.semantic import assert_outputs_close

pytestmark = pytest.mark.skipif(host_compiler() is None, reason="no g++ to build the host kernels")

THREADS = 64  # the host's block (a multiple of the warp; the GPU launches reduce.THREADS)


def _code(body: Graph, grid: bool = True) -> Any:
    """The body's grid reduction (forced, for a one-reduction kernel of any size: the GPU
    uses it above a block's worth) or row kernel."""
    plan = plan_any(body)
    if isinstance(plan, RowPlan):
        return reduce.generate_rows(plan, "k")
    assert isinstance(plan, KernelPlan) and plan.reduce is not None
    return reduce.generate_grid(plan, "k") if grid else kernel_code(body, "k")


def host_run(body: Graph, args: list[np.ndarray], threads: int = THREADS) -> tuple[np.ndarray, Any]:
    """The kernel's output on the host, and its code. A grid reduction whose epilogue reads
    an input (`then`, a CuPy elementwise kernel) returns the reduced value."""
    code = _code(body)
    out = reduce.launch(code, [np.ascontiguousarray(a) for a in args], np,
                        host_call(build_module(code.source), threads))
    return out, code


def want_of(body: Graph, args: list[np.ndarray], code: Any) -> np.ndarray:
    """The reference's value of what the kernel computes (the reduced value, when `then`
    finishes the epilogue)."""
    if getattr(code, "then", None) is not None:
        plan = plan_any(body)
        assert isinstance(plan, KernelPlan) and plan.reduce is not None
        body = Graph(body.nodes, body.params, (plan.reduce.id,), body.name)
    with np.errstate(all="ignore"):
        return np.asarray(reference.evaluate(body, args)[0])


def _close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, what
    assert_outputs_close([want], [got], what)


def _reduced_kernels(name: str) -> list[Any]:
    t, args = explore(name)
    out = []
    for k in kernels_of(t.final.graph):
        plan = plan_any(k.attrs["body"])
        if isinstance(plan, RowPlan) or plan.reduce is not None:
            out.append((k, args))
    return out


def _kernel_args(g: Graph, args: list[np.ndarray], node: Any) -> list[np.ndarray]:
    """The values kernel `node` of graph `g` reads, from the reference run of `g`."""
    seen: dict[int, Any] = {}
    interp = reference.NumpyInterpreter(g)
    prepared = interp.prepare(args)
    seen.update(zip(g.params, prepared))
    with np.errstate(all="ignore"):
        interp.evaluate(prepared, lambda n, v: seen.__setitem__(n.id, v))
    return [np.asarray(seen[i]) for i in node.inputs]


def _reducing(g: Graph) -> list[Any]:
    """The kernels of `g` that reduce (an output fusion's dot is cuBLAS's)."""
    out = []
    for k in kernels_of(g):
        try:
            p = plan_any(k.attrs["body"])
        except PlanError:
            continue
        if isinstance(p, RowPlan) or p.reduce is not None:
            out.append(k)
    return out


@pytest.mark.parametrize("name", [n for n in PROGRAMS if _reducing(explore(n)[0].final.graph)])
def test_every_reducing_kernel_of_the_backend_programs_as_a_grid_reduction(name: str) -> None:
    t, args = explore(name)
    for k in _reducing(t.final.graph):
        ins, body = _kernel_args(t.final.graph, args, k), k.attrs["body"]
        got, code = host_run(body, ins)
        _close(got, want_of(body, ins, code), f"{name}: {body.name}")


def _kernels_anywhere(g: Graph) -> list[Any]:
    """The kernels of `g` and of every body under it (split loops' pre and post parts)."""
    out = []
    for n in g.nodes:
        if n.op == "kernel":
            out.append(n)
        for v in n.attrs.values():
            for body in (v if isinstance(v, list | tuple) else (v,)):
                if isinstance(body, Graph) and n.op != "kernel":
                    out += _kernels_anywhere(body)
    return out


def _random_args(body: Graph, rng: np.random.Generator) -> list[np.ndarray]:
    return random_inputs(body, rng)


@pytest.mark.parametrize("key", list(MEMORY_PROGRAMS))
def test_the_memory_programs_reducing_kernels_as_grid_reductions(key: str) -> None:
    """Every reducing kernel of the programs that test the map-reduce kernels (at the top
    level and in split bodies), forced into the grid form, on random inputs."""
    tr, _ = _explored(key)
    rng = np.random.default_rng(0)
    ran = 0
    for k in _kernels_anywhere(tr.final.graph):
        body = k.attrs["body"]
        try:
            plan = plan_any(body)
        except PlanError:
            continue
        if not (isinstance(plan, RowPlan) or plan.reduce is not None) or \
                math.prod(plan.loop_shape if isinstance(plan, KernelPlan) else plan.shape) > 2**20:
            continue
        ins = _random_args(body, rng)
        got, code = host_run(body, ins)
        _close(got, want_of(body, ins, code), f"{key}: {body.name}")
        ran += 1
    if not ran:
        pytest.skip("no reducing kernel in this program's stages")


def _full(op: str, x: np.ndarray) -> Graph:
    """The kernel of a full reduction with a prologue (a lone reduction is no kernel: the
    GPU backend runs it through CuPy's own)."""
    fn = {"sum": lambda x: jnp.sum(x * 1.5), "mean": lambda x: jnp.mean(x * 2),
          "max": lambda x: jnp.max(x * 1.5, initial=-jnp.inf),
          "min": lambda x: jnp.min(x + 0.5, initial=jnp.inf),
          "sumsq": lambda x: jnp.sum(x * x + 1)}[op]
    t = gx.explore(fn, x, pipeline=["fuse"])
    (k,) = kernels_of(t.final.graph)
    return k.attrs["body"]


SIZES = (0, 1, 31, 32, 33, 255, 256, 257, 1000, 4099, 100_000)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("op", ["sum", "max", "min", "sumsq"])
def test_full_reductions_of_every_size_with_nan_and_infinities(size: int, op: str) -> None:
    r = np.random.default_rng(size)
    for fill in (None, np.nan, np.inf, -np.inf):
        x = r.standard_normal(size).astype(np.float32)
        if fill is not None and size:
            x[r.integers(0, size)] = fill
        body = _full(op, x)
        got, code = host_run(body, [x])
        _close(got, want_of(body, [x], code), f"{op} of {size} with {fill}")
        if size > reduce.THREADS * reduce.PER_THREAD:
            assert code.parts > 1 and "_combine" in code.source


def test_ten_million_elements_fold_through_many_blocks_and_a_second_pass() -> None:
    x = np.random.default_rng(7).standard_normal(10_000_000).astype(np.float32)
    x[123_456] = np.inf
    body = _full("mean", x)
    got, code = host_run(body, [x])
    assert code.parts == reduce.MAX_BLOCKS
    _close(got, want_of(body, [x], code), "mean of 10^7")
    y = x.copy()
    y[9_999_999] = np.nan
    got, code = host_run(_full("max", y), [y])
    assert np.isnan(got)


def test_integer_and_boolean_folds() -> None:
    r = np.random.default_rng(3)
    i = r.integers(-2**31, 2**31 - 1, 5000, dtype=np.int64).astype(np.int32)
    for fn in (jnp.sum, jnp.max, jnp.min):
        t = gx.explore(lambda x, fn=fn: fn(x * 3 - 1), i, pipeline=["fuse"])
        (k,) = kernels_of(t.final.graph)
        got, code = host_run(k.attrs["body"], [i])
        _close(got, want_of(k.attrs["body"], [i], code), f"{fn.__name__} of int32")
    b = r.standard_normal(3000).astype(np.float32)
    for fn in (jnp.any, jnp.all):
        t = gx.explore(lambda x, fn=fn: fn(x > -3.5), b, pipeline=["fuse"])
        (k,) = kernels_of(t.final.graph)
        got, code = host_run(k.attrs["body"], [b])
        _close(got, want_of(k.attrs["body"], [b], code), fn.__name__)


@pytest.mark.parametrize(("shape", "axis"), [((600, 2, 5), 0), ((2, 600, 5), 1),
                                             ((30, 3, 20), (0, 2)), ((3, 2, 700), 2)])
def test_reductions_over_any_axes_wider_than_a_block(shape: tuple[int, ...], axis: Any) -> None:
    """Several results, each folding more than a block's worth, over leading, middle, split
    and trailing axes (the offsets then come from each axis's index)."""
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    x[1, 1, 1] = np.nan
    b = np.random.default_rng(2).standard_normal(shape[-1]).astype(np.float32)
    t = gx.explore(lambda x, b: jnp.sum(jnp.tanh(x) * b, axis=axis) * 0.5, x, b, pipeline=["fuse"])
    (k,) = kernels_of(t.final.graph)
    body = k.attrs["body"]
    got, code = host_run(body, [x, b])
    # (a trailing axis with the input broadcast at rank 3 plans as a row kernel, one block
    # per row: also a reduction wider than a block)
    assert isinstance(code, reduce.GpuGridCode if axis != 2 else reduce.GpuRowCode)
    _close(got, want_of(body, [x, b], code), f"axis {axis}")


@pytest.mark.parametrize(("shape", "axis", "threads"), [
    ((3000, 64), 0, THREADS), ((1000, 70), 0, reduce.THREADS), ((300, 9), 0, THREADS),
    ((7, 400, 33), 1, THREADS), ((40, 30, 16), (0, 1), THREADS), ((257, 8), 0, 32)])
def test_column_reductions_read_coalesced_with_threads_across_the_kept_axis(
        shape: tuple[int, ...], axis: Any, threads: int) -> None:
    """A grid reduction that keeps the innermost axis (sums over axis 0 of a (10^6, 64)
    array) takes the column layout: a warp's lanes on 32 consecutive results, so each of its
    loads is one contiguous run of a row; results not a multiple of 32, several partials per
    result, NaN and infinities, and the reference's values."""
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    x.flat[5] = np.nan
    x.flat[-3] = np.inf
    for fn in (lambda x: jnp.sum(jnp.tanh(x), axis=axis), lambda x: jnp.max(x * 2, axis=axis),
               lambda x: jnp.mean(x, axis=axis)):
        t = gx.explore(fn, x, pipeline=["fuse"])
        (k,) = kernels_of(t.final.graph)
        body = k.attrs["body"]
        got, code = host_run(body, [x], threads)
        assert code.kind == "columns" and "coalesced" in reduce.listing(code)
        assert "o = (long)blockIdx.x * 32 + lane" in code.source
        _close(got, want_of(body, [x], code), f"{shape} over {axis}")


def test_an_epilogue_reading_an_input_runs_after_the_grid_as_a_second_kernel() -> None:
    x = np.random.default_rng(4).standard_normal((6, 3000)).astype(np.float32)
    d = np.random.default_rng(5).standard_normal(6).astype(np.float32)
    t = gx.explore(lambda x, d: x.sum(1) / d, x, d, pipeline=["fuse"])
    (k,) = kernels_of(t.final.graph)
    got, code = host_run(k.attrs["body"], [x, d])
    assert code.then is not None and code.then.kind == "elementwise"
    _close(got, want_of(k.attrs["body"], [x, d], code), "sum before the division")


def test_results_beyond_the_grid_limit_stride_over_the_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """More results than the grid's y dimension takes: blocks stride over them (the limit
    lowered to 3 here, so that the host runs it quickly)."""
    monkeypatch.setattr(reduce, "MAX_GRID_Y", 3)
    x = np.random.default_rng(6).standard_normal((11, 600)).astype(np.float32)
    t = gx.explore(lambda x: jnp.max(x * 1.5, 1), x, pipeline=["fuse"])
    (k,) = kernels_of(t.final.graph)
    got, code = host_run(k.attrs["body"], [x])
    _close(got, want_of(k.attrs["body"], [x], code), "11 results on a grid of 3")
    s = gx.explore(lambda x: jax.nn.softmax(x, -1), x)
    (k,) = kernels_of(s.final.graph)
    got, code = host_run(k.attrs["body"], [x])
    _close(got, want_of(k.attrs["body"], [x], code), "11 rows on a grid of 3")


@pytest.mark.parametrize("name", cpu_rows.PROGRAMS)
def test_row_kernels_run_one_block_per_row(name: str) -> None:
    fn, make, folds = cpu_rows.PROGRAMS[name]
    args = [np.asarray(a) for a in make()]
    t = gx.explore(fn, *args)
    ks = [k for k in kernels_of(t.final.graph) if isinstance(plan_any(k.attrs["body"]), RowPlan)]
    assert ks
    for k in ks:
        ins = _kernel_args(t.final.graph, args, k)
        got, code = host_run(k.attrs["body"], ins)
        assert isinstance(code, reduce.GpuRowCode)
        assert code.source.count("_block_reduce(a") == folds
        _close(got, want_of(k.attrs["body"], ins, code), name)


def _normalise(x: jax.Array) -> jax.Array:
    m = x.mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)


@pytest.mark.parametrize("fill", [np.nan, -np.inf, np.inf])
@pytest.mark.parametrize("threads", [THREADS, reduce.THREADS])
def test_rows_with_nan_and_infinities(fill: float, threads: int) -> None:
    x = np.random.default_rng(8).standard_normal((5, 700)).astype(np.float32)
    x[1, 3] = fill
    x[3, :] = fill
    for fn in (lambda x: jax.nn.softmax(x, -1), lambda x: jax.nn.logsumexp(x, -1),
               _normalise):
        t = gx.explore(fn, x)
        for k in _reducing(t.final.graph):
            ins = _kernel_args(t.final.graph, [x], k)
            got, code = host_run(k.attrs["body"], ins, threads)
            _close(got, want_of(k.attrs["body"], ins, code), f"{fill} at {threads} threads")


def test_the_backend_picks_the_form_by_size() -> None:
    small = gx.explore(lambda x: jnp.sum(x * 2), np.ones(256, np.float32), pipeline=["fuse"])
    big = gx.explore(lambda x: jnp.sum(x * 2), np.ones(257, np.float32), pipeline=["fuse"])
    rows = gx.explore(lambda x: jax.nn.softmax(x, -1), np.ones((4, 8), np.float32))
    kinds = [kernel_code(kernels_of(t.final.graph)[0].attrs["body"], "k").kind
             for t in (small, big, rows)]
    assert kinds == ["reduction", "grid", "rows"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc to compile for the device")
def test_the_sources_compile_for_the_device() -> None:
    x = np.ones((4, 3000), np.float32)
    for fn in (lambda x: (x * 2).sum(), lambda x: jax.nn.softmax(x, -1),
               lambda x: jnp.max(x * 2, 1)):
        (k,) = kernels_of(gx.explore(fn, x).final.graph)
        done = nvcc_ptx(_code(k.attrs["body"]).source)
        assert done.returncode == 0, done.stderr


def test_column_reductions_compile_under_nvrtc() -> None:
    from explorer.backends.gpu.cuda_dialect import RAW_MODULE_OPTIONS
    from tests.backends.gpu.test_nvrtc import REASON, compile_ptx

    if REASON is not None:
        pytest.skip(REASON)
    x = np.ones((5000, 64), np.float32)
    for fn in (lambda x: jnp.tanh(x).sum(0), lambda x: jnp.max(x, 0), lambda x: x.mean(0) / x[0]):
        (k,) = kernels_of(gx.explore(fn, x, pipeline=["fuse"]).final.graph)
        code = _code(k.attrs["body"])
        assert code.kind == "columns"
        log = compile_ptx(code.source, RAW_MODULE_OPTIONS)
        assert log is None, log
