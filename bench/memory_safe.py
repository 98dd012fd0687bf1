"""Memory-safe execution (issue 4): programs whose intermediates do not fit, run under a limit.

Prints, measured in this run: seconds and the measured peak of temporaries (tracemalloc, as
`trace.run` reports it; "n/a" where the allocator is not Python's) next to the limit, for
  - the Gaussian kernel-vector product exp(-0.5*sum((x[:,None]-y[None])**2,-1)) @ v, float64,
    D=3, at N=2e4: NumPy naive and hand-chunked, jax.jit, KeOps (pykeops, when it builds),
    and ours under memory_limit="64MiB"; at N=2e5 (a 320 GB kernel matrix) ours under
    "256MiB" against KeOps (with --full or --large: it takes about 100x the N=2e4 time);
    then the ratios of those times, measured in this run;
  - kNN, k=10, top_k of negative squared distances, d=3, 1e5 points: ours under "256MiB"
    (1e3 queries by default, 1e4 with --full) and jax.jit.
Usage: python -m bench.memory_safe [--full] [--naive-cap GiB]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.analysis.memory import plan
from explorer.backends import registry
from explorer.units import format_bytes

jax.config.update("jax_enable_x64", True)


def kernel_vector(x: Any, y: Any, v: Any) -> Any:
    return jnp.exp(-0.5 * jnp.sum((x[:, None] - y[None]) ** 2, -1)) @ v


def knn(q: Any, p: Any) -> Any:
    return jax.lax.top_k(-jnp.sum((q[:, None] - p[None]) ** 2, -1), 10)[1]


def numpy_naive(x: np.ndarray, y: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * np.sum((x[:, None] - y[None]) ** 2, -1)) @ v


def numpy_chunked(x: np.ndarray, y: np.ndarray, v: np.ndarray, rows: int = 256) -> np.ndarray:
    out = np.empty(len(x))
    for s in range(0, len(x), rows):
        d = np.sum((x[s:s + rows, None] - y[None]) ** 2, -1)
        out[s:s + rows] = np.exp(-0.5 * d) @ v
    return out


def measured(fn: Callable[[], Any]) -> tuple[Any, float, int]:
    """(value, seconds, peak bytes of Python-visible allocations, less the result)."""
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    t0 = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return value, seconds, peak - base - np.asarray(value).nbytes


def row(name: str, seconds: float | None, peak: int | str, limit: str = "", note: str = "") -> None:
    secs = f"{seconds:10.2f}" if seconds is not None else f"{'-':>10}"
    pk = format_bytes(peak) if isinstance(peak, int) else peak
    print(f"  {name:<30}{secs}  {pk:>12}  {limit:>8}  {note}")


TIMES: dict[str, float] = {}  # run name -> seconds, for the ratios
CALLS: dict[str, Callable[[], Any]] = {}  # run name -> a call that reruns it (timing only)


def jit_row(fn: Callable, *args: Any, key: str = "") -> Any:
    f = jax.jit(fn)
    f(*args).block_until_ready()  # compile
    t0 = time.perf_counter()
    out = f(*args).block_until_ready()
    TIMES[f"jax.jit{key}"] = time.perf_counter() - t0
    row("jax.jit (XLA, CPU)", TIMES[f"jax.jit{key}"], "n/a", note="XLA's allocator")
    return np.asarray(out)


def _explored(fn: Callable, args: tuple, limit: str, backend: str) -> tuple[Any, str]:
    """The program split for `backend` (whose declared temporaries the plan counts)."""
    t0 = time.perf_counter()
    tr = gx.explore(fn, *args, options=gx.CompileOptions(gx.parse_bytes(limit), backend))
    plan_s = time.perf_counter() - t0
    loop = next(n for n in tr.final.graph.nodes if n.op == "loop")
    return tr, (f"planned {format_bytes(plan(tr.final.graph, backend).peak_bytes)}, "
                f"{-(-loop.attrs['size'] // loop.attrs['chunk'])} iterations of "
                f"{loop.attrs['chunk']}, explore {plan_s:.2f}s; unsplit plan "
                f"{format_bytes(tr.stages[0].cost.peak_bytes)}")


def ours(fn: Callable, args: tuple, limit: str, reference: bool = True, key: str = "") -> Any:
    """Our split program on the reference interpreter and on the CPU backend, each planned
    for its backend (on the CPU, a map-reduce body is one generated kernel per chunk, which
    holds no pairwise chunk, so its chunks are larger); the CPU executable runs once to
    compile before the timed run."""
    r = None
    if reference:
        tr, note = _explored(fn, args, limit, "reference")
        r = tr.run()
        row("ours (reference, split)", r.seconds, r.peak_bytes, limit, note)
        assert r.peak_bytes <= gx.parse_bytes(limit)
    tr, note = _explored(fn, args, limit, "cpu")
    if not reference:  # a long run: no whole warm-up run; its kernels' structure was
        # compiled on a small instance (shape-generic kernels: the same compiled function)
        registry.executable(tr.final.graph, "cpu", tr.options).warm = True  # type: ignore[attr-defined]
    c = tr.run(backend="cpu")  # its executable runs once first (compiling), then measures
    TIMES[f"ours{key}"] = c.seconds
    CALLS[f"ours{key}"] = lambda: registry.time_graph(tr.final.graph, args, "cpu", tr.options,
                                                      repeats=1, warmup=0)
    fused = sum("mapreduce_" in k.source for k in c.kernels)
    row("ours (CPU backend, split)", c.seconds, c.peak_bytes, limit,
        f"{len(c.kernels)} generated kernels ({fused} map-reduce); {note}")
    assert c.peak_bytes <= gx.parse_bytes(limit)
    if r is not None:
        np.testing.assert_allclose(np.asarray(c.value), np.asarray(r.value), rtol=1e-9, atol=1e-9)
    return c.value


def keops_call(make: Callable[[Any], Callable[[], np.ndarray]], key: str, warm: bool = True,
               label: str = "KeOps (pykeops, CPU)") -> np.ndarray | None:
    """KeOps's run of the call `make(LazyTensor)` builds, timed once after a warm-up call
    (which compiles its kernel with the machine's g++ the first time, then cached on disk)."""
    try:
        from pykeops.numpy import LazyTensor
    except Exception as e:  # not installed, or it cannot build here
        row(label, None, "-", note=f"skipped: {type(e).__name__}: {e}")
        return None
    call = make(LazyTensor)
    if warm:
        call()
    t0 = time.perf_counter()
    out = call()
    TIMES[f"keops{key}"] = time.perf_counter() - t0
    CALLS[f"keops{key}"] = call
    row(label, TIMES[f"keops{key}"], "n/a", note="C++ kernel, no temporaries")
    return out


def _sq_dist(lazy: Any, x: np.ndarray, y: np.ndarray) -> Any:
    return ((lazy(x[:, None, :]) - lazy(y[None, :, :])) ** 2).sum(-1)


def keops_row(x: np.ndarray, y: np.ndarray, v: np.ndarray, key: str = "") -> np.ndarray | None:
    """KeOps's Sum reduction: exp(-|x_i - y_j|^2 / 2) @ v."""
    def make(lazy: Any) -> Callable[[], np.ndarray]:
        k = (-0.5 * _sq_dist(lazy, x, y)).exp()
        return lambda: (k @ v[:, None])[:, 0]

    return keops_call(make, key, warm=len(x) <= 20_000)


def bench_kernel_vector(n: int, limit: str, baselines: bool, naive_cap: float,
                        reference: bool = True) -> None:
    rng = np.random.default_rng(0)
    key = f"@kernel-vector N={n:,}"
    x, y, v = rng.standard_normal((n, 3)), rng.standard_normal((n, 3)), rng.standard_normal(n)
    print(f"kernel-vector product, float64, N=M={n:,}, D=3 (dense kernel "
          f"{format_bytes(n * n * 8)}, naive difference {format_bytes(n * n * 24)})")
    want = None
    if baselines:
        need = 2 * n * n * 24
        if need <= naive_cap * 2**30:
            want, s, pk = measured(lambda: numpy_naive(x, y, v))
            row("NumPy naive", s, pk)
        else:
            row("NumPy naive", None, "-", note=f"skipped: needs ~{format_bytes(need)} "
                                              f"(cap {naive_cap} GiB, --naive-cap)")
        chunked, s, pk = measured(lambda: numpy_chunked(x, y, v))
        row("NumPy hand-chunked (256 rows)", s, pk)
        want = chunked if want is None else want
        jit_row(kernel_vector, x, y, v, key=key)
    if not reference:  # compile the CPU kernels' structure before the long timed run
        small = tuple(a[:2000] for a in (x, y, v))
        gx.explore(kernel_vector, *small, options=gx.CompileOptions(gx.parse_bytes("1MiB"), "cpu")
                   ).run(backend="cpu")
    keops = keops_row(x, y, v, key=key)
    want = keops if want is None else want
    got = ours(kernel_vector, (x, y, v), limit, reference, key=key)
    if baselines:
        interleaved(key)
    if want is not None:
        err = float(np.max(np.abs(np.asarray(got) - want)) / np.max(np.abs(want)))
        print(f"  max relative difference ours vs {'NumPy' if baselines else 'KeOps'}: {err:.1e}")


def logsumexp(x: Any, y: Any) -> Any:
    s = -0.5 * jnp.sum((x[:, None] - y[None]) ** 2, -1)
    m = jnp.max(s, 1, keepdims=True)
    return jnp.log(jnp.sum(jnp.exp(s - m), 1)) + m[:, 0]


def bench_logsumexp(n: int, limit: str) -> None:
    """KeOps's LogSumExp reduction against ours (an online softmax fold) and jax.jit."""
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((n, 3)), rng.standard_normal((n, 3))
    print(f"logsumexp_j(-|x_i - y_j|^2 / 2), float64, N=M={n:,}, D=3")
    key = f"@logsumexp N={n:,}"
    want = jit_row(logsumexp, x, y, key=key)
    keops = keops_call(lambda lazy: lambda: (-0.5 * _sq_dist(lazy, x, y)).logsumexp(dim=1)[:, 0],
                       key)
    got = np.asarray(ours(logsumexp, (x, y), limit, key=key))
    rel = lambda other: float(np.max(np.abs(got - other) / np.abs(other)))  # noqa: E731
    print(f"  max relative difference ours vs jax.jit: {rel(want):.1e}"
          + ("" if keops is None else f", vs KeOps: {rel(keops):.1e}"))


def bench_knn(queries: int, points: int, limit: str) -> None:
    rng = np.random.default_rng(1)
    q, p = rng.standard_normal((queries, 3)), rng.standard_normal((points, 3))
    print(f"kNN, k=10, {queries:,} queries x {points:,} points, d=3, float64 (distances "
          f"{format_bytes(queries * points * 8)})")
    key = f"@kNN {queries:,} queries"
    want = jit_row(knn, q, p, key=key)
    keops = keops_call(lambda lazy: lambda: _sq_dist(lazy, q, p).argKmin(K=10, dim=1), key,
                       label="KeOps (pykeops, CPU, ArgKMin)")
    got = np.asarray(ours(knn, (q, p), limit, key=key))
    print(f"  neighbours equal to jax.jit's: {np.mean(got == want):.4%}"
          + ("" if keops is None else f", to KeOps's: {np.mean(got == keops):.4%}"))


def interleaved(key: str, rounds: int = 3) -> None:
    """ours and KeOps timed alternately, `rounds` times each: on a shared machine the load
    changes within a run, and alternating exposes both to it alike."""
    if f"ours{key}" not in CALLS or f"keops{key}" not in CALLS:
        return
    times: dict[str, list[float]] = {"ours": [], "keops": []}
    for _ in range(rounds):
        for name in times:
            t0 = time.perf_counter()
            CALLS[f"{name}{key}"]()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"  interleaved x{rounds} ({key[1:]}): ours (CPU) median {med['ours']:.2f} s "
          f"{[round(t, 2) for t in times['ours']]}, KeOps {med['keops']:.2f} s "
          f"{[round(t, 2) for t in times['keops']]}: ratio {med['ours'] / med['keops']:.2f}")


