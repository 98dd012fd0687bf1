"""The zoo: realistic programs as users paste them into a notebook — a transformer block and
its gradient, a CNN with pooling, an RNN with lax.scan, loops, dropout, a GP likelihood with a
Cholesky factor, an optax Adam step, equinox and flax models. Each entry is (fn, args); the
tests (tests/test_zoo.py) explore every one through the whole pipeline and run it on every
CPU-side backend against JAX. Sizes are small: these are about coverage, not speed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Program = tuple[Callable[..., Any], tuple[Any, ...]]
_rng = np.random.default_rng(7)


def _normal(*shape: int, scale: float = 0.3) -> np.ndarray:
    return (_rng.standard_normal(shape) * scale).astype(np.float32)


# ---------------------------------------------------------------- a GPT block and its gradient

VOCAB, SEQ, DIM, HEADS = 32, 8, 16, 2


def _layer_norm(x: Any, g: Any, b: Any) -> Any:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b


def _attention(p: dict[str, Any], x: Any, n_heads: int = HEADS) -> Any:
    t, d = x.shape
    q, k, v = jnp.split(x @ p["qkv"], 3, axis=-1)
    heads = lambda a: a.reshape(t, n_heads, d // n_heads).transpose(1, 0, 2)  # noqa: E731
    q, k, v = heads(q), heads(k), heads(v)
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(d // n_heads)
    mask = jnp.tril(jnp.ones((t, t), bool))
    scores = jnp.where(mask, scores, -1e9)
    out = jax.nn.softmax(scores, -1) @ v
    return out.transpose(1, 0, 2).reshape(t, d) @ p["proj"]


def gpt_block(p: dict[str, Any], tokens: Any) -> Any:
    """Token embedding (a gather), a pre-norm attention block and MLP, logits."""
    x = p["embed"][tokens] + p["pos"]
    with jax.named_scope("attention"):
        x = x + _attention(p, _layer_norm(x, p["ln1_g"], p["ln1_b"]))
    with jax.named_scope("mlp"):
        h = jax.nn.gelu(_layer_norm(x, p["ln2_g"], p["ln2_b"]) @ p["w1"])
        x = x + h @ p["w2"]
    return x @ p["embed"].T


def gpt_loss(p: dict[str, Any], tokens: Any, targets: Any) -> Any:
    logits = gpt_block(p, tokens)
    logp = jax.nn.log_softmax(logits, -1)
    return -jnp.take_along_axis(logp, targets[:, None], -1).mean()


def gpt_params() -> dict[str, np.ndarray]:
    return {"embed": _normal(VOCAB, DIM), "pos": _normal(SEQ, DIM),
            "ln1_g": np.ones(DIM, np.float32), "ln1_b": np.zeros(DIM, np.float32),
            "ln2_g": np.ones(DIM, np.float32), "ln2_b": np.zeros(DIM, np.float32),
            "qkv": _normal(DIM, 3 * DIM), "proj": _normal(DIM, DIM),
            "w1": _normal(DIM, 4 * DIM), "w2": _normal(4 * DIM, DIM)}


TOKENS = _rng.integers(0, VOCAB, SEQ).astype(np.int32)
TARGETS = np.roll(TOKENS, -1)


# ---------------------------------------------------------------- a CNN with pooling


def cnn(p: dict[str, Any], images: Any) -> Any:
    """NHWC conv + relu + max pool, NCHW-free conv with stride, average pool, dense."""
    dn = ("NHWC", "HWIO", "NHWC")
    x = jax.lax.conv_general_dilated(images, p["c1"], (1, 1), "SAME", dimension_numbers=dn)
    x = jax.nn.relu(x + p["b1"])
    x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    x = jax.lax.conv_general_dilated(x, p["c2"], (2, 2), "SAME", dimension_numbers=dn)
    x = jax.nn.relu(x)
    x = x.mean(axis=(1, 2))
    return jax.nn.log_softmax(x @ p["dense"], -1)


def cnn_loss(p: dict[str, Any], images: Any, labels: Any) -> Any:
    return -(cnn(p, images) * jax.nn.one_hot(labels, 5)).sum(-1).mean()


def cnn_params() -> dict[str, np.ndarray]:
    return {"c1": _normal(3, 3, 2, 4), "b1": _normal(4), "c2": _normal(3, 3, 4, 6),
            "dense": _normal(6, 5)}


IMAGES = _normal(2, 8, 8, 2, scale=1.0)
LABELS = np.array([1, 3], np.int32)


# ---------------------------------------------------------------- an RNN with lax.scan


def rnn(p: dict[str, Any], xs: Any) -> Any:
    def step(h: Any, x: Any) -> tuple[Any, Any]:
        h = jnp.tanh(h @ p["wh"] + x @ p["wx"] + p["b"])
        return h, h.sum()

    h, per_step = jax.lax.scan(step, jnp.zeros(p["wh"].shape[0], xs.dtype), xs)
    return h, per_step


def rnn_loss(p: dict[str, Any], xs: Any) -> Any:
    h, per_step = rnn(p, xs)
    return (h ** 2).sum() + per_step.mean()


def rnn_params() -> dict[str, np.ndarray]:
    return {"wh": _normal(6, 6), "wx": _normal(3, 6), "b": _normal(6)}


XS = _normal(5, 3, scale=1.0)


# ---------------------------------------------------------------- loops


def newton_sqrt(a: Any) -> Any:
    """Newton's method for sqrt(a), a fixed number of steps in fori_loop."""
    return jax.lax.fori_loop(0, 8, lambda i, x: 0.5 * (x + a / x), jnp.ones_like(a))


