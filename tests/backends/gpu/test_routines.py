"""Convolutions, pooling, gathers, scatters, pads and concatenations as generated CUDA in the
GPU program (backends/gpu/routines.py), where there is no GPU: each routine's CUDA compiled
for the host (tests/backends/cuda_host.py) and launched through the routine's own code with
NumPy standing in for CuPy. Here: the whole zoo's GPU programs (old zoo and wide zoo) with the
routines, equal to the reference, and with no reference line left for any of those ops; the
program's line names the method; an op without a CUDA form keeps its reference line with a
note; every routine compiles under NVRTC. Each routine's own edge cases: test_conv.py,
test_window.py, test_indexing.py, test_shape_ops.py."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference, registry
from explorer.backends.gpu import routine_table, routines
from explorer.backends.gpu.cuda_dialect import RAW_MODULE_OPTIONS
from explorer.backends.gpu.program import generate_program
from explorer.backends.program_writer import ident
from explorer.backends.reference import NumpyInterpreter
from explorer.ir import dtypes
from explorer.ir.graph import Attrs, TensorType
from explorer.ir.ops import OPS
from tests.backends.cuda_host import build_module, host_call, host_compiler
from tests.backends.gpu.test_nvrtc import REASON, compile_ptx
from tests.backends.gpu.test_program import HostKernel
from tests.corpora.wide import wide
from tests.corpora.zoo import zoo
from tests.passes.semantic import assert_outputs_close

pytestmark = pytest.mark.skipif(host_compiler() is None, reason="no g++ to build the host kernels")

THREADS = 64  # the host's block (routines' kernels are grid-stride loops: any block size)
ROUTINE_OPS = ("conv_general_dilated", "reduce_window_sum", "reduce_window_max",
               "reduce_window_min", "select_and_scatter_add", "select_and_gather_add", "gather",
               "scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max", "pad",
               "concatenate")
PROGRAMS = {**zoo(), **{f"wide {k}": v for k, v in wide("small").items()}}


def host_launcher(source: str) -> routines.Call:
    return host_call(build_module(source), THREADS)


def routine_of(op: str, ins: Sequence[np.ndarray], attrs: dict) -> routines.Routine | str:
    types = [TensorType(x.shape, dtypes.from_numpy(x.dtype)) for x in ins]
    out = OPS[op].infer(types, Attrs(attrs))
    r = routine_table.prepare(op, types, out, Attrs(attrs))
    assert r is not None
    return r


def check_op(op: str, ins: Sequence[np.ndarray], attrs: dict, how: str = "") -> np.ndarray:
    """The op's routine on the host against its reference (exactly for everything but float
    sums); returns the routine's result."""
    r = routine_of(op, ins, attrs)
    assert isinstance(r, routines.Routine), r
    assert how in r.how
    with np.errstate(all="ignore"):
        want = np.asarray(OPS[op].ref(*ins, **attrs))
        got = r.bind(np, host_launcher)(*ins)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    assert_outputs_close([want], [got], op)
    return got


def gpu_program(fn: Callable[..., Any], *args: Any, launcher: Any = host_launcher) -> tuple:
    t = gx.explore(fn, *args)
    g = t.final.graph
    program = generate_program(g, np, HostKernel, NumpyInterpreter, launcher)
    return g, program, reference.check_args(g, t.flat_args(args))


def run_against_reference(fn: Callable[..., Any], *args: Any) -> str:
    """The GPU program of `fn` with the routines, equal to the reference; its source."""
    g, program, flat = gpu_program(fn, *args)
    with np.errstate(all="ignore"):
        assert_outputs_close(reference.evaluate(g, flat), program.fn(*flat), "program")
    return program.source