def ratios() -> None:
    print("ratios (same run):")
    for key in dict.fromkeys(k[len("ours"):] for k in TIMES if k.startswith("ours")):
        for base in ("keops", "jax.jit"):
            other = TIMES.get(f"{base}{key}")
            if other is not None:
                print(f"  {key[1:]}: ours (CPU) / {base} = {TIMES[f'ours{key}'] / other:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="N=2e5 and 1e4 kNN queries (slow)")
    ap.add_argument("--large", action="store_true",
                    help="only N=2e5 under 256MiB, on the CPU backend (minutes, not half an hour)")
    ap.add_argument("--naive-cap", type=float, default=4.0,
                    help="GiB the naive NumPy baseline may use before it is skipped")
    args = ap.parse_args()
    print(f"{'':2}{'run':<30}{'seconds':>10}  {'peak':>12}  {'limit':>8}")
    print(f"load average: {os.getloadavg()}")
    if args.large:
        bench_kernel_vector(200_000, "256MiB", False, args.naive_cap, reference=False)
        ratios()
        return
    bench_kernel_vector(20_000, "64MiB", True, args.naive_cap)
    if args.full:
        bench_kernel_vector(200_000, "256MiB", False, args.naive_cap)
    else:
        print("kernel-vector product at N=200,000 under 256MiB: run with --full or --large")
    bench_logsumexp(20_000, "64MiB")
    bench_knn(10_000 if args.full else 1_000, 100_000, "256MiB")
    ratios()
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
