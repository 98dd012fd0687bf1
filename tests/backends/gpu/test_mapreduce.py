"""The GPU backend's map-reduce kernels, run where there is no GPU: each split body of the
memory programs (the issue's and the random memory fuzz's) runs through `GpuFusedBody` with
its generated CUDA kernel compiled for the host (tests/backends/cuda_host.py), and must give
the reference interpreter's results; where nvcc is installed the same sources compile for
the device. The GPU itself runs them in tests/backends/gpu/test_backend.py when one is lent."""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np
import pytest

import explorer as gx
from explorer.backends.codegen.mapreduce_plan import plan_mapreduce
from explorer.backends.reference import NumpyInterpreter
from explorer.passes.split import InfeasibleMemoryLimit
from tests.backends.cpu.test_mapreduce import masked_args, masked_logsumexp, masked_softmax
from tests.backends.cuda_host import HostCudaInterpreter, HostFusedBody, host_compiler, nvcc_ptx
from tests.corpora.memory_programs import random_program
from tests.test_memory_safe import ISSUE

pytestmark = pytest.mark.skipif(host_compiler() is None, reason="no g++ to build the host kernels")

SEEDS = range(16)
_R = np.random.default_rng(5)
PROGRAMS = {**{name: (fn, args, limit) for name, (fn, args, limit) in ISSUE.items()},
            "softmax with -inf": (masked_softmax, masked_args(_R), 65536),
            "logsumexp with -inf": (masked_logsumexp, masked_args(_R), 65536),
            **{f"memory seed {s}": s for s in SEEDS}}


def _explored(key: str) -> Any:
    spec = PROGRAMS[key]
    if isinstance(spec, int):
        prog = random_program(spec)
        naive = gx.explore(prog.fn, *prog.args, pipeline="simplify").final.cost.peak_bytes
        fn, args, limit = prog.fn, prog.args, max(naive // 20, 128 * 1024)
    else:
        fn, args, limit = spec
    try:
        return gx.explore(fn, *args, memory_limit=limit), args
    except InfeasibleMemoryLimit as e:
        return gx.explore(fn, *args, memory_limit=e.needed), args


def _loop_bodies(g: Any) -> list[Any]:
    return [n.attrs["body"] for n in g.nodes if n.op == "loop"]


@pytest.mark.parametrize("key", PROGRAMS)
def test_cuda_map_reduce_kernels_give_the_reference_results_on_the_host(key: str) -> None:
    tr, args = _explored(key)
    g = tr.final.graph
    if not _loop_bodies(g):
        assert isinstance(PROGRAMS[key], int), f"{key}: not split"
        pytest.skip("the rewrites leave nothing to split (a product reordered, say)")
    ref = NumpyInterpreter(g)
    prepared = ref.prepare(args)
    want = ref.evaluate(prepared)
    before = HostFusedBody.launches
    got = HostCudaInterpreter(g).evaluate(prepared)
    assert HostFusedBody.launches > before, f"{key}: no body ran as a CUDA map-reduce kernel"
    single = any(np.asarray(a).dtype == np.float32 for a in args)
    for w, h in zip(want, got):
        w, h = np.asarray(w), np.asarray(h)
        assert h.dtype == w.dtype and h.shape == w.shape
        if w.dtype.kind in "iu":  # indices: near-ties break either way (libm vs NumPy's exp)
            assert np.mean(h == w) > (0.9 if single else 0.99), key
        else:
            tol = 2e-4 if w.dtype == np.float32 else 1e-9
            np.testing.assert_allclose(h, w, rtol=tol, atol=tol, err_msg=key)


def test_special_values_fold_as_the_reference_does_on_the_host() -> None:
    """NaN first among maxima and argmax, ties to the lower index, +-inf in sums."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((64, 3)), np.repeat(rng.standard_normal((50, 3)), 2, axis=0)
    x[5] = np.nan
    y[7, 0] = np.inf

    def fn(x: Any, y: Any) -> Any:
        s = 0.5 - jnp.sum((x[:, None] - y[None]) ** 2, -1)
        return jnp.max(s, 1), jnp.argmax(s, 1), jnp.sum(jnp.exp(s), 1), jax.lax.top_k(s, 3)

    tr = gx.explore(fn, x, y, memory_limit=16384)
    ref = NumpyInterpreter(tr.final.graph)
    prepared = ref.prepare((x, y))
    for w, h in zip(ref.evaluate(prepared), HostCudaInterpreter(tr.final.graph).evaluate(prepared)):
        w, h = np.asarray(w), np.asarray(h)
        if w.dtype.kind in "iu":
            np.testing.assert_array_equal(h, w)
        else:  # NaN and inf where the reference has them; the rest within float32 rounding
            np.testing.assert_allclose(h, w, rtol=1e-5, atol=1e-6)


def test_sums_and_maxima_fold_a_warp_per_row_with_nan_and_inf_where_the_reference_has_them() -> None:
    """Folds that combine across threads (sum, dot, max) run a warp per row: its lanes stride
    over j and their accumulators meet by shuffles. A NaN or inf that one lane (not lane 0)
    sees reaches the result; rows and columns are not multiples of the warp or block."""
    import jax.numpy as jnp

    from explorer.backends.gpu import mapreduce as gpu_mapreduce

    rng = np.random.default_rng(4)
    x, y, v = rng.standard_normal((45, 3)), rng.standard_normal((77, 3)), rng.standard_normal(77)
    x[3, 1], y[37, 2], v[70] = np.nan, np.inf, np.inf

    def fn(x: Any, y: Any, v: Any) -> Any:
        s = jnp.exp(-jnp.sum((x[:, None] - y[None]) ** 2, -1))
        return jnp.max(s * 2.0, 1), s @ v, jnp.sum(jnp.sqrt(s + 1.0), 1)

    tr = gx.explore(fn, x, y, v, memory_limit=8192)
    bodies = _loop_bodies(tr.final.graph)
    assert bodies and all(gpu_mapreduce.generate(plan_mapreduce(b), "k").lanes == 32 for b in bodies)
    ref = NumpyInterpreter(tr.final.graph)
    prepared = ref.prepare((x, y, v))
    before = HostFusedBody.launches
    got = HostCudaInterpreter(tr.final.graph).evaluate(prepared)
    assert HostFusedBody.launches > before
    for w, h in zip(ref.evaluate(prepared), got):
        np.testing.assert_allclose(np.asarray(h), np.asarray(w), rtol=1e-6, atol=1e-7)  # (float32)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc here")
@pytest.mark.parametrize("key", [k for k in PROGRAMS if not isinstance(PROGRAMS[k], int)]
                         + ["memory seed 0", "memory seed 1", "memory seed 2"])
def test_cuda_map_reduce_kernels_compile_for_the_device(key: str) -> None:
    from explorer.backends.gpu import mapreduce as gpu_mapreduce

    tr, _ = _explored(key)
    for body in _loop_bodies(tr.final.graph):
        code = gpu_mapreduce.generate(plan_mapreduce(body), "mapreduce_k")
        done = nvcc_ptx(code.source)
        assert done.returncode == 0, done.stderr[-3000:]
