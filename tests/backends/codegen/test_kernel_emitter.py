"""The one kernel emitter (backends/codegen/kernel_emitter.py): the same row plan walked in the
numba dialect (run by numba) and in the CUDA dialect (compiled for the host by
tests/backends/cuda_host.py), both against the reference interpreter; chains defined alike;
slices and pads of inputs read in place, in both dialects."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference
from explorer.backends.codegen.dialect import Block
from explorer.backends.codegen.kernel_emitter import emit_chain, read
from explorer.backends.codegen.kernel_plan import Access, KernelPlan, RowPlan, plan_any
from explorer.backends.cpu import kernel_codegen
from explorer.backends.cpu.kernels import load
from explorer.backends.cpu.numba_dialect import NUMBA
from explorer.backends.gpu import reduce
from explorer.backends.gpu.cuda_dialect import CUDA
from tests.backends.cuda_host import build_module, host_call, host_compiler


def _softmax_kernel() -> tuple[Any, list[np.ndarray]]:
    x = np.random.default_rng(2).standard_normal((9, 70)).astype(np.float32)
    x[3, 5] = np.nan
    g = gx.explore(lambda x: jax.nn.log_softmax(x, -1), x).final.graph
    (k,) = [n for n in g.nodes if n.op == "kernel"]
    return k.attrs["body"], [x]


def test_a_chain_is_the_same_definitions_in_both_dialects() -> None:
    body, _ = _softmax_kernel()
    nodes = [n for n in body.nodes if n.op not in ("parameter", "constant")
             and not n.op.startswith("reduce")]
    names = {}
    for d in (NUMBA, CUDA):
        b = Block(d)
        emit_chain(d, b, body, nodes, lambda i: f"v{i}")
        names[d.name] = [line.split(" = ")[0].split()[-1] for line in b.lines]
    assert names["numba"] == names["cuda"] and names["numba"]


@pytest.mark.skipif(host_compiler() is None, reason="no g++ to build the host kernels")
def test_one_row_walk_in_both_dialects_gives_the_reference_result() -> None:
    body, args = _softmax_kernel()
    plan = plan_any(body)
    assert isinstance(plan, RowPlan)
    with np.errstate(all="ignore"):
        want = np.asarray(reference.evaluate(body, args)[0])
    cuda = reduce.generate_rows(plan, "k")
    got_cuda = reduce.launch(cuda, args, np, host_call(build_module(cuda.source), 64))
    code = kernel_codegen.generate_rows(plan, "k")
    got_numba = np.empty(want.shape, want.dtype)
    load(code)(*args, got_numba, *(v for _, v in code.scalars))
    for got in (got_cuda, got_numba):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def _in_place_kernel(axis: int) -> tuple[Any, list[np.ndarray]]:
    """A reduction over a pad with interior padding (padding value -0.0) times a strided
    slice, plus a slice of a cropping pad: all read in place by one kernel. NaN and -0.0
    among the inputs."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 40)).astype(np.float32)
    y = rng.standard_normal((25, 40)).astype(np.float32)
    z = rng.standard_normal((25, 40)).astype(np.float32)
    x[2, 3], x[4, 7], y[3, 9] = np.nan, -0.0, np.inf
    fn = lambda x, y, z: jax.numpy.sum(  # noqa: E731
        jax.lax.pad(x, -0.0, [(1, 2, 1), (3, -3, 0)]) * y[1:-1:2, :]
        + jax.lax.pad(z, 1.0, [(-1, 0, 0), (0, 0, 0)])[::2], axis=axis)  # (a slice of a pad)
    g = gx.explore(fn, x, y, z).final.graph
    (k,) = [n for n in g.nodes if n.op == "kernel"]
    body = k.attrs["body"]
    assert [n.op for n in body.nodes].count("pad") == 2 and "slice" in body.ops()
    return body, [x, y, z]


@pytest.mark.skipif(host_compiler() is None, reason="no g++ to build the host kernels")
@pytest.mark.parametrize("axis", [0, 1])
def test_slices_and_pads_read_in_place_in_both_dialects_give_the_reference_result(axis: int
                                                                                 ) -> None:
    body, args = _in_place_kernel(axis)
    plan = plan_any(body)
    assert isinstance(plan, KernelPlan)
    with np.errstate(all="ignore"):
        want = np.asarray(reference.evaluate(body, args)[0])
    cuda = reduce.generate_grid(plan, "k")  # (axis 0 keeps 40 columns: the column layout)
    assert " ? " in cuda.source and (cuda.kind == "columns") == (axis == 0)
    got_cuda = reduce.launch(cuda, args, np, host_call(build_module(cuda.source), 64))
    code = kernel_codegen.generate(plan, "k", 2)
    assert " if " in code.source and " else " in code.source
    got_numba = np.empty(want.shape, want.dtype)
    load(code)(*args, *([np.zeros(want.shape, np.float64)] if code.red not in (None, "out")
                        else []), got_numba, *(v for _, v in code.scalars))
    for got in (got_cuda, got_numba):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_a_read_in_place_is_indexed_alike_in_both_dialects() -> None:
    """The same access, read in each dialect: a slice's start + stride * i, a pad's exact
    index or the padding value (a select), the bounds from the input's extent."""
    a = Access(0, (0, 1), pad=((0, 0, 0), (1, 2, 1)), fill=9)
    assert read(NUMBA, a, "in0", ["i0", "i1"], (3, 4), "v9") == (
        "(in0[i0, ((i1 - 1) // 2)] if i1 >= 1 and (i1 - 1) % 2 == 0 and "
        "((i1 - 1) // 2) < in0.shape[1] else v9)")
    assert read(CUDA, a, "in0", ["i0", "i1"], (3, 4), "0.0f") == (
        "(i1 >= 1 && (i1 - 1) % 2 == 0 && ((i1 - 1) / 2) < 4 ? "
        "in0[i0 * 4 + ((i1 - 1) / 2)] : 0.0f)")
    crop = Access(0, (0, 1), pad=((-2, 0, 0), (2, -1, 0)), fill=9)  # no select: a slice
    assert read(NUMBA, crop, "in0", ["i0", "i1"], (5, 4), "v9") == (
        "(in0[(i0 + 2), (i1 - 2)] if i1 >= 2 else v9)")
    both = Access(0, (0, 1), window=((0, 5, 1), (1, 7, 2)), pad=((0, 0, 0), (1, 0, 1)), fill=9)
    assert read(CUDA, both, "in0", ["i0", "i1"], (5, 3), "2.0f") == (
        "((1 + i1 * 2) >= 1 && ((1 + i1 * 2) - 1) % 2 == 0 && (((1 + i1 * 2) - 1) / 2) < 3 ? "
        "in0[i0 * 3 + (((1 + i1 * 2) - 1) / 2)] : 2.0f)")
    s = Access(0, (None, 1), window=((2, 3, 1), (1, 9, 3)))
    assert read(NUMBA, s, "in0", ["i0", "i1"], (3, 9), "") == "in0[2, (1 + i1 * 3)]"
    assert read(CUDA, s, "in0", ["i0", "i1"], (3, 9), "") == "in0[2 * 9 + (1 + i1 * 3)]"
