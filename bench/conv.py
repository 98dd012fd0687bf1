"""Convolutions on the cpu backend against jax.jit (issue 42): 3x3 convolutions from a
network's first layer (3 -> 16 channels) to wide ones (128 -> 128), strided, transposed and
1x1, each forward and its gradient (jax.grad of the sum of squares of the output with
respect to both the image and the kernel), plus the wide zoo's U-Net and ResNet programs
(tests/corpora/wide.py, bench size). Every ratio is the cpu backend's time over jax.jit's
measured in the same run: blocks of calls alternate, each after a short idle pause (so that
neither pays for the other runtime's threads still spinning), and a ratio is the median over
rounds of the two blocks' minimum times. The listing's method for each convolution (the
generated program's comment) is printed beside it.

    python -m bench.conv              # every shape
    python -m bench.conv --quick      # fewer rounds
    python -m bench.conv 32-64 unet   # the shapes whose names contain one of these
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from tests.corpora.wide import resnet, unet

SETTLE = 0.05  # idle seconds before each block (OpenBLAS's and XLA's threads stop spinning)
DN = ("NHWC", "HWIO", "NHWC")


def _conv(stride: int = 1, transposed: bool = False) -> Callable[[Any, Any], Any]:
    def f(x: Any, w: Any) -> Any:
        if transposed:
            return jax.lax.conv_transpose(x, w, (stride, stride), "SAME", dimension_numbers=DN)
        return jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=DN)
    return f


def _grad(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    return jax.grad(lambda x, w: jnp.sum(f(x, w) ** 2), argnums=(0, 1))


def shapes() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """name -> (function, arguments): each convolution forward and its gradient."""
    rng = np.random.default_rng(0)
    out: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {}
    cases = [  # (batch, size, in channels, out channels, kernel, stride, transposed)
        (32, 32, 3, 16, 3, 1, False), (32, 32, 16, 32, 3, 1, False),
        (16, 32, 32, 64, 3, 1, False), (16, 32, 64, 64, 3, 1, False),
        (8, 32, 128, 128, 3, 1, False), (8, 64, 32, 64, 3, 1, False),
        (16, 32, 32, 64, 3, 2, False), (16, 16, 64, 32, 2, 2, True),
        (16, 32, 64, 64, 1, 1, False)]
    for b, hw, ci, co, k, s, t in cases:
        x = rng.standard_normal((b, hw, hw, ci)).astype(np.float32)
        w = (rng.standard_normal((k, k, ci, co)) / math.sqrt(k * k * ci)).astype(np.float32)
        tag = f"{b}x{hw}x{hw} {ci}-{co} {k}x{k}" + (f" s{s}" if s > 1 else "") + \
            (" transposed" if t else "")
        f = _conv(s, t)
        out[tag] = (f, (x, w))
        out[tag + " grad"] = (_grad(f), (x, w))
    out["unet grad (wide, bench)"] = unet("bench")
    out["resnet bn grad (wide, bench)"] = resnet("bench")
    return out


def _block(fn: Callable[..., Any], args: tuple[Any, ...], calls: int) -> float:
    time.sleep(SETTLE)
    best = math.inf
    for _ in range(calls):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t)
    return best


def methods(compiled: Any) -> str:
    """The methods the final stage's listing names for its convolutions, counted."""
    text = "\n".join(e.exe.source for e in compiled.entries.values())
    names = re.findall(r"conv_general_dilated.*laid out ahead: ([^(\n]*)", text)
    return ", ".join(f"{m.strip()} x{names.count(m)}" for m in sorted(set(names)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    rounds = 3 if a.quick else 7
    print(f"{'convolution':<40}{'jax.jit ms':>11}{'cpu ms':>9}{'ratio':>7}  methods")
    ratios = []
    for name, (fn, args) in shapes().items():
        if a.names and not any(s in name for s in a.names):
            continue
        jit = jax.jit(fn)
        want = jax.tree_util.tree_map(np.asarray, jit(*args))
        cpu = gx.compile(fn, backend="cpu")
        got = cpu(*args)
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(np.asarray(g), w, rtol=2e-3, atol=1e-2 * np.abs(w).max())
        t0 = time.perf_counter()
        jax.block_until_ready(jit(*args))
        calls = max(3, min(20, int(0.1 / max(time.perf_counter() - t0, 1e-6))))
        tj, tc, rs = [], [], []
        for r in range(rounds):
            order = [(jit, tj), (cpu, tc)]
            for f, ts in order if r % 2 else order[::-1]:
                ts.append(_block(f, args, calls))
            rs.append(tc[-1] / tj[-1])
        ratio = statistics.median(rs)
        ratios.append(ratio)
        print(f"{name:<40}{min(tj) * 1e3:>11.2f}{min(tc) * 1e3:>9.2f}{ratio:>7.2f}  "
              f"{methods(cpu)}", flush=True)
    if ratios:
        print(f"geometric mean {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}, "
              f"worst {max(ratios):.2f}")


if __name__ == "__main__":
    main()
