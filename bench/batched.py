"""Batched products on the CPU backend against jax.jit (issue 42: "batched small products as
one batched call, or a generated kernel"), each ratio measured in one run, calls alternating:

- per-example gradients (vmap(grad), clipped as in DP-SGD) of an MLP at the wide zoo's bench
  size (batch 128, 64-128-128-10) and at larger DP-SGD sizes (batch 256; a wider MLP);
- the per-example outer products alone (the batched loop of cpu/batched_dots.py), and their
  squared norms (dot-order's outer-product rules);
- einsum attention with two batch dims (ViT/LLaMA-like) and the MoE's expert einsums, which
  keep np.matmul (one gemm per batch entry).

    python -m bench.batched            # every program, 21 calls each
    python -m bench.batched --quick    # 7 calls each

Each figure: min and median of the calls, ours / jax.jit (min over min). On a loaded machine,
BLAS's and numba's spinning threads make single calls wildly slower: compare the mins.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from tests.corpora.wide import dp_sgd_grad

Program = tuple[Callable[..., Any], tuple[Any, ...]]


def _mlp(batch: int, sizes: tuple[int, ...], seed: int = 0) -> Program:
    rng = np.random.default_rng(seed)
    p = [((rng.standard_normal((a, c)) / np.sqrt(a)).astype(np.float32), np.zeros(c, np.float32))
         for a, c in zip(sizes[:-1], sizes[1:])]
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int32)
    return dp_sgd_grad, (p, x, y)


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def programs() -> dict[str, Program]:
    rng = np.random.default_rng(1)
    x, g = _f32(rng, 128, 128), _f32(rng, 128, 128)
    q, k = _f32(rng, 8, 4, 197, 64), _f32(rng, 8, 4, 197, 64)
    t, w1 = _f32(rng, 512, 128), _f32(rng, 8, 128, 256)
    h, w2, c = _f32(rng, 512, 8, 256), _f32(rng, 8, 256, 128), _f32(rng, 512, 8)
    return {
        "dp-sgd b128 64-128-128-10 (wide bench)": _mlp(128, (64, 128, 128, 10)),
        "dp-sgd b256 64-128-128-10": _mlp(256, (64, 128, 128, 10)),
        "dp-sgd b128 784-256-256-10": _mlp(128, (784, 256, 256, 10)),
        "outer products b128 128x128": (lambda x, g: jnp.einsum("bi,bj->bij", x, g), (x, g)),
        "outer-product norms b128 128x128": (
            lambda x, g: jnp.sum(jnp.einsum("bi,bj->bij", x, g) ** 2, (1, 2)), (x, g)),
        "attention scores bhqd,bhkd->bhqk": (
            lambda q, k: jnp.einsum("bhqd,bhkd->bhqk", q, k), (q, k)),
        "moe td,edh->teh": (lambda t, w: jnp.einsum("td,edh->teh", t, w), (t, w1)),
        "moe teh,ehd,te->td": (lambda h, w, c: jnp.einsum("teh,ehd,te->td", h, w, c), (h, w2, c)),
    }


def _calls(f: Callable[[], Any], n: int) -> list[float]:
    jax.block_until_ready(f())
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        jax.block_until_ready(f())
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    n = 7 if ap.parse_args().quick else 21
    print(f"{'program':<40}{'jit ms':>9}{'ours ms':>9}{'ratio':>7}   (min; median ratio)")
    ratios = []
    for name, (fn, args) in programs().items():
        jitted, ours = jax.jit(fn), gx.compile(fn, backend="cpu")
        want = jax.tree_util.tree_leaves(jitted(*args))
        for a, b in zip(jax.tree_util.tree_leaves(ours(*args)), want, strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-3, atol=2e-3)
        tj, tc = [], []
        for _ in range(3):  # alternate, so both see the same load
            tj += _calls(functools.partial(jitted, *args), n // 3)
            tc += _calls(functools.partial(ours, *args), n // 3)
        r = min(tc) / min(tj)
        ratios.append(r)
        print(f"{name:<40}{min(tj) * 1e3:>9.3f}{min(tc) * 1e3:>9.3f}{r:>7.2f}"
              f"   ({statistics.median(tc) / statistics.median(tj):.2f})", flush=True)
    print(f"geometric mean {np.exp(np.mean(np.log(ratios))):.2f}, worst {max(ratios):.2f}")


if __name__ == "__main__":
    main()
