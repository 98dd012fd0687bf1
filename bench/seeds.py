"""The seeds' benchmarks (issue 5): each figure is a ratio of two timings taken in one run.

    python -m bench.seeds            # the issue's sizes (a few minutes on two cores)
    python -m bench.seeds --quick    # smaller sizes, for a smoke run
    python -m bench.seeds --write    # also replace the "seeds" section of bench/RESULTS.md

Each timing is the median of `--repeats` runs after a warm-up (compilation excluded).
"ours" is our pipeline's final stage: through the JAX backend (jax.lax + jit) for the
rewrites, through the CPU backend (generated numba kernels) for the fusion goal.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.backends import reference, registry
from explorer.measure.timing import repeat

RESULTS = Path(__file__).with_name("RESULTS.md")


def _median(times: list[float]) -> float:
    return statistics.median(times)


def _jit_time(fn: Callable[..., Any], args: list[np.ndarray], repeats: int) -> float:
    jitted = jax.jit(fn)
    dev = [jax.device_put(a) for a in args]
    return _median(repeat(lambda: jax.block_until_ready(jitted(*dev)), repeats))


def _ours(fn: Callable[..., Any], args: list[np.ndarray], backend: str, repeats: int) -> tuple[float, Any]:
    t = gx.explore(fn, *args)  # the default pipeline ends with fuse
    return _median(registry.time_graph(t.final.graph, args, backend, repeats=repeats)), t


def chain(n: int, repeats: int, rng: np.random.Generator) -> list[tuple[str, float, str]]:
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    v = rng.standard_normal(n, dtype=np.float32)
    many = max(repeats, 50)  # the reordered chain takes ~1 ms: a median of 5 is noise
    naive = _jit_time(lambda a, b, v: (a @ b) @ v, [a, b, v], repeats)
    hand = _jit_time(lambda a, b, v: a @ (b @ v), [a, b, v], many)
    ours, _ = _ours(lambda a, b, v: (a @ b) @ v, [a, b, v], "jax", many)
    return [(f"(A@B)@v {n}^3: jax.jit naive / ours (JAX backend)", naive / ours, ">= 50"),
            (f"(A@B)@v {n}^3: ours / jax.jit hand-reordered A@(B@v)", ours / hand, "<= 1.2")]


def euclidean(n: int, k: int, repeats: int, rng: np.random.Generator) -> list[tuple[str, float, str]]:
    x = rng.standard_normal((n, k), dtype=np.float32)
    y = rng.standard_normal((n, k), dtype=np.float32)

    def naive(x: Any, y: Any) -> Any:
        return jnp.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)

    def quadratic(x: Any, y: Any) -> Any:
        return jnp.sum(x * x, 1)[:, None] - 2 * x @ y.T + jnp.sum(y * y, 1)[None, :]

    t_naive = _jit_time(naive, [x, y], repeats)
    t_hand = _jit_time(quadratic, [x, y], repeats)
    ours, _ = _ours(naive, [x, y], "jax", repeats)
    ours_cpu, _ = _ours(naive, [x, y], "cpu", repeats)  # the epilogue written over the dot
    return [(f"Euclidean N=M={n}, K={k}: jax.jit naive / ours (JAX backend)", t_naive / ours, ">= 4"),
            (f"Euclidean N=M={n}, K={k}: jax.jit naive / ours (CPU backend)", t_naive / ours_cpu,
             ">= 4"),
            (f"Euclidean N=M={n}, K={k}: ours / jax.jit quadratic form", ours / t_hand, "<= 1.2")]


def gemm2(n: int, repeats: int, rng: np.random.Generator) -> list[tuple[str, float, str]]:
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    ours, _ = _ours(lambda a, b: jnp.sum(a[:, :, None] * b[None, :, :], axis=1), [a, b], "jax",
                    repeats)
    ref = _jit_time(jnp.matmul, [a, b], repeats)
    return [(f"gemm2 (broadcast-multiply-reduce) {n}^2: ours (JAX backend) / jnp.matmul", ours / ref,
             "<= 1.1")]


def fusion(n: int, repeats: int, rng: np.random.Generator) -> list[tuple[str, float, str]]:
    x, y = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))

    def fn(x: Any, y: Any) -> Any:
        return jnp.mean(x ** 2 * 3 + y)

    ours, t = _ours(fn, [x, y], "cpu", repeats)
    traced = t.stages[0].graph
    eager = _median(registry.time_graph(traced, [x, y], "reference", repeats=repeats))
    jit = _jit_time(fn, [x, y], repeats)
    _, _, eager_peak = reference.run(traced, [x, y])
    ours_peak = registry.run_graph(t.final.graph, [x, y], "cpu").peak_bytes
    return [(f"fusion mean(x**2*3+y) {n}^2 f32, CPU: ours / jax.jit", ours / jit, "<= 1.5"),
            (f"fusion {n}^2, CPU: NumPy eager / ours", eager / ours, ">= 2"),
            (f"fusion {n}^2, CPU: our temporaries / NumPy eager's (tracemalloc: {ours_peak:,} B "
             f"/ {eager_peak:,} B)", ours_peak / eager_peak, "<= 0.01")]


def _met(value: float, goal: str) -> bool:
    op, target = goal.split()
    return value >= float(target) if op == ">=" else value <= float(target)


def run(quick: bool, repeats: int) -> list[tuple[str, float, str]]:
    rng = np.random.default_rng(0)
    rows = chain(500 if quick else 2000, repeats, rng)
    rows += euclidean(1000 if quick else 4000, 64, repeats, rng)
    rows += gemm2(256 if quick else 1024, repeats, rng)
    rows += fusion(2048 if quick else 8192, repeats, rng)
    return rows


def table(rows: list[tuple[str, float, str]]) -> str:
    lines = ["| figure | measured | goal | met |", "|---|---:|---|---|"]
    for name, value, goal in rows:
        lines.append(f"| {name} | {value:.3g} | {goal} | {'yes' if _met(value, goal) else '**no**'} |")
    return "\n".join(lines)


def write(rows: list[tuple[str, float, str]], quick: bool) -> None:
    cpu = platform.processor() or platform.machine()
    import os

    section = (f"<!-- seeds:start -->\n## seeds\n\n"
               f"`python -m bench.seeds{' --quick' if quick else ''}`, {datetime.date.today()}, "
               f"{cpu}, {os.cpu_count()} cores, JAX {jax.__version__} on {jax.default_backend()}; "
               f"medians after warm-up, each ratio from one run.\n\n{table(rows)}\n<!-- seeds:end -->")
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    pattern = re.compile(r"<!-- seeds:start -->.*?<!-- seeds:end -->", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda m: section, text)
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    RESULTS.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    ns = parser.parse_args()
    rows = run(ns.quick, ns.repeats)
    print(table(rows))
    if ns.write:
        write(rows, ns.quick)


if __name__ == "__main__":
    main()