def reference_lines(source: str) -> dict[str, int]:
    """`ops.X` calls of the program's entry (not its measured twin), by op."""
    entry = source.split("def program_measured")[0]
    out: dict[str, int] = {}
    for name in re.findall(r"ops\.(\w+)\(", entry):
        out[name] = out.get(name, 0) + 1
    return out


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_zoo_runs_its_convolutions_pooling_and_indexing_as_generated_cuda(name: str) -> None:
    fn, args = PROGRAMS[name]
    g, program, flat = gpu_program(fn, *args)
    with np.errstate(all="ignore"):
        assert_outputs_close(reference.evaluate(g, flat), program.fn(*flat), name)
    left = reference_lines(program.source)
    routed = {o.replace("-", "_") for o in ROUTINE_OPS}
    assert not routed & set(left), f"{name}: reference lines left: {left}"
    entry = program.source.split("def program_measured")[0]
    for n in g.nodes:
        if n.op in ROUTINE_OPS:  # its line calls the routine, or it was computed ahead
            head, line = entry.split(f"# %{n.id} = {n.op}")[1].split("\n")[:2]
            assert head.endswith("program was made") or re.search(
                rf"= as_\w+\({re.escape(ident(n.op))}_\w+\(.*\)\)  # (generated CUDA|direct|im2col)",
                line), (name, head, line)


def test_the_zoo_programs_have_fewer_reference_lines_than_without_the_routines() -> None:
    """The count the issue asks for: with the routines, the zoo's GPU programs keep no
    reference line for convolutions, pooling, gathers, scatters, pads or concatenations (38
    convolutions, 11 gathers, 13 scatter-adds, 3 poolings, 2 pooling gradients, 52 pads and
    13 concatenations before, over the whole zoo)."""
    before: dict[str, int] = {}
    after: dict[str, int] = {}
    for name in ("cnn_grad", "gpt_grad", "gp_grad", "wide unet", "wide gnn", "wide ssm"):
        fn, args = next(v for k, v in PROGRAMS.items() if k.startswith(name))
        t = gx.explore(fn, *args)
        for launcher, into in ((None, before), (host_launcher, after)):
            source = generate_program(t.final.graph, np, HostKernel, NumpyInterpreter,
                                      launcher).source
            for op, k in reference_lines(source).items():
                into[op] = into.get(op, 0) + k
    routed = {o.replace("-", "_") for o in ROUTINE_OPS}
    assert sum(k for op, k in before.items() if op in routed) >= 20
    assert sum(k for op, k in after.items() if op in routed) == 0
    assert sum(after.values()) < sum(before.values())


