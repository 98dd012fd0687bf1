"""Fused map-reduce kernels (explorer/backends/mapreduce_plan.py, cpu_mapreduce.py,
gpu_mapreduce.py): a split body that folds a pairwise value runs as one generated kernel per
chunk (numba on the CPU, equal to the reference; CUDA text on the GPU)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import gpu_mapreduce
from explorer.backends.cpu_mapreduce import generate
from explorer.backends.kernel_plan import PlanError
from explorer.backends.mapreduce_plan import plan_mapreduce

pytest.importorskip("numba")


def kernel_vector(x: Any, y: Any, v: Any) -> Any:
    return jnp.exp(-0.5 * jnp.sum((x[:, None] - y[None]) ** 2, -1)) @ v


def attention(q: Any, k: Any, v: Any) -> Any:
    return jax.nn.softmax(q @ k.T, -1) @ v


def logsumexp(x: Any, y: Any) -> Any:
    s = x @ y.T
    m = jnp.max(s, 1, keepdims=True)
    return jnp.log(jnp.sum(jnp.exp(s - m), 1)) + m[:, 0]


def knn(q: Any, p: Any) -> Any:
    return jax.lax.top_k(-jnp.sum((q[:, None] - p[None]) ** 2, -1), 4)


def nearest(q: Any, p: Any) -> Any:
    return jnp.argmin(jnp.sum((q[:, None] - p[None]) ** 2, -1), 1)


def naive_sum(x: Any, y: Any) -> Any:
    return jnp.max(jnp.tanh(jnp.sum(x[:, None] * y[None], -1)), 0)


R = np.random.default_rng(7)
CASES: dict[str, tuple[Callable, tuple, str]] = {
    "kernel-vector": (kernel_vector, (R.standard_normal((300, 3)), R.standard_normal((400, 3)),
                                      R.standard_normal(400)), "_radd"),
    "attention": (attention, tuple(R.standard_normal(s).astype(np.float32)
                                   for s in [(300, 8), (500, 8), (500, 3)]), "math.exp(m"),
    "logsumexp": (logsumexp, (R.standard_normal((300, 4)), R.standard_normal((500, 4))),
                  "math.exp(m"),
    "knn": (knn, (R.standard_normal((200, 3)), R.standard_normal((700, 3))), "take ="),
    "argmin": (nearest, (R.standard_normal((200, 3)), R.standard_normal((700, 3))), "best"),
    "inner-fold": (naive_sum, (R.standard_normal((300, 5)), R.standard_normal((200, 5))),
                   "for d in range("),
}


def _loops(tr: Any) -> list[Any]:
    return [n for n in tr.final.graph.nodes if n.op == "loop"]


@pytest.mark.parametrize("name", CASES)
def test_split_bodies_run_as_one_map_reduce_kernel(name: str) -> None:
    fn, args, marker = CASES[name]
    tr = gx.explore(fn, *args, memory_limit="256KiB")
    (loop,) = _loops(tr)
    plan = plan_mapreduce(loop.attrs["body"])
    code = generate(plan, "k")
    assert marker in code.source and "prange" in code.source
    assert "np.empty" not in code.source and "np.zeros" not in code.source  # no matrix
    want = tr.run(stage=0)
    got = tr.run(backend="cpu")
    names = [k.name for k in got.kernels if "mapreduce_" in k.source]
    assert names, [k.name for k in got.kernels]
    assert got.peak_bytes <= gx.parse_bytes("256KiB")
    for w, g in zip(jax.tree_util.tree_leaves(want.value), jax.tree_util.tree_leaves(got.value)):
        w, g = np.asarray(w), np.asarray(g)
        if w.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w)
        else:
            tol = 1e-4 if w.dtype == np.float32 else 1e-10
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def test_special_values_fold_as_the_reference_does() -> None:
    """NaN wins argmin and ranks first in top_k; ties keep the first index; rows of -inf in a
    logsumexp give what the reference gives."""
    q = R.standard_normal((40, 2))
    p = np.repeat(R.standard_normal((50, 2)), 2, axis=0)  # every distance tied twice
    p[7] = np.nan
    for fn in (nearest, knn):
        tr = gx.explore(fn, q, p, memory_limit="8KiB")
        want, got = tr.run(), tr.run(backend="cpu")  # the same (rewritten) program
        for w, g in zip(jax.tree_util.tree_leaves(want.value), jax.tree_util.tree_leaves(got.value)):
            w, g = np.asarray(w), np.asarray(g)  # float32: the cross term rounds differently
            if w.dtype.kind in "iu":
                np.testing.assert_array_equal(g, w)
            else:
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    x = R.standard_normal((60, 3))
    y = R.standard_normal((80, 3))
    y[:, 0] = -np.inf
    x[:, 0] = np.abs(x[:, 0])
    tr = gx.explore(logsumexp, x, y, memory_limit="16KiB")
    np.testing.assert_array_equal(np.asarray(tr.run(backend="cpu").value),
                                  np.asarray(tr.run().value))


def test_bodies_of_another_form_run_node_by_node() -> None:
    def cumulative(x: Any, y: Any) -> Any:
        return jnp.cumsum(x @ y.T, 1)[:, -1]

    tr = gx.explore(cumulative, R.standard_normal((200, 3)), R.standard_normal((300, 3)),
                    memory_limit="128KiB")
    for loop in _loops(tr):
        with pytest.raises(PlanError):
            plan_mapreduce(loop.attrs["body"])
    got = tr.run(backend="cpu")
    assert not any("mapreduce_" in k.source for k in got.kernels)
    np.testing.assert_allclose(np.asarray(got.value), np.asarray(tr.run(stage=0).value), rtol=1e-9)


GPU_MARKERS = {"kernel-vector": "acc0_0 = acc0_0 + (double)", "attention": "exp(m0 - s)",
               "logsumexp": "l0 = l0 * scale + 1.0", "knn": "take =", "argmin": "at0 = j",
               "inner-fold": "for (int d = 0; d < 5; ++d)"}


@pytest.mark.parametrize("name", CASES)
def test_gpu_kernels_are_one_cuda_kernel_per_body(name: str) -> None:
    """The CUDA twin from the same plan: text only here (no GPU needed, no CuPy imported)."""
    fn, args, _ = CASES[name]
    tr = gx.explore(fn, *args, memory_limit="256KiB")
    (loop,) = _loops(tr)
    code = gpu_mapreduce.generate(plan_mapreduce(loop.attrs["body"]), f"mr_{name}")
    src = code.source
    assert src.count("__global__") == 1 and f"void mr_{name.replace('-', '_')}(" in src
    assert GPU_MARKERS[name] in src
    assert "malloc" not in src and "new " not in src  # registers only
    assert src.count("{") == src.count("}")
    rows = loop.attrs["body"].outputs  # one thread per kept row
    assert code.rows in {d for o in rows for d in loop.attrs["body"][o].shape}


def test_gpu_generator_imports_without_cupy() -> None:
    import subprocess
    import sys

    code = ("import sys, explorer.backends.gpu_mapreduce, explorer.backends.gpu; "
            "assert 'cupy' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_one_compiled_kernel_serves_every_shape_and_constant_of_a_structure() -> None:
    """Loop bounds, feature counts and constants are run-time arguments: numba never frees
    compiled code, so a kernel per shape would grow a long session without bound."""
    sources = set()
    for n, m, scale in ((300, 200, 0.5), (410, 170, 0.25)):
        x, y = R.standard_normal((n, 3)), R.standard_normal((m, 3))
        v = R.standard_normal((m, 1))
        fn = lambda x, y, v, s=scale: jnp.exp(-s * jnp.sum((x[:, None] - y[None]) ** 2, -1)) @ v  # noqa: E731
        tr = gx.explore(fn, x, y, v, memory_limit="256KiB")
        got = tr.run(backend="cpu")
        np.testing.assert_allclose(got.value, tr.run(stage=0).value, rtol=1e-5, atol=1e-5)
        sources |= {k.source for k in got.kernels if "mapreduce_" in k.source}
    assert len(sources) == 1
