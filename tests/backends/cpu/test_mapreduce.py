"""Fused map-reduce kernels (explorer/backends/codegen/mapreduce_plan.py, cpu/mapreduce.py,
gpu/mapreduce.py): a split body that folds a pairwise value runs as one generated kernel per
chunk (numba on the CPU, equal to the reference; CUDA text on the GPU)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends.codegen.kernel_plan import PlanError
from explorer.backends.codegen.mapreduce_plan import plan_mapreduce
from explorer.backends.cpu import vector_math
from explorer.backends.cpu.mapreduce import generate
from explorer.backends.gpu import mapreduce as gpu_mapreduce

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
                                      R.standard_normal(400)), "radd("),
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
        tr = gx.explore(fn, q, p, memory_limit="16KiB")
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


GPU_MARKERS = {"kernel-vector": "acc0_0 = acc0_0 + (double)(", "attention": "exp(t0)",
               "logsumexp": "l0 = l0 * e0 + 1.0", "knn": "take =", "argmin": "at0 = j",
               "inner-fold": "for (long d = 0; d < 5; ++d)"}


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

    code = ("import sys, explorer.backends.gpu.mapreduce, explorer.backends.gpu; "
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


VECTOR = pytest.mark.skipif(vector_math.symbol("exp", "f32") is None,
                            reason="no libmvec with AVX2 here: kernels call scalar exp")


def _both(tr: Any) -> tuple[list[np.ndarray], list[np.ndarray]]:
    leaves = jax.tree_util.tree_leaves
    return ([np.asarray(w) for w in leaves(tr.run().value)],
            [np.asarray(g) for g in leaves(tr.run(backend="cpu").value)])


@VECTOR
def test_math_libmvec_has_runs_four_columns_per_call() -> None:
    """exp in the pairwise value: one libmvec call per block of 4 columns, the remaining
    columns (J = 401 is not a multiple of 4) scalar; sums in one accumulator per lane."""
    x, y, v = R.standard_normal((300, 3)), R.standard_normal((401, 3)), R.standard_normal(401)
    tr = gx.explore(kernel_vector, x, y, v, memory_limit="256KiB")
    (loop,) = _loops(tr)
    src = generate(plan_mapreduce(loop.attrs["body"]), "k").source
    assert src.count("vmath4('_ZGVbN4v_expf'") == 1 and "exp32(" in src  # blocks, remainder
    assert "range(nr - nr % 4, nr)" in src and "acc0_0_3" in src
    (want,), (got,) = _both(tr)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@VECTOR
def test_lanes_fold_in_column_order() -> None:
    """top_k and argmax over exp(-d) with every distance tied twice and a NaN: lanes fold
    one after another, so ties keep the lower index and the NaN ranks as the reference's."""
    q = R.standard_normal((40, 2))
    p = np.repeat(R.standard_normal((51, 2)), 2, axis=0)
    p[9] = np.nan

    def near(q: Any, p: Any) -> Any:
        # 0.5 - d, not -d: negating flips the NaN's sign, and NumPy's exp (the reference)
        # makes -NaN +NaN where libm and libmvec keep it (the documented NaN-sign divergence)
        w = jnp.exp(0.5 - jnp.sum((q[:, None] - p[None]) ** 2, -1))
        return jax.lax.top_k(w, 5), jnp.argmax(w, 1), jnp.max(w, 1)

    tr = gx.explore(near, q, p, memory_limit="16KiB")
    for loop in _loops(tr):
        assert "vmath4(" in generate(plan_mapreduce(loop.attrs["body"]), "k").source
    want, got = _both(tr)
    for w, g in zip(want, got):
        if w.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_without_libmvec_kernels_call_scalar_math(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_math, "symbol", lambda c_name, dtype: None)
    x, y, v = R.standard_normal((300, 3)), R.standard_normal((401, 3)), R.standard_normal(401)
    tr = gx.explore(kernel_vector, x, y, v, memory_limit="256KiB")
    (loop,) = _loops(tr)
    src = generate(plan_mapreduce(loop.attrs["body"]), "k").source
    assert "vmath4" not in src and "for j in range(nr):" in src


