"""Array ops in a compiled scan's body (backends/cpu/scan_body_ops.py): split and unstack
elements, slice, pad, concatenate, stack, unit-axis broadcasts and batched dots run inside
the one numba function, and each program matches the reference interpreter and its own
per-iteration body; edge sizes: length 1, reverse, several and nested carries, float64."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import registry

rng = np.random.default_rng(11)


def _arr(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def _lstm(p: dict, xs: jax.Array) -> jax.Array:  # split of the gates; its gradient concatenates
    def cell(carry: tuple, x: jax.Array) -> tuple:
        h, c = carry
        i, f, g, o = jnp.split(x @ p["wx"] + h @ p["wh"] + p["b"], 4, -1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    zeros = jnp.zeros((xs.shape[1], p["wh"].shape[0]), xs.dtype)
    return jax.lax.scan(cell, (zeros, zeros), xs)[1].sum()


def _rotary(x: jax.Array) -> jax.Array:  # strided slices, stack (its gradient: pad, unstack)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return jnp.stack([x1 * 0.6 - x2 * 0.8, x1 * 0.8 + x2 * 0.6], -1).reshape(x.shape)


def _attention_layers(x: jax.Array, layers: dict, reverse: bool = False) -> jax.Array:
    """Layers stacked under a scan: rms-norm (a unit-axis broadcast), rotary, einsum attention
    (dots batched over batch and heads)."""
    def block(x: jax.Array, lp: dict) -> tuple:
        y = x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * lp["g"]
        q = _rotary((y @ lp["wq"]).reshape(*y.shape[:-1], 2, -1))
        k = _rotary((y @ lp["wk"]).reshape(*y.shape[:-1], 2, -1))
        v = (y @ lp["wv"]).reshape(*y.shape[:-1], 2, -1)
        s = jnp.einsum("bqhk,bthk->bhqt", q, k) / math.sqrt(q.shape[-1])
        a = jax.nn.softmax(s, -1)
        return x + jnp.einsum("bhqt,bthk->bqhk", a, v).reshape(x.shape), (x.sum(), x[:, :2])

    return jax.lax.scan(block, x, layers, reverse=reverse)


def _layers(n: int, d: int = 8, dtype: type = np.float32) -> dict:
    return {"g": _arr(n, d, dtype=dtype), "wq": _arr(n, d, d, dtype=dtype),
            "wk": _arr(n, d, d, dtype=dtype), "wv": _arr(n, d, d, dtype=dtype)}


def _pieces(xs: jax.Array, c: jax.Array) -> tuple:
    """Several carries in a pytree; pad with negative and interior padding, concatenate."""
    def step(carry: dict, x: jax.Array) -> tuple:
        a, (b, k) = carry["a"], carry["bk"]
        grown = jax.lax.pad(x, jnp.asarray(0.5, x.dtype), ((1, -1, 1), (0, 2, 0)))  # (2n-1, m+2)
        a = jnp.tanh(a + grown[:, 1:-1][::2] * c)
        b = jnp.concatenate([b[:, 1:], a[:, :1]], 1) * 0.9
        return {"a": a, "bk": (b, k + 1)}, jnp.stack([a, b], 0)

    init = {"a": jnp.zeros(xs.shape[1:], xs.dtype), "bk": (jnp.ones(xs.shape[1:], xs.dtype), jnp.int32(0))}
    return jax.lax.scan(step, init, xs)


def _check(fn, *args, rtol: float = 1e-4) -> str:  # noqa: ANN001
    """`fn` on the cpu backend: every scan compiled whole, matching its per-iteration body
    and the reference interpreter; the program's text."""
    t = gx.explore(fn, *args)
    exe = registry.executable(t.final.graph, "cpu")
    assert exe.program is not None and exe.program.control_flow
    flat = exe.prepare(t.flat_args(args))
    got = exe.execute(flat)
    loops = exe.program.control_flow
    assert all(loop.ok for loop in loops), [x.reason for x in loops]
    saved = [(loop, loop.fn) for loop in loops]
    for loop, _ in saved:
        loop.fn = None  # the per-iteration body
    per_step = exe.execute(flat)
    for loop, f in saved:
        loop.fn = f
    want = t.run(*args, backend="reference").value
    for g, s, w in zip(got, per_step, jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, s, rtol=rtol, atol=rtol)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)
    return exe.source + "".join(loop.source for loop in loops)


@pytest.mark.parametrize("steps", [1, 5])
def test_an_lstm_and_its_gradient_split_and_concatenate_in_the_compiled_loop(steps: int) -> None:
    p = {"wx": _arr(3, 16), "wh": _arr(4, 16), "b": _arr(16)}
    xs = _arr(steps, 2, 3)
    src = _check(jax.value_and_grad(_lstm), p, xs)
    assert "np.concatenate(" in src and "views; each taken contiguous" in src


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("n", [1, 3])
def test_scan_stacked_attention_layers_and_their_gradient_run_compiled(n: int, reverse: bool) -> None:
    x, layers = _arr(2, 4, 8), _layers(n)
    _check(lambda x, ls: _attention_layers(x, ls, reverse), x, layers)
    src = _check(jax.grad(lambda x, ls: _attention_layers(x, ls, reverse)[0].sum(), (0, 1)), x, layers)
    assert "np.stack(" in src and "np.dot(" in src and "_b in range(" in src  # a batched dot


def test_float64_layers_compile_in_float64() -> None:
    with jax.enable_x64(True):
        x, layers = _arr(2, 4, 8, dtype=np.float64), _layers(2, dtype=np.float64)
        src = _check(jax.grad(lambda x, ls: _attention_layers(x, ls)[0].sum(), (0, 1)), x, layers,
                     rtol=1e-9)
    assert "np.float64" in src


@pytest.mark.parametrize("steps", [1, 4])
def test_pad_slice_concatenate_with_pytree_carries(steps: int) -> None:
    src = _check(_pieces, _arr(steps, 3, 4), _arr(3, 4))
    assert "np.full((6, 6), " in src and "np.concatenate(" in src  # the pad, grown before its crop
