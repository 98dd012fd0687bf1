"""The one map-reduce emitter (backends/codegen/mapreduce_emitter.py): the same plan rendered
in the numba dialect (run by numba) and in the CUDA dialect (compiled for the host by
tests/backends/cuda_host.py), both against the reference interpreter."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends.codegen.dialect import Block
from explorer.backends.codegen.mapreduce_emitter import Emitter
from explorer.backends.codegen.mapreduce_plan import plan_mapreduce
from explorer.backends.cpu.numba_dialect import NUMBA
from explorer.backends.gpu.cuda_dialect import CUDA
from explorer.backends.reference import NumpyInterpreter
from tests.backends.cuda_host import HostCudaInterpreter, host_compiler


def _every_fold(x: Any, y: Any, v: Any) -> Any:
    s = 0.5 - jnp.sum((x[:, None] - y[None]) ** 2, -1)
    return (jnp.max(s, 1), jnp.argmax(s, 1), jnp.sum(jnp.exp(s), 1), jax.lax.top_k(s, 3),
            jax.nn.softmax(s, 1) @ v)


def _explored() -> tuple[Any, tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(11)
    args = (rng.standard_normal((64, 3)), rng.standard_normal((90, 3)), rng.standard_normal((90, 2)))
    return gx.explore(_every_fold, *args, memory_limit=16384), args


def _plans(tr: Any) -> list[Any]:
    return [plan_mapreduce(n.attrs["body"]) for n in tr.final.graph.nodes if n.op == "loop"]


def test_both_dialects_write_the_same_folds() -> None:
    tr, _ = _explored()
    plans = _plans(tr)
    assert plans
    for plan in plans:
        arg = {leaf: f"in{k}" for k, leaf in enumerate(plan.leaves)}
        out = {o: f"out{k}" for k, o in enumerate(plan.outs)}
        written = {}
        for d in (NUMBA, CUDA):
            head, loop, tail = Block(d), Block(d), Block(d)
            em = Emitter(plan, d, arg, out, loop)
            em.sweep(head, tail)
            # (the sweeps differ where numba writes small contractions out term by term)
            written[d.name] = em.accumulators, len(head.lines), sum(" = " in x for x in tail.lines)
        assert written["numba"] == written["cuda"]


@pytest.mark.skipif(host_compiler() is None, reason="no g++ to build the host kernels")
def test_both_dialects_give_the_reference_results() -> None:
    tr, args = _explored()
    g = tr.final.graph
    ref = NumpyInterpreter(g)
    prepared = ref.prepare(args)
    want = [np.asarray(w) for w in ref.evaluate(prepared)]
    cuda = [np.asarray(h) for h in HostCudaInterpreter(g).evaluate(prepared)]
    numba = [np.asarray(h) for h in jax.tree_util.tree_leaves(tr.run(*args, backend="cpu").value)]
    assert len(numba) == len(want)
    for got in (cuda, numba):
        for w, h in zip(want, got):
            assert h.dtype == w.dtype and h.shape == w.shape
            if w.dtype.kind in "iu":
                np.testing.assert_array_equal(h, w)
            else:
                tol = 2e-4 if w.dtype == np.float32 else 1e-9  # (libm vs NumPy exp)
                np.testing.assert_allclose(h, w, rtol=tol, atol=tol)
