"""Random memory programs for the memory-safety tests: pairwise [N, M] intermediates (a
product, or a naive squared distance through an [N, M, D] difference), a random elementwise
chain on them, and an end that reduces them to something small: a kernel-vector product,
softmax(S) @ V, logsumexp, top_k, argmin, a sum or max. Their naive temporaries are many
times the result, so a limit of 1/10 to 1/100 of them forces a split.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

ENDS = ("matvec", "softmax_v", "logsumexp", "top_k", "argmin", "sum", "max")
CHAIN = ("exp", "tanh", "negative", "scale", "square", "row")


@dataclass(frozen=True)
class MemoryProgram:
    name: str
    fn: Callable[..., Any]
    args: tuple[np.ndarray, ...]
    # for an end that returns indices (top_k, argmin): the values it ranks and the axis it
    # ranks along, so that a test can tell a near-tie broken the other way from a wrong index
    ranked: Callable[..., tuple[Any, int]] | None = None


def random_program(seed: int) -> MemoryProgram:
    rng = np.random.default_rng(seed)
    n, m = (int(v) for v in rng.integers(150, 700, 2))
    d = int(rng.integers(1, 9))
    dt = np.float32 if rng.random() < 0.5 else np.float64
    distance = bool(rng.random() < 0.5)
    chain = [str(c) for c in rng.choice(CHAIN, int(rng.integers(0, 3)))]
    end = str(rng.choice(ENDS))
    axis = int(rng.integers(0, 2))

    def pairwise(x: Any, y: Any, r: Any) -> Any:
        s = jnp.sum((x[:, None] - y[None]) ** 2, -1) if distance else x @ y.T
        for c in chain:
            if c == "scale":
                s = -0.5 * s
            elif c == "row":
                s = s + r[None, :]
            elif c == "exp":
                s = jnp.exp(-jnp.abs(s))
            else:
                s = getattr(jnp, c)(s)
        return s

    def fn(x: Any, y: Any, r: Any, v: Any) -> Any:
        s = pairwise(x, y, r)
        if end == "matvec":
            return s @ v
        if end == "softmax_v":
            return jax.nn.softmax(s, axis=-1) @ v
        if end == "logsumexp":
            mx = jnp.max(s, axis, keepdims=True)
            return jnp.log(jnp.sum(jnp.exp(s - mx), axis)) + jnp.squeeze(mx, axis)
        if end == "top_k":
            return jax.lax.top_k(-s, 5)[1]
        if end == "argmin":
            return jnp.argmin(s, axis)
        return getattr(jnp, end)(s, axis)

    args = (rng.standard_normal((n, d)).astype(dt), rng.standard_normal((m, d)).astype(dt),
            rng.standard_normal(m).astype(dt), rng.standard_normal(m).astype(dt))
    name = (f"seed{seed}: {'dist' if distance else 'dot'}[{n}x{m}x{d}] {dt.__name__} "
            f"{'+'.join(chain) or '-'} -> {end}{'' if end in ('matvec', 'softmax_v', 'top_k') else axis}")
    def ranked(x: Any, y: Any, r: Any, v: Any) -> tuple[Any, int]:
        s = pairwise(x, y, r)
        return (-s, 1) if end == "top_k" else (s, axis)

    return MemoryProgram(name, fn, args, ranked if end in ("top_k", "argmin") else None)
