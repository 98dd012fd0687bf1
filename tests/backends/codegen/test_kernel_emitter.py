"""The one kernel emitter (backends/codegen/kernel_emitter.py): the same row plan walked in the
numba dialect (run by numba) and in the CUDA dialect (compiled for the host by
tests/backends/cuda_host.py), both against the reference interpreter; chains defined alike."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference
from explorer.backends.codegen.dialect import Block
from explorer.backends.codegen.kernel_emitter import emit_chain
from explorer.backends.codegen.kernel_plan import RowPlan, plan_any
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
