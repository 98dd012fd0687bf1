"""Scatters and gathers on the cpu backend against jax.jit, measured in one run: segment_sum,
scatter-add and gathers (rows, embedding lookups, take_along_axis) at several sizes, few and
many segments, sorted and random indices, 1-D and row updates; then the wide zoo's graph
network and mixture of experts (tests/corpora/wide.py). Prints, per program, the min of
`--repeats` calls of each and their ratio (cpu / jax.jit), and for the scatters the strategy
scatter_parallel.py picked (owner, sorted, privatized; "serial" below its size threshold).

    python -m bench.scatter            # the micro-benchmarks and gnn, moe at bench size
    python -m bench.scatter --quick    # fewer repeats, no wide zoo programs
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.backends.cpu import scatter_parallel

rng = np.random.default_rng(0)


def _ids(n: int, hi: int, ordered: bool) -> np.ndarray:
    i = rng.integers(0, hi, n).astype(np.int32)
    return np.sort(i) if ordered else i


def _f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def micro() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    out: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {}
    for n, segs in ((1 << 20, 16), (1 << 20, 1 << 16)):
        for ordered in (False, True):
            out[f"segment_sum 1-D {n} -> {segs} {'sorted' if ordered else 'random'}"] = (
                lambda v, i, s=segs: jax.ops.segment_sum(v, i, num_segments=s),
                (_f32(n), _ids(n, segs, ordered)))
    for rows, segs, d in ((32768, 4096, 64), (32768, 16, 64), (4096, 64, 256)):
        for ordered in (False, True):
            out[f"segment_sum rows {rows}x{d} -> {segs} {'sorted' if ordered else 'random'}"] = (
                lambda v, i, s=segs: jax.ops.segment_sum(v, i, num_segments=s),
                (_f32(rows, d), _ids(rows, segs, ordered)))
    out["scatter-add x.at[i].add(u) 4096x64 <- 32768 rows"] = (
        lambda x, i, u: x.at[i].add(u), (_f32(4096, 64), _ids(32768, 4096, False),
                                         _f32(32768, 64)))
    out["scatter-max 1-D 65536 <- 1M"] = (
        lambda x, i, u: x.at[i].max(u), (_f32(65536), _ids(1 << 20, 65536, False), _f32(1 << 20)))
    out["gather x[senders] 4096x64 at 32768"] = (lambda x, i: x[i],
                                                 (_f32(4096, 64), _ids(32768, 4096, False)))
    out["gather embedding 32000x256 at 4096"] = (lambda x, i: x[i],
                                                 (_f32(32000, 256), _ids(4096, 32000, False)))
    out["gather 1-D 1M at 1M"] = (lambda x, i: x[i], (_f32(1 << 20), _ids(1 << 20, 1 << 20, False)))
    out["take_along_axis 4096x256 at 4096x32"] = (
        lambda x, i: jnp.take_along_axis(x, i, -1),
        (_f32(4096, 256), rng.integers(0, 256, (4096, 32)).astype(np.int32)))
    out["gnn grad of a gather (scatter-add)"] = (
        jax.grad(lambda x, i: (x[i] ** 2).sum()), (_f32(4096, 64), _ids(32768, 4096, False)))
    return out


def _time(f: Callable[..., Any], args: tuple[Any, ...], repeats: int) -> float:
    jax.block_until_ready(f(*args))
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=None)
    a = ap.parse_args()
    repeats = a.repeats or (5 if a.quick else 10)
    programs = micro()
    if not a.quick:
        from tests.corpora.wide import wide

        programs.update({k: v for k, v in wide("bench").items() if k.startswith(("gnn", "moe"))})
    picked: list[str] = []
    call = scatter_parallel.Strategy.__call__

    def record(self: scatter_parallel.Strategy, *args: Any) -> None:
        call(self, *args)
        picked.append(self.last)

    scatter_parallel.Strategy.__call__ = record  # type: ignore[method-assign]
    print(f"numba threads {scatter_parallel.threads()}, min of {repeats} calls")
    print(f"{'program':<52}{'jax ms':>9}{'cpu ms':>9}{'ratio':>7}  strategies")
    ratios = []
    for name, (fn, args) in programs.items():
        cpu, jit = gx.compile(fn, backend="cpu"), jax.jit(fn)
        jax.tree_util.tree_map(lambda g, w: np.testing.assert_allclose(
            g, w, rtol=2e-3, atol=2e-3), cpu(*args), jit(*args))
        tj = _time(jit, args, repeats)
        picked.clear()
        tc = _time(cpu, args, repeats)
        ratios.append(tc / tj)
        how = ",".join(sorted(set(picked))) or "serial/none"
        print(f"{name:<52}{tj * 1e3:>9.3f}{tc * 1e3:>9.3f}{tc / tj:>7.2f}  {how}", flush=True)
    print(f"geometric mean {math.exp(np.mean(np.log(ratios))):.2f}x")


if __name__ == "__main__":
    main()
