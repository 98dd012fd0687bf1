"""The GPU backend's whole-stage program (backends/gpu/program.py), generated and run where
there is no GPU: NumPy stands in for CuPy as the array module, the grid reductions and row
kernels run as their CUDA compiled for the host (tests/backends/cuda_host.py), and the
kernels only CuPy can build (its elementwise and reduction kernels, cuBLAS epilogues) run on
the reference interpreter. What this checks is the program itself: one line per node in
schedule order, the kernels in order, control flow through the drivers on device
allocations, split loops on the interpreter, each value dropped after its last use, and the
results of the zoo and the wide zoo (tests/corpora/wide.py) equal to the reference
interpreter's. On a GPU, tests/backends/gpu/test_backend.py
runs the same programs with CuPy."""

from __future__ import annotations

import re
from typing import Any

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference
from explorer.backends.codegen.kernel_plan import PlanError
from explorer.backends.gpu import reduce
from explorer.backends.gpu.backend import kernel_code
from explorer.backends.gpu.program import device_op, generate_program
from explorer.backends.reference import NumpyInterpreter
from explorer.ir import Node
from explorer.ir.ops import OPS
from tests.backends.cuda_host import build_module, host_call, host_compiler
from tests.corpora.wide import wide
from tests.corpora.zoo import zoo
from tests.passes.semantic import assert_outputs_close

pytestmark = pytest.mark.skipif(host_compiler() is None, reason="no g++ to build the host kernels")

ZOO = zoo()
PROGRAMS = {**ZOO, **{f"wide/{k}": v for k, v in wide("small").items()}}


class HostKernel:
    """A fused kernel of a GPU program, on the host: a grid reduction or row kernel as its
    CUDA; any other kind by the reference interpreter (CuPy builds those)."""

    cuda_launches = 0
    in_place: frozenset[int] = frozenset()  # (never writes over an input)

    def __init__(self, node: Node, name: str) -> None:
        self.name, self.body, self.seconds, self.timed, self.reason = \
            name, node.attrs["body"], 0.0, False, ""
        try:
            self.code = None if node.attrs.get("kind") == "output" else kernel_code(self.body, "k")
        except PlanError as e:
            self.code, self.reason = None, str(e)

    def __call__(self, vals: list[Any]) -> Any:
        code = self.code
        if isinstance(code, reduce.GpuRowCode) or (isinstance(code, reduce.GpuGridCode)
                                                   and code.then is None):
            HostKernel.cuda_launches += 1
            return reduce.launch(code, [np.ascontiguousarray(v) for v in vals], np,
                                 host_call(build_module(code.source), 64))
        with np.errstate(all="ignore"):
            return reference.evaluate(self.body, list(vals))[0]


def _program(name: str) -> tuple[Any, Any, list[np.ndarray]]:
    fn, args = PROGRAMS[name]
    t = gx.explore(fn, *args)
    g = t.final.graph
    return t, generate_program(g, np, HostKernel, NumpyInterpreter), t.flat_args(args)


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_zoo_runs_as_one_gpu_program_with_the_reference_results(name: str) -> None:
    t, program, flat = _program(name)
    g = t.final.graph
    prepared = reference.check_args(g, flat)
    with np.errstate(all="ignore"):
        want = reference.evaluate(g, prepared)
        got = program.fn(*prepared)
    assert_outputs_close(want, got, name)
    if name.startswith("wide/"):  # and jax.jit's (the zoo's are, by tests/test_zoo.py's)
        fn, args = PROGRAMS[name]
        assert_outputs_close(jax.tree_util.tree_leaves(jax.jit(fn)(*args)), got, name,
                             min_tolerance=2e-4)
    text = program.source
    assert text.startswith('"""The generated program of @') and "GPU backend" in text
    top = [n for n in g.nodes if n.op != "parameter"]
    assert all(f"# %{n.id} = {n.op}" in text for n in top), name
    assert "numba" not in text  # (loops run their drivers, kernels are CUDA)
    # (constants go to the device once, when the program is made)
    assert not re.search(r"v\d+ = \w+\(ops\.constant\(", text), name
    assert "laid out ahead" not in text  # (the CPU program's host loops and LAPACK calls)
    ahead = {n.id for n in top if f"# %{n.id} = {n.op}" in text and
             text.split(f"# %{n.id} = {n.op}")[1].split("\n")[0].endswith("program was made")}
    kernels = [n for n in g.nodes if n.op == "kernel" and n.id not in ahead]
    assert len([k for k in program.kernels if isinstance(k, HostKernel)]) >= len(kernels)


def test_a_gpt_block_launches_its_softmax_and_layer_norm_as_cuda_row_kernels() -> None:
    before = HostKernel.cuda_launches
    t, program, flat = _program("gpt_block")
    with np.errstate(all="ignore"):
        program.fn(*reference.check_args(t.final.graph, flat))
    assert HostKernel.cuda_launches - before >= 3  # (attention softmax and two layer norms)
    assert "matmul(" in program.source


def test_scans_run_the_driver_with_device_allocations() -> None:
    _, program, _ = _program("rnn_scan")
    assert "control_flow.run_scan(" in program.source
    assert program.control_flow == []  # no scan compiled whole on the GPU


def test_the_measured_twin_reports_every_top_level_node() -> None:
    t, program, flat = _program("cnn")
    seen: list[int] = []
    with np.errstate(all="ignore"):
        program.measured(*reference.check_args(t.final.graph, flat), lambda n, v: seen.append(n.id))
    assert seen == [n.id for n in t.final.graph.nodes if n.op != "parameter"]


def test_a_split_loop_stays_with_the_interpreter_and_says_so() -> None:
    import jax.numpy as jnp

    x = np.random.default_rng(0).standard_normal((512, 64)).astype(np.float32)
    t = gx.explore(lambda x: jnp.exp(x @ x.T).sum(1), x, memory_limit="256KiB")
    assert "loop" in t.final.graph.ops()
    program = generate_program(t.final.graph, np, HostKernel, NumpyInterpreter)
    assert "the interpreter core runs this node" in program.source
    assert any(n.startswith("interpreted: loop") for n in program.notes)
    with np.errstate(all="ignore"):
        got = program.fn(x)
    assert_outputs_close(reference.evaluate(t.final.graph, [x]), got, "split")


def test_an_op_the_device_lacks_runs_on_the_host_and_comes_back() -> None:
    """device_op over a stand-in array module whose arrays the reference cannot take."""

    class Device(np.ndarray):
        pass

    class xp:  # noqa: N801  (a module's name)
        ndarray = Device

        @staticmethod
        def asnumpy(v: Any) -> np.ndarray:
            return np.asarray(v).view(np.ndarray)

        @staticmethod
        def asarray(v: Any) -> Any:
            return np.asarray(v).view(Device)

    def ref(x: Any) -> Any:
        if isinstance(x, Device):
            raise TypeError("not on this device")
        return np.exp(x)

    out = device_op(ref, xp)(np.ones(3).view(Device))
    assert isinstance(out, Device) and np.allclose(out, np.e)
    assert device_op(OPS["add"].ref, np)(np.ones(2), np.ones(2)).tolist() == [2.0, 2.0]
