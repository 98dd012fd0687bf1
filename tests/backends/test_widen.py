"""A graph's float types widened to float64 (explorer/backends/widen.py): ids kept, types
and type-naming attributes widened, region bodies too; bit-level ops and opaque primitives
JAX will not run wide kept at their own precision."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.backends.reference import check_args, evaluate
from explorer.backends.widen import widened
from explorer.ir import verify
from explorer.ir.graph import TensorType


def _run(g, flat):
    return evaluate(g, check_args(g, flat))


def test_every_node_keeps_its_id_and_computes_in_float64() -> None:
    def f(x, i):
        h = jnp.tanh(x @ x.T).astype(jnp.float16) * 3
        def body(c, row):
            return c + row.sum(), c * 2
        c, ys = jax.lax.scan(body, jnp.float32(0), x)
        return h.astype(jnp.float32).sum() + c, ys, jnp.arange(3, dtype=jnp.float32) + i

    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    t = gx.explore(f, x, np.int32(2))
    for s in t.stages:
        w = widened(s.graph)
        verify(w.graph)
        assert [n.id for n in w.graph.nodes] == [n.id for n in s.graph.nodes]
        assert not w.pinned
        for n in w.graph.nodes:
            if isinstance(n.type, TensorType):
                assert n.type.dtype in ("f64", "i32", "pred"), (s.name, n)
        outs = _run(w.graph, t.flat_args(t.example_args))
        assert [o.dtype for o in outs] == [np.float64, np.float64, np.float64]
    x64 = x.astype(np.float64)  # the program in float64 (its float16 cast widened too)
    rows = np.cumsum(x64.sum(1))
    want = ((np.tanh(x64 @ x64.T) * 3).sum() + rows[-1], np.concatenate([[0], rows[:-1]]) * 2,
            np.arange(3.0) + 2)
    for got, w64 in zip(outs, want):
        np.testing.assert_allclose(got, np.asarray(w64), rtol=1e-12, atol=1e-12)


def test_bit_level_ops_keep_their_precision() -> None:
    def f(x):
        bits = jax.lax.bitcast_convert_type(x, jnp.int32)
        return jax.lax.bitcast_convert_type(bits | 1, jnp.float32) + x

    x = np.linspace(1, 2, 5, dtype=np.float32)
    g = gx.explore(f, x, pipeline=[]).final.graph
    w = widened(g)
    verify(w.graph)
    assert len(w.pinned) == 2 and all("bits of its element type" in r for r in w.pinned.values())
    bumped = (x.view(np.int32) | 1).view(np.float32)  # the bits of float32, then a wide sum
    np.testing.assert_array_equal(_run(w.graph, [x])[0],
                                  bumped.astype(np.float64) + x.astype(np.float64))


def test_an_opaque_primitive_runs_through_jax_in_float64() -> None:
    x = np.linspace(-2, 2, 7, dtype=np.float32)
    g = gx.explore(lambda x: jax.lax.bessel_i1e(x) * 2.0, x, pipeline=[]).final.graph
    w = widened(g)
    assert not w.pinned
    got = _run(w.graph, [x])[0]
    with jax.enable_x64(True):
        want = np.asarray(jax.lax.bessel_i1e(x.astype(np.float64)) * 2.0)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, got.astype(np.float32).astype(np.float64))