def test_an_op_without_a_cuda_form_keeps_its_reference_line_with_a_note() -> None:
    import jax
    import jax.numpy as jnp

    x = np.arange(12, dtype=np.float32).reshape(4, 3) > 5  # bools: no CUDA gather here
    src = run_against_reference(lambda x, i: x[i], x, np.array([2, 0, 3], np.int32))
    assert "ops.gather(" in src
    assert re.search(r"reference on device arrays: gather %\d+ .*\(a gather of bools", src)
    y = np.random.default_rng(0).standard_normal((2, 6, 6, 3)).astype(np.float16)
    src = run_against_reference(lambda y: jax.lax.reduce_window(
        y, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"), y)  # f16: no CUDA form
    assert "ops.reduce_window_max(" in src
    assert re.search(r"reference on device arrays: reduce_window_max %\d+ .*f16", src)


def test_a_program_without_a_launcher_keeps_the_references() -> None:
    fn, args = PROGRAMS["cnn"]
    _, program, _ = gpu_program(fn, *args, launcher=None)
    assert "ops.conv_general_dilated(" in program.source
    assert "# im2col" not in program.source and "# direct" not in program.source


def test_a_routine_module_is_built_once_and_only_when_called() -> None:
    built: list[str] = []

    def launcher(source: str) -> routines.Call:
        built.append(source)
        return host_launcher(source)

    r = routine_of("gather", [np.ones((5, 4), np.float32), np.zeros((3, 1), np.int32)],
                   {"offset_dims": (1,), "collapsed_slice_dims": (0,), "start_index_map": (0,),
                    "slice_sizes": (1, 4), "mode": "clip"})
    assert isinstance(r, routines.Routine)
    fn = r.bind(np, launcher)
    assert built == []
    for _ in range(3):
        fn(np.ones((5, 4), np.float32), np.array([[1], [7], [-2]], np.int32))
    assert len(built) == 1 and fn.how == r.how and "__global__ void gather" in fn.source


def test_prepare_leaves_other_ops_alone() -> None:
    t = TensorType((3,), "f32")
    assert routine_table.prepare("add", [t, t], t, Attrs({})) is None


def _routines_of(g: Any) -> list[routines.Routine]:
    """The routines of every node of `g` and of the bodies under it."""
    out = []
    for n in g.nodes:
        for key in ("body", "cond"):
            if key in n.attrs and hasattr(n.attrs[key], "nodes"):
                out += _routines_of(n.attrs[key])
        for b in n.attrs.get("branches") or ():
            out += _routines_of(b)
        r = routine_table.prepare(n.op, [g[i].type for i in n.inputs], n.type, n.attrs)
        if isinstance(r, routines.Routine):
            out.append(r)
    return out


@pytest.mark.skipif(REASON is not None, reason=str(REASON))
def test_every_routine_of_the_zoo_compiles_under_nvrtc() -> None:
    from explorer.backends.gpu import conv

    sources = {}
    for fn, args in PROGRAMS.values():
        for r in _routines_of(gx.explore(fn, *args).final.graph):
            sources[r.source] = r
    ins, attrs = OPS["conv_general_dilated"].sample(np.random.default_rng(1))
    for m in ("direct", "im2col + cuBLAS"):  # both methods, whatever the zoo's shapes chose
        conv_method, conv.method = conv.method, lambda *a, m=m: m
        try:
            r = routine_of("conv_general_dilated", ins, attrs)
        finally:
            conv.method = conv_method
        sources[r.source] = r
    assert len(sources) >= 20
    for source, r in sources.items():
        assert compile_ptx(source, RAW_MODULE_OPTIONS) is None, (
            f"{r.op} ({r.how}):\n{compile_ptx(source, RAW_MODULE_OPTIONS)}")


def test_the_cupy_launcher_builds_each_module_once_and_launches_its_blocks() -> None:
    """CuPy's side, with a stand-in RawModule: one module per source, compiled with the
    backend's options, each launch THREADS-thread blocks with the arrays as arguments."""
    made: list[tuple[str, tuple]] = []
    launched: list[tuple] = []

    class RawModule:
        def __init__(self, code: str, options: tuple) -> None:
            made.append((code, options))

        def get_function(self, name: str) -> Any:
            return lambda grid, block, args: launched.append((name, grid, block, len(args)))

    launcher = routines.cupy_launcher(type("cupy", (), {"RawModule": RawModule}))
    for _ in range(2):
        launcher("// a")("k", (3,), [np.ones(2), np.ones(2)])
    launcher("// b")("k", (1, 2), [np.ones(2)])
    assert [m[0] for m in made] == ["// a", "// b"] and "--fmad=false" in made[0][1]
    assert launched == [("k", (3,), (routines.THREADS,), 2)] * 2 + [("k", (1, 2), (routines.THREADS,), 1)]


GPU_REASON = registry.unavailable_reason("gpu")


@pytest.mark.skipif(GPU_REASON is not None, reason=f"GPU backend unavailable: {GPU_REASON}")
@pytest.mark.parametrize("op", ROUTINE_OPS)
def test_every_routine_on_the_device_matches_the_reference(op: str) -> None:
    """On a GPU: the rows' samples through CuPy's RawModule and cuBLAS."""
    import cupy as cp

    for seed in range(4):
        ins, attrs = OPS[op].sample(np.random.default_rng(seed))
        r = routine_of(op, ins, attrs)
        assert isinstance(r, routines.Routine), r
        with np.errstate(all="ignore"):
            want = np.asarray(OPS[op].ref(*ins, **attrs))
        got = r.bind(cp, routines.cupy_launcher(cp))(*[cp.asarray(x) for x in ins])
        assert_outputs_close([want], [cp.asnumpy(got)], f"{op} seed {seed}")
