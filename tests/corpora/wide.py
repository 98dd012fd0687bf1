"""The wide zoo (issue 42): architectures beyond the zoo's GPT, CNN and RNN, written as their
communities write them. A ViT, a LLaMA-style transformer with its layers stacked under
`lax.scan`, an LSTM, a graph network with `segment_sum`, a top-k mixture of experts,
per-example gradients clipped as in DP-SGD, a state-space layer by `associative_scan`, a U-Net
with strided and transposed convolutions, and a ResNet block with batch norm; each with its
gradient, and the ViT's and LLaMA's logits as inference runs them. `wide("small")` gives
sizes for tests (tests/test_wide.py runs them on every backend); `wide("bench")` realistic
sizes for bench/models.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Program = tuple[Callable[..., Any], tuple[Any, ...]]


class _Init:
    """Seeded float32 arrays, scaled as their fan-in asks."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def normal(self, *shape: int, scale: float | None = None) -> np.ndarray:
        s = scale if scale is not None else 1 / math.sqrt(shape[-2] if len(shape) > 1 else 1)
        return (self.rng.standard_normal(shape) * s).astype(np.float32)

    def ints(self, high: int, *shape: int) -> np.ndarray:
        return self.rng.integers(0, high, shape).astype(np.int32)


def _layer_norm(x: Any, g: Any, b: Any, eps: float = 1e-6) -> Any:
    mu = x.mean(-1, keepdims=True)
    var = jnp.var(x, -1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + eps) * g + b


def _xent(logits: Any, labels: Any) -> Any:
    return -jnp.take_along_axis(jax.nn.log_softmax(logits), labels[..., None], -1).mean()


# ---------------------------------------------------------------- ViT (patches, einsum attention)