@VECTOR
def test_libmvec_math_is_within_4_ulp_of_numpy_with_ieee_special_values() -> None:
    from numba import njit

    from explorer.backends.cpu.vector_math import vmath4

    for c_name, np_fn in (("exp", np.exp), ("log", np.log), ("sin", np.sin), ("tanh", np.tanh)):
        for dtype, t in (("f64", np.float64), ("f32", np.float32)):
            sym = vector_math.symbol(c_name, dtype)
            if sym is None:
                continue

            @njit
            def run(x: Any, out: Any, sym: Any = sym) -> None:
                for b in range(0, x.size, 4):
                    out[b], out[b + 1], out[b + 2], out[b + 3] = vmath4(
                        sym, x[b], x[b + 1], x[b + 2], x[b + 3])

            x = np.concatenate([R.uniform(-30, 30, 4000), R.uniform(0, 1e-3, 4000),
                                [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-310, 800.0,
                                 -800.0, 89.0, 1e30, -1.0]]).astype(t)
            out = np.empty_like(x)
            run(x, out)
            with np.errstate(all="ignore"):
                want = np_fn(x)
            np.testing.assert_array_equal(np.isnan(out), np.isnan(want), err_msg=f"{sym} NaN")
            inf, finite = np.isinf(want), np.isfinite(want)
            np.testing.assert_array_equal(out[inf], want[inf], err_msg=sym)
            ulps = np.abs(out[finite] - want[finite]) / np.spacing(np.abs(want[finite]).astype(t))
            assert ulps.max() <= 4, (sym, ulps.max())


def _masked(q: Any, k: Any, col: Any, row: Any) -> Any:
    return q @ k.T + col[None, :] + row[:, None]


def masked_softmax(q: Any, k: Any, v: Any, col: Any, row: Any) -> Any:
    """softmax(QK^T + mask) V, with -inf in the mask: the first columns (every lane's first
    values) and one whole row."""
    return jax.nn.softmax(_masked(q, k, col, row), -1) @ v


def masked_logsumexp(q: Any, k: Any, v: Any, col: Any, row: Any) -> Any:
    s = _masked(q, k, col, row)
    m = jnp.max(s, 1, keepdims=True)
    return jnp.log(jnp.sum(jnp.exp(s - m), 1)) + m[:, 0]


def masked_args(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    col, row = np.zeros(203), np.zeros(64)
    col[:6] = col[100] = row[3] = -np.inf
    return (rng.standard_normal((64, 4)), rng.standard_normal((203, 4)),
            rng.standard_normal((203, 2)), col, row)


@pytest.mark.parametrize("fn", [masked_softmax, masked_logsumexp])
def test_online_softmax_with_minus_inf_as_the_reference(fn: Any) -> None:
    """A -inf weighs 0 also while the running max is still -inf (exp(-inf - -inf) would be a
    NaN that no later rescaling removes); a row whose max is -inf gives NaN, as the program."""
    tr = gx.explore(fn, *masked_args(R), memory_limit="64KiB")
    for loop in _loops(tr):
        plan_mapreduce(loop.attrs["body"])  # the map-reduce form: one kernel per chunk
    (want,), (got,) = _both(tr)
    assert np.isnan(want[3]).all() and not np.isnan(np.delete(want, 3, 0)).any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@VECTOR
def test_online_softmax_runs_four_lanes_each_with_its_running_max() -> None:
    x, y, v = R.standard_normal((90, 3)), R.standard_normal((401, 3)), R.standard_normal((401, 3))
    y[7] *= 30  # one lane's max jumps late, by far

    def attention(x: Any, y: Any, v: Any) -> Any:
        return jax.nn.softmax(x @ y.T, -1) @ v

    tr = gx.explore(attention, x, y, v, memory_limit="64KiB")
    (loop,) = _loops(tr)
    src = generate(plan_mapreduce(loop.attrs["body"]), "k").source
    assert "vmath4('_ZGVdN4v_exp', t0, t0_1, t0_2, t0_3)" in src and "mm0 = maximum(mm0, m0_3)" in src
    (want,), (got,) = _both(tr)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
