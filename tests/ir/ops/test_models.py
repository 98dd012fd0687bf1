"""The first-class rows of real models (ir/ops/indexing, convolution, windows, random,
linalg; pow with integer exponents, cumlogsumexp, select_n with n > 2) in small programs
that use them: each explores through the whole pipeline, verifies and round-trips at every
stage, and matches `jax.jit` of the same function on the reference, cpu and jax backends.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import explorer as gx
from explorer.ir import parse, verify

BACKENDS = ("reference", "cpu", "jax")
RNG = np.random.default_rng(0)


def _f32(*shape: int) -> np.ndarray:
    return RNG.normal(size=shape).astype(np.float32)


def _leaves(x):
    return [np.asarray(jax.random.key_data(v) if jnp.issubdtype(v.dtype, jax.dtypes.prng_key)
                       else v) for v in jax.tree_util.tree_leaves(x)]


def _check(fn, *args, tol: float = 2e-5, ops: tuple[str, ...] = (), compare=None):
    """Explore `fn`, check every stage, run the last on each backend against jax.jit."""
    t = gx.explore(fn, *args)
    traced = {n.op for n in t.stages[0].graph.nodes}
    assert set(ops) <= traced, f"expected {set(ops) - traced} in the traced graph"
    for s in t.stages:
        verify(s.graph)
        assert parse(str(s.graph)) == s.graph, f"round trip of stage {s.name}"
    want = _leaves(jax.jit(fn)(*args))
    for backend in BACKENDS:
        got = _leaves(t.run(backend=backend).value)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if compare is not None:
                compare(g, w)
            elif np.issubdtype(w.dtype, np.floating):
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=backend)
            else:
                np.testing.assert_array_equal(g, w, err_msg=backend)
    return t


# ---------------------------------------------------------------- indexing


def test_embedding_lookup_and_its_gradient() -> None:
    table, ids = _f32(7, 4), np.array([[0, 3, 6], [2, 2, 5]], np.int32)

    def loss(table, ids):
        return jnp.tanh(table[ids]).sum()

    _check(loss, table, ids, ops=("gather",))
    _check(jax.grad(loss), table, ids, ops=("gather", "scatter-add"))


@pytest.mark.parametrize("update", ["set", "add", "mul", "min", "max"])
def test_indexed_updates(update: str) -> None:
    x, idx, u = _f32(6, 3), np.array([4, 0, 5], np.int32), _f32(3, 3)
    _check(lambda x, i, u: getattr(x.at[i], update)(u), x, idx, u)


def test_column_gather_take_along_axis_and_one_hot() -> None:
    x, idx = _f32(4, 6), np.array([5, 1, 1], np.int32)
    _check(lambda x, i: x[:, i] * 2, x, idx, ops=("gather",))
    order = np.argsort(np.asarray(x), axis=1).astype(np.int32)
    _check(lambda x, o: jnp.take_along_axis(x, o, axis=1), x, order, ops=("gather",))
    _check(lambda i: jax.nn.one_hot(i, 7), np.array([0, 6, 3], np.int32))
    _check(lambda x: x.at[jnp.array([9, -1])].get(mode="fill", fill_value=-1.0), x)
    _check(lambda x: x.at[jnp.array([9, -9])].get(mode="clip"), x)


# ---------------------------------------------------------------- convolution and pooling


def _cnn(w, img):
    y = lax.conv_general_dilated(img, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    y = jax.nn.relu(y)
    y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return jnp.mean(y ** 2)


def test_cnn_with_max_pooling_and_its_gradient() -> None:
    w, img = _f32(3, 3, 3, 4) * 0.3, _f32(2, 8, 8, 3)
    _check(_cnn, w, img, ops=("conv_general_dilated", "reduce_window_max"))
    _check(jax.grad(_cnn, argnums=(0, 1)), w, img,
           ops=("conv_general_dilated", "select_and_scatter_add"))


def test_strided_grouped_nchw_conv_gradient() -> None:
    w, img = _f32(6, 2, 3, 3) * 0.3, _f32(2, 4, 9, 9)

    def f(w, img):
        y = lax.conv_general_dilated(img, w, (2, 2), ((1, 0), (2, 1)), rhs_dilation=(1, 2),
                                     feature_group_count=2)
        return jnp.sum(jnp.sin(y))

    _check(jax.grad(f, argnums=(0, 1)), w, img, ops=("conv_general_dilated",))


def test_average_pooling_and_its_gradient() -> None:
    img = _f32(2, 6, 6, 3)

    def avg(img):
        s = lax.reduce_window(img, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        return jnp.sum(jnp.cos(s / 9))

    _check(avg, img, ops=("reduce_window_sum",))
    _check(jax.grad(avg), img, ops=("reduce_window_sum", "pad"))


def test_max_pooling_forward_mode() -> None:
    x, dx = _f32(1, 6, 6, 2), _f32(1, 6, 6, 2)

    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    _check(lambda x, dx: jax.jvp(pool, (x,), (dx,)), x, dx, ops=("select_and_gather_add",))


# ---------------------------------------------------------------- random numbers


def test_dropout_with_a_raw_key() -> None:
    x = _f32(4, 5)

    def dropout(key, x):
        keep = jax.random.bernoulli(key, 0.7, x.shape)
        return jnp.where(keep, x / 0.7, 0.0)

    _check(dropout, jax.random.PRNGKey(3), x, ops=("random_bits", "shift_right_logical",
                                                   "bitcast_convert_type"))


def test_typed_keys_split_fold_in_and_normal() -> None:
    def sample(key, x):
        k1, k2 = jax.random.split(key)
        ks = jax.random.split(jax.random.fold_in(k2, 7), 3)
        return (jax.random.normal(k1, (3, 2)) + x, jax.random.uniform(ks[1], (5,)),
                jax.random.randint(ks[2], (4,), 0, 10), jax.random.fold_in(key, 3))

    _check(sample, jax.random.key(42), _f32(3, 2),
           ops=("random_split", "random_fold_in", "random_bits", "erf_inv"))
    _check(lambda s: jax.random.normal(jax.random.key(s), (4,)), np.int32(5), ops=("random_seed",))


# ---------------------------------------------------------------- linear algebra


def test_gp_log_likelihood_and_its_gradient() -> None:
    xs, ys = np.linspace(0, 1, 6).astype(np.float32), _f32(6)

    def nll(log_scale, xs, ys):
        k = jnp.exp(-((xs[:, None] - xs[None, :]) ** 2) / jnp.exp(log_scale)) + 0.1 * jnp.eye(6)
        chol = jnp.linalg.cholesky(k)
        alpha = jax.scipy.linalg.solve_triangular(chol, ys, lower=True)
        diag = chol[jnp.arange(6), jnp.arange(6)]  # jnp.diag traces to a platform cond
        return 0.5 * alpha @ alpha + jnp.log(diag).sum()

    _check(nll, np.float32(-1.0), xs, ys, tol=1e-4, ops=("cholesky", "triangular_solve"))
    _check(jax.grad(nll), np.float32(-1.0), xs, ys, tol=1e-3)


def test_linear_solve_inverse_and_their_gradients() -> None:
    """jnp.linalg.solve/inv trace to custom_linear_solve, evaluated by its solve jaxpr."""
    a, rhs = (_f32(4, 4) + 6 * np.eye(4)).astype(np.float32), _f32(4)
    _check(jnp.linalg.solve, a, rhs, tol=1e-5, ops=("lu", "triangular_solve"))
    _check(jnp.linalg.inv, a, tol=1e-5)
    _check(jax.grad(lambda a, b: jnp.sin(jnp.linalg.solve(a, b)).sum(), argnums=(0, 1)), a, rhs,
           tol=1e-5)


def _close_up_to_sign(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(np.abs(got), np.abs(want), rtol=1e-4, atol=1e-4)


def test_decompositions() -> None:
    a = _f32(5, 5)
    spd = (a @ a.T + 5 * np.eye(5)).astype(np.float32)
    _check(lambda a: jax.scipy.linalg.lu(a), a, tol=1e-4, ops=("lu",))
    _check(lambda a: jnp.prod(jax.lax.linalg.lu(a)[0][jnp.arange(5), jnp.arange(5)]), a, tol=1e-4)
    # jnp.diag and slogdet pick a platform's branch: the CPU (or default) one, inlined at
    # trace time (lax.platform_dependent), so no conditional is left
    t = _check(lambda a: (jnp.diag(a), jnp.linalg.slogdet(a)), a, tol=1e-4)
    assert "conditional" not in {n.op for n in t.stages[0].graph.nodes}
    # signs of Q's columns and of singular/eigen vectors are a convention: compare magnitudes
    # here, and reconstructions below
    _check(lambda a: jnp.linalg.qr(a[:, :3]), a, compare=_close_up_to_sign, ops=("qr",))
    _check(lambda a: jnp.linalg.eigh(a), spd, compare=_close_up_to_sign, ops=("eigh",))
    _check(lambda a: jnp.linalg.svd(a), a, compare=_close_up_to_sign, ops=("svd",))
    _check(lambda a: jnp.linalg.svd(a, compute_uv=False), a, tol=1e-4)

    def rebuilt(a):
        q, r = jnp.linalg.qr(a)
        w, v = jnp.linalg.eigh(a @ a.T)
        u, s, vt = jnp.linalg.svd(a)
        return q @ r, (v * w) @ v.T, (u * s) @ vt

    _check(rebuilt, a, tol=1e-3)


# ---------------------------------------------------------------- elementwise and scans


def test_optax_style_power_of_a_step_count() -> None:
    def bias_correction(m, count):
        return m / (1 - 0.9 ** count)

    _check(bias_correction, _f32(4), np.int32(3), ops=("pow",))


def test_cumlogsumexp_select_n_and_clamp() -> None:
    x = _f32(3, 5)
    _check(lambda x: lax.cumlogsumexp(x, axis=1, reverse=True), x, ops=("cumlogsumexp",))
    which = np.array([[0, 1, 2, 1, 0]] * 3, np.int32)
    _check(lambda w, x: lax.select_n(w, x, x * 2, -x) + lax.clamp(-0.5, x, 0.5), which, x,
           ops=("select_n", "clamp"))


# ---------------------------------------------------------------- split and memory


def test_embedding_lookup_and_cnn_split_under_a_memory_limit() -> None:
    """gather splits along the ids' batch, conv and pooling along the image batch."""
    table, ids = _f32(50, 64), RNG.integers(0, 50, size=(512, 1)).astype(np.int32)

    def lookup(table, ids):
        h = jnp.tanh(table[ids[:, 0]] * 2.0) + 1.0
        return (h * h).sum(axis=1)

    def cnn(w, img):
        y = lax.conv_general_dilated(img, w, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = lax.reduce_window(jnp.tanh(y), -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return y.sum(axis=(1, 2, 3))

    for fn, args, inside in ((lookup, (table, ids), "gather"),
                             (cnn, (_f32(3, 3, 3, 8), _f32(32, 16, 16, 3)), "conv_general_dilated")):
        t = gx.explore(fn, *args, memory_limit="200 KB")
        loops = [n for n in t.stages[-1].graph.nodes if n.op == "loop"]
        assert loops and any(m.op == inside for m in _body_nodes(loops[0].attrs["body"]))
        want = np.asarray(jax.jit(fn)(*args))
        for backend in ("reference", "cpu"):
            r = t.run(backend=backend)
            np.testing.assert_allclose(r.value, want, rtol=1e-4, atol=1e-4, err_msg=backend)
            assert r.peak_bytes <= 200_000, backend


def _body_nodes(g):
    for n in g.nodes:
        yield n
        for v in n.attrs.values():
            if hasattr(v, "nodes"):
                yield from _body_nodes(v)


def _big_cases() -> dict[str, tuple[list[np.ndarray], dict]]:
    ids = RNG.integers(-5, 1005, size=(4096, 1)).astype(np.int32)
    gd = {"offset_dims": (1,), "collapsed_slice_dims": (0,), "start_index_map": (0,),
          "slice_sizes": (1, 64), "mode": "fill"}
    sd = {"update_window_dims": (1,), "inserted_window_dims": (0,),
          "scatter_dims_to_operand_dims": (0,), "mode": "clip"}
    win = {"window_dimensions": (1, 3, 3, 1), "window_strides": (1, 2, 2, 1),
           "padding": ((0, 0), (1, 1), (1, 1), (0, 0))}
    spd = np.broadcast_to(np.eye(128, dtype=np.float32) * 3, (8, 128, 128)).copy()
    ints = RNG.integers(0, 2**31, size=(512, 512)).astype(np.int32)
    return {
        "gather": ([_f32(1000, 64), ids], gd),
        "gather ": ([_f32(50, 64), ids[:171] % 50], gd),  # few, wide slices
        "scatter-add": ([_f32(1000, 64), ids, _f32(4096, 64)], sd),
        "conv_general_dilated": ([_f32(8, 32, 32, 16), _f32(3, 3, 16, 32)], {
            "window_strides": (1, 1), "padding": ((1, 1), (1, 1)),
            "dimension_numbers": ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))}),
        "reduce_window_max": ([_f32(8, 64, 64, 16)], win),
        "select_and_scatter_add": ([_f32(8, 32, 32, 16), _f32(8, 64, 64, 16)],
                                   {"select_prim": "ge", **win}),
        "select_and_gather_add": ([_f32(8, 64, 64, 16), _f32(8, 64, 64, 16)],
                                  {"select_prim": "ge", **win}),
        "eigh": ([spd], {}),
        "triangular_solve": ([spd, _f32(8, 128, 64)],
                             {"left_side": True, "lower": True, "transpose_a": False}),
        "random_bits": ([np.array([1, 2], np.uint32)], {"bit_width": 32, "shape": (256, 1024)}),
        "shift_right_logical": ([ints, np.full((512, 512), 9, np.int32)], {}),
        "pow": ([_f32(512, 512), np.full((512, 512), 3, np.int32)], {}),
    }


def test_planned_temporaries_bound_what_the_references_allocate() -> None:
    """backends/numpy_temporaries.py's figures for these rows cover tracemalloc's peak."""
    import tracemalloc

    from explorer.backends.numpy_temporaries import workspace_bytes
    from explorer.ir import GraphBuilder, TensorType, dtypes
    from explorer.ir.ops import OPS

    for name, (ins, attrs) in _big_cases().items():
        b = GraphBuilder()
        params = [b.param(TensorType(x.shape, dtypes.from_numpy(x.dtype))) for x in ins]
        name = name.strip()
        node = b.add(name, params, attrs)
        g = b.build([node])
        tracemalloc.start()
        try:
            base, _ = tracemalloc.get_traced_memory()
            out = OPS[name].ref(*ins, **attrs)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        result = sum(np.asarray(o).nbytes for o in (out if isinstance(out, tuple) else (out,)))
        assert workspace_bytes(g, g[node], {}) >= peak - base - result, name