def vit_logits(p: dict[str, Any], images: Any, patch: int, heads: int) -> Any:
    b, h, w, c = images.shape
    x = images.reshape(b, h // patch, patch, w // patch, patch, c)
    x = x.transpose(0, 1, 3, 2, 4, 5).reshape(b, (h // patch) * (w // patch), patch * patch * c)
    x = x @ p["patch"] + p["pos"]
    cls = jnp.broadcast_to(p["cls"], (b, 1, x.shape[-1]))
    x = jnp.concatenate([cls, x], 1)
    for layer in p["layers"]:
        y = _layer_norm(x, layer["ln1_g"], layer["ln1_b"])
        q, k, v = (jnp.einsum("btd,dhk->bthk", y, layer[n]) for n in ("wq", "wk", "wv"))
        a = jax.nn.softmax(jnp.einsum("bqhk,bthk->bhqt", q, k) / math.sqrt(q.shape[-1]), -1)
        x = x + jnp.einsum("bhqt,bthk,hkd->bqd", a, v, layer["wo"])
        y = _layer_norm(x, layer["ln2_g"], layer["ln2_b"])
        x = x + jax.nn.gelu(y @ layer["w1"] + layer["b1"]) @ layer["w2"] + layer["b2"]
    return _layer_norm(x[:, 0], p["ln_g"], p["ln_b"]) @ p["head"]


def vit_loss(p: dict[str, Any], images: Any, labels: Any, patch: int, heads: int) -> Any:
    return _xent(vit_logits(p, images, patch, heads), labels)


def vit(size: str, grad: bool = True) -> Program:
    i = _Init(1)
    b, img, patch, d, heads, layers, classes = ((4, 16, 4, 32, 4, 2, 10) if size == "small"
                                               else (32, 32, 4, 128, 4, 4, 10))
    n, hd = (img // patch) ** 2, d // heads

    def layer() -> dict[str, np.ndarray]:
        return {"ln1_g": np.ones(d, np.float32), "ln1_b": np.zeros(d, np.float32),
                "ln2_g": np.ones(d, np.float32), "ln2_b": np.zeros(d, np.float32),
                "wq": i.normal(d, heads, hd, scale=d ** -0.5),
                "wk": i.normal(d, heads, hd, scale=d ** -0.5),
                "wv": i.normal(d, heads, hd, scale=d ** -0.5),
                "wo": i.normal(heads, hd, d, scale=d ** -0.5),
                "w1": i.normal(d, 4 * d), "b1": np.zeros(4 * d, np.float32),
                "w2": i.normal(4 * d, d), "b2": np.zeros(d, np.float32)}
    p = {"patch": i.normal(patch * patch * 3, d), "pos": i.normal(n, d, scale=0.02),
         "cls": i.normal(1, 1, d, scale=0.02), "layers": [layer() for _ in range(layers)],
         "ln_g": np.ones(d, np.float32), "ln_b": np.zeros(d, np.float32),
         "head": i.normal(d, classes)}

    images, labels = i.normal(b, img, img, 3, scale=1.0), i.ints(classes, b)
    if not grad:  # inference: the logits
        return (lambda p, images: vit_logits(p, images, patch, heads)), (p, images)

    def loss(p: Any, images: Any, labels: Any) -> Any:
        return vit_loss(p, images, labels, patch, heads)
    return jax.grad(loss), (p, images, labels)


# ---------------------------------------------------------------- LLaMA (RMSNorm, rotary, SwiGLU, scan)

def _rms_norm(x: Any, g: Any, eps: float = 1e-6) -> Any:
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * g


def _rotary(x: Any, pos: Any) -> Any:
    """Rotary position embedding on (..., T, H, K): pairs of channels turned by pos * freq."""
    k = x.shape[-1]
    freq = 1.0 / (10000.0 ** (jnp.arange(0, k, 2, dtype=jnp.float32) / k))
    angle = pos[:, None, None] * freq  # (T, 1, K/2)
    cos, sin = jnp.cos(angle), jnp.sin(angle)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return jnp.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).reshape(x.shape)


def llama_logits(p: dict[str, Any], tokens: Any, heads: int) -> Any:
    t = tokens.shape[-1]
    x = p["embed"][tokens]
    pos = jnp.arange(t, dtype=jnp.float32)
    mask = jnp.tril(jnp.ones((t, t), bool))

    def block(x: Any, lp: dict[str, Any]) -> tuple[Any, None]:
        y = _rms_norm(x, lp["attn_norm"])
        q = _rotary((y @ lp["wq"]).reshape(*y.shape[:-1], heads, -1), pos)
        k = _rotary((y @ lp["wk"]).reshape(*y.shape[:-1], heads, -1), pos)
        v = (y @ lp["wv"]).reshape(*y.shape[:-1], heads, -1)
        s = jnp.einsum("bqhk,bthk->bhqt", q, k) / math.sqrt(q.shape[-1])
        a = jax.nn.softmax(jnp.where(mask, s, -jnp.inf), -1)
        x = x + jnp.einsum("bhqt,bthk->bqhk", a, v).reshape(x.shape) @ lp["wo"]
        y = _rms_norm(x, lp["mlp_norm"])
        return x + (jax.nn.silu(y @ lp["w_gate"]) * (y @ lp["w_up"])) @ lp["w_down"], None

    x, _ = jax.lax.scan(block, x, p["layers"])
    return _rms_norm(x, p["norm"]) @ p["out"]


def llama(size: str, grad: bool = True) -> Program:
    i = _Init(2)
    b, t, d, heads, layers, vocab, hidden = ((2, 8, 32, 4, 2, 64, 64) if size == "small"
                                             else (4, 128, 256, 8, 4, 1024, 688))
    stack = lambda *shape: i.normal(layers, *shape)  # noqa: E731
    p = {"embed": i.normal(vocab, d, scale=1.0),
         "layers": {"attn_norm": np.ones((layers, d), np.float32),
                    "mlp_norm": np.ones((layers, d), np.float32),
                    "wq": stack(d, d), "wk": stack(d, d), "wv": stack(d, d), "wo": stack(d, d),
                    "w_gate": stack(d, hidden), "w_up": stack(d, hidden),
                    "w_down": stack(hidden, d)},
         "norm": np.ones(d, np.float32), "out": i.normal(d, vocab)}
    tokens = i.ints(vocab, b, t)
    if not grad:  # inference: the logits
        return (lambda p, tokens: llama_logits(p, tokens, heads)), (p, tokens)

    def loss(p: Any, tokens: Any, targets: Any) -> Any:
        return _xent(llama_logits(p, tokens, heads), targets)
    return jax.grad(loss), (p, tokens, np.roll(tokens, -1, 1))


# ---------------------------------------------------------------- LSTM

def lstm_loss(p: dict[str, Any], xs: Any, ys: Any) -> Any:
    hidden = p["wh"].shape[0]

    def cell(carry: tuple[Any, Any], x: Any) -> tuple[tuple[Any, Any], Any]:
        h, c = carry
        gates = x @ p["wx"] + h @ p["wh"] + p["b"]
        i, f, g, o = jnp.split(gates, 4, -1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    zeros = jnp.zeros((xs.shape[1], hidden), xs.dtype)
    _, hs = jax.lax.scan(cell, (zeros, zeros), xs)
    return jnp.mean((hs @ p["out"] - ys) ** 2)


def lstm(size: str) -> Program:
    i = _Init(3)
    steps, b, f, h = (6, 3, 4, 8) if size == "small" else (128, 32, 64, 256)
    p = {"wx": i.normal(f, 4 * h), "wh": i.normal(h, 4 * h), "b": np.zeros(4 * h, np.float32),
         "out": i.normal(h, 1)}
    return jax.grad(lstm_loss), (p, i.normal(steps, b, f, scale=1.0), i.normal(steps, b, 1, scale=1.0))


# ---------------------------------------------------------------- a graph network (segment_sum)

def gnn_loss(p: dict[str, Any], nodes: Any, senders: Any, receivers: Any, targets: Any) -> Any:
    x = nodes
    for layer in p["layers"]:
        messages = jax.nn.relu(jnp.concatenate([x[senders], x[receivers]], -1) @ layer["msg"])
        agg = jax.ops.segment_sum(messages, receivers, num_segments=x.shape[0])
        x = x + jax.nn.relu(jnp.concatenate([x, agg], -1) @ layer["upd"])
    return jnp.mean((x @ p["out"] - targets) ** 2)


def gnn(size: str) -> Program:
    i = _Init(4)
    n, e, d, layers = (12, 40, 8, 2) if size == "small" else (4096, 32768, 64, 3)
    p = {"layers": [{"msg": i.normal(2 * d, d), "upd": i.normal(2 * d, d)}
                    for _ in range(layers)], "out": i.normal(d, 1)}
    return jax.grad(gnn_loss), (p, i.normal(n, d, scale=1.0), i.ints(n, e), i.ints(n, e),
                                i.normal(n, 1, scale=1.0))


# ---------------------------------------------------------------- top-k mixture of experts

def moe_loss(p: dict[str, Any], x: Any, y: Any, k: int) -> Any:
    gates, experts = jax.lax.top_k(jax.nn.softmax(x @ p["router"]), k)  # (T, k)
    gates = gates / gates.sum(-1, keepdims=True)
    combine = (jax.nn.one_hot(experts, p["w1"].shape[0]) * gates[..., None]).sum(1)  # (T, E)
    h = jax.nn.gelu(jnp.einsum("td,edh->teh", x, p["w1"]))
    out = jnp.einsum("teh,ehd,te->td", h, p["w2"], combine)
    return jnp.mean((out - y) ** 2)


def moe(size: str) -> Program:
    i = _Init(5)
    t, d, hidden, e, k = (6, 8, 16, 4, 2) if size == "small" else (512, 128, 256, 8, 2)
    p = {"router": i.normal(d, e), "w1": i.normal(e, d, hidden), "w2": i.normal(e, hidden, d)}

    def loss(p: Any, x: Any, y: Any) -> Any:
        return moe_loss(p, x, y, k)
    return jax.grad(loss), (p, i.normal(t, d, scale=1.0), i.normal(t, d, scale=1.0))


# ---------------------------------------------------------------- per-example gradients (DP-SGD)

def _mlp_loss(p: list[tuple[Any, Any]], x: Any, y: Any) -> Any:
    for w, b in p[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = p[-1]
    return _xent(x @ w + b, y)


def dp_sgd_grad(p: list[tuple[Any, Any]], xs: Any, ys: Any, clip: float = 1.0) -> Any:
    """Per-example gradients, each clipped to norm `clip`, averaged: DP-SGD without its noise."""
    grads = jax.vmap(jax.grad(_mlp_loss), in_axes=(None, 0, 0))(p, xs, ys)
    norms = jnp.sqrt(sum(jnp.sum(g.reshape(g.shape[0], -1) ** 2, -1)
                         for g in jax.tree_util.tree_leaves(grads)))
    scale = jnp.minimum(1.0, clip / (norms + 1e-6))
    return jax.tree_util.tree_map(
        lambda g: jnp.mean(g * scale.reshape(-1, *([1] * (g.ndim - 1))), 0), grads)


def per_example(size: str) -> Program:
    i = _Init(6)
    b, sizes = (4, (6, 8, 3)) if size == "small" else (128, (64, 128, 128, 10))
    p = [(i.normal(a, c), np.zeros(c, np.float32)) for a, c in zip(sizes[:-1], sizes[1:])]
    return dp_sgd_grad, (p, i.normal(b, sizes[0], scale=1.0), i.ints(sizes[-1], b))


# ---------------------------------------------------------------- a state-space layer (associative_scan)

def ssm_loss(p: dict[str, Any], u: Any, y: Any) -> Any:
    """A diagonal linear recurrence h_t = a * h_{t-1} + B u_t over time by associative_scan
    (as S5 and LRU write it), read out by C, with a skip and a GELU."""
    a = jnp.exp(-jnp.exp(p["log_decay"]))  # (N,) in (0, 1)
    bu = u @ p["B"]  # (B, T, N)
    a_t = jnp.broadcast_to(a, bu.shape)

    def combine(left: tuple[Any, Any], right: tuple[Any, Any]) -> tuple[Any, Any]:
        return right[0] * left[0], right[0] * left[1] + right[1]

    _, h = jax.lax.associative_scan(combine, (a_t, bu), axis=1)
    out = jax.nn.gelu(h @ p["C"] + u * p["D"])
    return jnp.mean((out - y) ** 2)


def ssm(size: str) -> Program:
    i = _Init(7)
    b, t, d, n = (2, 16, 4, 8) if size == "small" else (16, 1024, 64, 128)
    p = {"log_decay": i.normal(n, scale=0.5), "B": i.normal(d, n), "C": i.normal(n, d),
         "D": i.normal(d, scale=1.0)}
    return jax.grad(ssm_loss), (p, i.normal(b, t, d, scale=1.0), i.normal(b, t, d, scale=1.0))


# ---------------------------------------------------------------- U-Net (strided, transposed, skips)

_DN = ("NHWC", "HWIO", "NHWC")


def _conv(x: Any, w: Any, stride: int = 1) -> Any:
    return jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=_DN)


def unet_loss(p: dict[str, Any], images: Any, targets: Any) -> Any:
    e1 = jax.nn.relu(_conv(images, p["e1"]) + p["b1"])  # H
    e2 = jax.nn.relu(_conv(e1, p["e2"], 2) + p["b2"])  # H/2
    mid = jax.nn.relu(_conv(e2, p["mid"], 2) + p["bm"])  # H/4
    pooled = jax.lax.reduce_window(mid, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 1, 1, 1), "SAME")
    up2 = jax.lax.conv_transpose(pooled, p["u2"], (2, 2), "SAME", dimension_numbers=_DN)  # H/2
    d2 = jax.nn.relu(_conv(jnp.concatenate([up2, e2], -1), p["d2"]))
    up1 = jax.lax.conv_transpose(d2, p["u1"], (2, 2), "SAME", dimension_numbers=_DN)  # H
    d1 = jax.nn.relu(_conv(jnp.concatenate([up1, e1], -1), p["d1"]))
    return jnp.mean((_conv(d1, p["out"]) - targets) ** 2)


def unet(size: str) -> Program:
    i = _Init(8)
    b, hw, c = (2, 8, 4) if size == "small" else (8, 64, 32)

    def w(k: int, cin: int, cout: int) -> np.ndarray:
        return i.normal(k, k, cin, cout, scale=1 / math.sqrt(k * k * cin))
    p = {"e1": w(3, 3, c), "b1": np.zeros(c, np.float32), "e2": w(3, c, 2 * c),
         "b2": np.zeros(2 * c, np.float32), "mid": w(3, 2 * c, 4 * c),
         "bm": np.zeros(4 * c, np.float32), "u2": w(2, 4 * c, 2 * c), "d2": w(3, 4 * c, 2 * c),
         "u1": w(2, 2 * c, c), "d1": w(3, 2 * c, c), "out": w(1, c, 1)}
    return jax.grad(unet_loss), (p, i.normal(b, hw, hw, 3, scale=1.0),
                                 i.normal(b, hw, hw, 1, scale=1.0))


# ---------------------------------------------------------------- a ResNet block with batch norm

def _batch_norm(x: Any, g: Any, b: Any, eps: float = 1e-5) -> Any:
    mu = x.mean((0, 1, 2))
    var = x.var((0, 1, 2))
    return (x - mu) * jax.lax.rsqrt(var + eps) * g + b


def resnet_loss(p: dict[str, Any], images: Any, labels: Any) -> Any:
    x = jax.nn.relu(_batch_norm(_conv(images, p["stem"]), p["g0"], p["b0"]))
    for blk in p["blocks"]:
        y = jax.nn.relu(_batch_norm(_conv(x, blk["c1"]), blk["g1"], blk["b1"]))
        y = _batch_norm(_conv(y, blk["c2"]), blk["g2"], blk["b2"])
        x = jax.nn.relu(x + y)
    return _xent(x.mean((1, 2)) @ p["head"], labels)


def resnet(size: str) -> Program:
    i = _Init(9)
    b, hw, c, blocks = (2, 6, 4, 1) if size == "small" else (32, 32, 64, 2)
    ones, zeros = np.ones(c, np.float32), np.zeros(c, np.float32)
    conv = lambda cin: i.normal(3, 3, cin, c, scale=1 / math.sqrt(9 * cin))  # noqa: E731
    p = {"stem": conv(3), "g0": ones, "b0": zeros, "head": i.normal(c, 10),
         "blocks": [{"c1": conv(c), "g1": ones, "b1": zeros, "c2": conv(c), "g2": ones,
                     "b2": zeros} for _ in range(blocks)]}
    return jax.grad(resnet_loss), (p, i.normal(b, hw, hw, 3, scale=1.0), i.ints(10, b))


# ---------------------------------------------------------------- the set

PROGRAMS: dict[str, Callable[[str], Program]] = {
    "vit grad": vit, "llama scan grad": llama, "lstm grad": lstm, "gnn segment_sum grad": gnn,
    "moe top-2 grad": moe, "dp-sgd per-example grads": per_example,
    "ssm associative_scan grad": ssm, "unet grad": unet, "resnet bn grad": resnet,
    "vit logits": lambda size: vit(size, grad=False),
    "llama scan logits": lambda size: llama(size, grad=False),
}


def wide(size: str = "small") -> dict[str, Program]:
    """Every wide-zoo program at `size` ("small" for tests, "bench" for bench/models.py)."""
    return {name: make(size) for name, make in PROGRAMS.items()}