def halve_until_small(x: Any) -> Any:
    """A while loop with a data-dependent trip count."""
    def cond(c: tuple[Any, Any]) -> Any:
        return jnp.max(jnp.abs(c[1])) > 0.1

    def body(c: tuple[Any, Any]) -> tuple[Any, Any]:
        return c[0] + 1, c[1] * 0.5

    return jax.lax.while_loop(cond, body, (jnp.int32(0), x))


def piecewise(x: Any, which: Any) -> Any:
    """lax.cond and lax.switch."""
    y = jax.lax.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: -v, x)
    return jax.lax.switch(which, [jnp.sin, jnp.cos, jnp.tanh], y)


# ---------------------------------------------------------------- random numbers


def dropout_mlp(key: Any, w: Any, x: Any) -> Any:
    k1, k2 = jax.random.split(key)
    h = jax.nn.relu(x @ w)
    keep = jax.random.bernoulli(k1, 0.8, h.shape)
    h = jnp.where(keep, h / 0.8, 0.0)
    return h + 0.01 * jax.random.normal(k2, h.shape)


# ---------------------------------------------------------------- a GP likelihood


def gp_log_likelihood(x: Any, y: Any, log_ls: Any, log_noise: Any) -> Any:
    """The exact GP marginal likelihood with an RBF kernel: Cholesky and triangular solves."""
    d2 = jnp.sum((x[:, None] - x[None]) ** 2, -1)
    k = jnp.exp(-0.5 * d2 / jnp.exp(2 * log_ls)) + jnp.exp(log_noise) * jnp.eye(x.shape[0])
    chol = jnp.linalg.cholesky(k)
    alpha = jax.scipy.linalg.solve_triangular(chol, y, lower=True)
    return (-0.5 * alpha @ alpha - jnp.log(jnp.diagonal(chol)).sum()
            - 0.5 * x.shape[0] * jnp.log(2 * jnp.pi))


GP_X = _normal(12, 2, scale=1.0)
GP_Y = np.sin(GP_X.sum(-1)).astype(np.float32)


# ---------------------------------------------------------------- optax, equinox, flax


def optax_adam_step() -> Program:
    import optax

    opt = optax.adam(1e-2)
    params = {"w": _normal(4, 3), "b": _normal(3)}
    x = _normal(8, 4, scale=1.0)

    def loss(p: Any, x: Any) -> Any:
        return jnp.mean((x @ p["w"] + p["b"]) ** 2)

    def step(params: Any, state: Any, x: Any) -> Any:
        grads = jax.grad(loss)(params, x)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    state = opt.init(params)
    # one real step first, so the step count is 1 and the moments are non-zero
    params, state = step(params, state, x)
    return step, (params, state, x)


def equinox_model() -> Program:
    import equinox as eqx

    model = eqx.nn.MLP(4, 2, 16, 2, activation=jax.nn.gelu, key=jax.random.PRNGKey(1))
    x = _normal(8, 4, scale=1.0)

    @eqx.filter_grad
    def grad_loss(model: Any, x: Any) -> Any:
        return jnp.mean(jax.vmap(model)(x) ** 2)

    return (lambda m, x: grad_loss(m, x)), (model, x)


def flax_linen_model() -> Program:
    import flax.linen as nn

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            x = nn.relu(nn.Dense(16)(x))
            x = nn.LayerNorm()(x)
            return nn.Dense(3)(x)

    model = MLP()
    x = _normal(5, 4, scale=1.0)
    variables = model.init(jax.random.PRNGKey(0), x)

    def loss(variables: Any, x: Any) -> Any:
        return jnp.mean(model.apply(variables, x) ** 2)

    return jax.value_and_grad(loss), (variables, x)


def flax_nnx_model() -> Program:
    from flax import nnx

    model = nnx.Sequential(nnx.Linear(4, 8, rngs=nnx.Rngs(0)), nnx.relu,
                           nnx.Linear(8, 2, rngs=nnx.Rngs(1)))
    graphdef, state = nnx.split(model)
    x = _normal(3, 4, scale=1.0)

    def forward(state: Any, x: Any) -> Any:
        return nnx.merge(graphdef, state)(x)

    return forward, (state, x)


def zoo() -> dict[str, Program]:
    p, c, r = gpt_params(), cnn_params(), rnn_params()
    return {
        "gpt_block": (gpt_block, (p, TOKENS)),
        "gpt_grad": (jax.grad(gpt_loss), (p, TOKENS, TARGETS)),
        "cnn": (cnn, (c, IMAGES)),
        "cnn_grad": (jax.grad(cnn_loss), (c, IMAGES, LABELS)),
        "rnn_scan": (rnn, (r, XS)),
        "rnn_grad": (jax.grad(rnn_loss), (r, XS)),
        "newton_fori": (newton_sqrt, (np.array([2.0, 9.0, 0.25], np.float32),)),
        "while_halving": (halve_until_small, (_normal(4, scale=3.0),)),
        "cond_switch": (piecewise, (_normal(3, scale=1.0), np.int32(2))),
        "dropout": (dropout_mlp, (jax.random.key(0), _normal(4, 6), _normal(3, 4, scale=1.0))),
        "gp_likelihood": (gp_log_likelihood, (GP_X, GP_Y, np.float32(0.1), np.float32(-2.0))),
        "gp_grad": (jax.grad(gp_log_likelihood, argnums=(2, 3)),
                    (GP_X, GP_Y, np.float32(0.1), np.float32(-2.0))),
        "optax_adam": optax_adam_step(),
        "equinox_mlp_grad": equinox_model(),
        "flax_linen_value_and_grad": flax_linen_model(),
        "flax_nnx": flax_nnx_model(),
    }
