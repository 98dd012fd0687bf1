"""The GPU backend on a GPU, against `jax.jit` of the same function on the same GPU, every
ratio within one run (needs CuPy and a CUDA device; it says so and exits otherwise).

    python -m bench.gpu [--json PATH] [--budget SECONDS] [--large]

Sections, each skipped with a note once the time budget is spent:
  - kernels: fused reductions and row kernels (mean(x**2*3+y), softmax, layer norm, column
    sums, row max) and the ops generated apart (a convolution, max pooling, an embedding
    lookup, segment_sum) on device-resident arguments: the stage's generated program against
    jax.jit, medians of timed calls each waited for, and the bandwidth each reached (the
    bytes it must read and write, over its time);
  - models: bench/models.py's realistic zoo, `gx.compile(fn, backend=BACKEND)` against
    jax.jit, called as a user calls them (host arrays in, arrays out);
  - memory-safe: the Gaussian kernel-vector product (float64, D=3) under a memory limit,
    N=20,000 (and N=200,000 with --large) against jax.jit and KeOps (pykeops on the GPU,
    when it builds); kNN (k=10, d=3, float64, 1e4 queries x 1e5 points) queries per second;
  - graphs (issue 40): each model's stage as its captured CUDA graph against the same
    program line by line and jax.jit, on device arguments, and whether it was captured;
  - kNN neighbours (issue 24): 2,000 queries x 20,000 points, d=3, k=8, float32: the rows
    whose neighbours differ from jax.jit's of the naive program, and whether each is a
    near-tie in float64 distances.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.backends import registry

ROWS: list[dict[str, Any]] = []
BACKEND = "gpu"  # --backend cpu runs the same script here, to check it without a GPU
START = time.perf_counter()


def _median_seconds(call: Callable[[], Any], min_calls: int = 5, seconds: float = 0.3) -> float:
    """Median of timed calls (at least `min_calls`, about `seconds` in all) after one untimed."""
    call()
    t0 = time.perf_counter()
    call()
    once = max(time.perf_counter() - t0, 1e-6)
    times = []
    for _ in range(max(min_calls, min(200, int(seconds / once)))):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def record(section: str, name: str, **fields: Any) -> None:
    row = {"section": section, "name": name, **fields}
    ROWS.append(row)
    shown = ", ".join(f"{k} {_fmt(v)}" for k, v in fields.items())
    print(f"[{section}] {name}: {shown}", flush=True)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _rel(got: Any, want: Any) -> float:
    g = [np.asarray(a, np.float64) for a in jax.tree_util.tree_leaves(got)]
    w = [np.asarray(a, np.float64) for a in jax.tree_util.tree_leaves(want)]
    if len(g) != len(w) or any(a.shape != b.shape for a, b in zip(g, w)):
        return math.inf
    num = sum(float(np.sum((a - b) ** 2)) for a, b in zip(g, w))
    den = sum(float(np.sum(b ** 2)) for b in w)
    return math.sqrt(num / den) if den else math.sqrt(num)


# ---------------------------------------------------------------- kernels

SMALL = 1  # --small: every size divided by this (a check of the script, not a figure)


def _rng_args(shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(tuple(max(1, d // SMALL) for d in s)).astype(np.float32)
            for s in shapes]


_IDS = np.random.default_rng(1).integers(0, 50257, (8, 1024)).astype(np.int32)
_SEGMENTS = np.random.default_rng(2).integers(0, 10_000, 1_000_000).astype(np.int32)
KERNELS: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]]]] = {
    "mean(x**2*3+y) 8192^2": (lambda x, y: jnp.mean(x ** 2 * 3 + y), [(8192, 8192)] * 2),
    "softmax 8192x4096": (lambda x: jax.nn.softmax(x, -1), [(8192, 4096)]),
    "layer norm 16384x1024": (lambda x: (x - x.mean(-1, keepdims=True))
                              / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5), [(16384, 1024)]),
    "column sums tanh 10^6x64": (lambda x: jnp.sum(jnp.tanh(x), 0) * 2, [(1_000_000, 64)]),
    "row max 64x10^6": (lambda x: jnp.max(x * 1.5, 1), [(64, 1_000_000)]),
    # generated CUDA for ops that are not fused kernels (backends/gpu/routines.py)
    "conv 3x3 64x32x32x16->32": (lambda x, w: jax.lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
        [(64, 32, 32, 16), (3, 3, 16, 32)]),
    "max pool 2x2 64x32x32x32": (lambda x: jax.lax.reduce_window(
        x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"), [(64, 32, 32, 32)]),
    "embedding 50257x768[8x1024]": (lambda t: t[_IDS % t.shape[0]], [(50257, 768)]),
    "segment_sum 10^6x64 -> 10^4": (lambda x: jax.ops.segment_sum(
        x, _SEGMENTS[:x.shape[0]] % 10_000, num_segments=10_000), [(1_000_000, 64)]),
}


def _host(x: Any) -> np.ndarray:
    return x.get() if hasattr(x, "get") else np.asarray(x)


def bench_kernels() -> None:
    for name, (fn, shapes) in KERNELS.items():
        try:
            args = _rng_args(shapes)
            t = gx.explore(fn, *args)
            exe = registry.executable(t.final.graph, BACKEND, t.options)
            dev = exe.prepare(t.flat_args(tuple(args)))
            ours = _median_seconds(lambda e=exe, d=dev: e.execute(d))
            got = [_host(o) for o in exe.execute(dev)]
            jf = jax.jit(fn)
            jargs = [jax.device_put(a) for a in args]
            want = np.asarray(jf(*jargs))
            jit = _median_seconds(lambda f=jf, j=jargs: jax.block_until_ready(f(*j)))
            moved = sum(a.nbytes for a in args) + want.nbytes
            kinds = sorted({k.source.split("\n", 1)[0][:60] for k in exe.all_kernels()})
            record("kernels", name, ours_ms=ours * 1e3, jit_ms=jit * 1e3, ratio=ours / jit,
                   ours_GBps=moved / ours / 1e9, jit_GBps=moved / jit / 1e9,
                   rel_err=_rel(got[0], want), interpreted="; ".join(exe.notes) or "-",
                   kernels=len(exe.all_kernels()), first_lines=kinds[:3])
        except Exception as e:  # noqa: BLE001  (a failure is a figure too)
            record("kernels", name, error=f"{type(e).__name__}: {str(e)[:300]}")


# ---------------------------------------------------------------- models

def bench_models() -> None:
    from bench.models import jit_of, models

    for name, (fn, args) in models().items():
        try:
            jitted, want = jit_of(fn, args)
            compiled = gx.compile(fn, backend=BACKEND)
            got = compiled(*args)
            jit = _median_seconds(lambda f=jitted, a=args: jax.block_until_ready(f(*a)))
            ours = _median_seconds(lambda c=compiled, a=args: c(*a))
            record("models", name, ours_ms=ours * 1e3, jit_ms=jit * 1e3, ratio=ours / jit,
                   rel_err=_rel(got, want))
        except Exception as e:  # noqa: BLE001
            record("models", name, error=f"{type(e).__name__}: {str(e)[:300]}")


# ---------------------------------------------------------------- graphs (issue 40, Part 2)

def bench_graphs() -> None:
    """Each model's final stage three ways on device-resident arguments: its CUDA graph
    replayed (backends/gpu/graphs.py), the same program line by line, and jax.jit; plus the
    graph called as a user calls it (host arrays in). Whether it was captured, and why not."""
    from bench.models import jit_of, models

    if BACKEND != "gpu":
        record("graphs", "skipped", note=f"CUDA graphs need the gpu backend, not {BACKEND}")
        return
    import cupy

    stream = cupy.cuda.get_current_stream()
    for name, (fn, args) in models().items():
        try:
            jitted, want = jit_of(fn, args)
            t = gx.explore(fn, *args)
            exe = registry.executable(t.final.graph, BACKEND, t.options)
            flat = t.flat_args(args)
            dev = exe.prepare(flat)
            lines = [_host(o) for o in exe.program.fn(*dev)]  # type: ignore[union-attr]
            exe.run_program(dev)  # the first call captures
            replayed = [_host(o) for o in exe.run_program(dev)]
            cap = exe.captured
            graph_s = _median_seconds(lambda e=exe, d=dev: e.run_program(d))
            lines_s = _median_seconds(lambda e=exe, d=dev: (e.program.fn(*d), stream.synchronize()))
            host_s = _median_seconds(lambda e=exe, f=flat: e.call(f))
            jit = _median_seconds(lambda f=jitted, a=args: jax.block_until_ready(f(*a)))
            record("graphs", name, captured=bool(cap and cap.capturable),
                   why_not="; ".join(cap.reasons) if cap else "no program",
                   graph_ms=graph_s * 1e3, lines_ms=lines_s * 1e3, host_args_ms=host_s * 1e3,
                   jit_ms=jit * 1e3, graph_over_jit=graph_s / jit, lines_over_graph=lines_s / graph_s,
                   rel_err_graph_vs_lines=_rel(replayed, lines),
                   rel_err_vs_jit=_rel(replayed, jax.tree_util.tree_leaves(want)),
                   captures=cap.captures if cap else 0, replays=cap.replays if cap else 0)
        except Exception as e:  # noqa: BLE001
            record("graphs", name, error=f"{type(e).__name__}: {str(e)[:300]}")


# ---------------------------------------------------------------- memory-safe

def _split_gpu(fn: Callable[..., Any], args: tuple[Any, ...], limit: str) -> tuple[Any, Any]:
    t = gx.explore(fn, *args, options=gx.CompileOptions(gx.parse_bytes(limit), BACKEND))
    return t, registry.executable(t.final.graph, BACKEND, t.options)


def _keops(make: Callable[[Any], Callable[[], np.ndarray]]) -> tuple[float | None, Any, str]:
    if os.environ.get("BENCH_KEOPS") == "0":
        return None, None, "skipped (BENCH_KEOPS=0)"
    try:
        from pykeops.numpy import LazyTensor

        call = make(LazyTensor)
        out = call()  # builds its kernel the first time
        t0 = time.perf_counter()
        out = call()
        return time.perf_counter() - t0, out, "ok"
    except Exception as e:  # noqa: BLE001
        return None, None, f"{type(e).__name__}: {str(e)[:200]}"


def _sq_dist(lazy: Any, x: np.ndarray, y: np.ndarray) -> Any:
    return ((lazy(x[:, None, :]) - lazy(y[None, :, :])) ** 2).sum(-1)


def bench_kernel_vector(n: int, limit: str, with_jit: bool) -> None:
    from bench.memory_safe import kernel_vector

    jax.config.update("jax_enable_x64", True)
    try:
        rng = np.random.default_rng(0)
        x, y, v = rng.standard_normal((n, 3)), rng.standard_normal((n, 3)), rng.standard_normal(n)
        t, exe = _split_gpu(kernel_vector, (x, y, v), limit)
        r = t.run(backend=BACKEND)
        dev = exe.prepare(t.flat_args((x, y, v)))
        ours = _median_seconds(lambda: exe.execute(dev), min_calls=3)
        fields: dict[str, Any] = {"ours_s": ours, "peak": r.peak_bytes, "limit": limit}
        want = None
        if with_jit:
            jf = jax.jit(kernel_vector)
            jargs = [jax.device_put(a) for a in (x, y, v)]
            want = np.asarray(jf(*jargs))
            jit = _median_seconds(lambda: jax.block_until_ready(jf(*jargs)), min_calls=3)
            fields |= {"jit_s": jit, "ours_over_jit": ours / jit}
        ks, kout, why = _keops(lambda lazy: (lambda k: lambda: (k @ v[:, None])[:, 0])(
            (-0.5 * _sq_dist(lazy, x, y)).exp()))
        if ks is not None:
            fields |= {"keops_s": ks, "ours_over_keops": ours / ks}
            want = kout if want is None else want
        else:
            fields["keops"] = why
        if want is not None:
            fields["rel_err"] = _rel(r.value, want)
        record("memory-safe", f"kernel-vector N={n:,} f64", **fields)
    except Exception as e:  # noqa: BLE001
        record("memory-safe", f"kernel-vector N={n:,} f64", error=f"{type(e).__name__}: {str(e)[:300]}")
    finally:
        jax.config.update("jax_enable_x64", False)


def bench_knn_speed(queries: int, points: int, limit: str) -> None:
    from bench.memory_safe import knn

    jax.config.update("jax_enable_x64", True)
    try:
        rng = np.random.default_rng(1)
        q, p = rng.standard_normal((queries, 3)), rng.standard_normal((points, 3))
        t, exe = _split_gpu(knn, (q, p), limit)
        dev = exe.prepare(t.flat_args((q, p)))
        ours = _median_seconds(lambda: exe.execute(dev), min_calls=3)
        got = _host(exe.execute(dev)[0])
        jf = jax.jit(knn)
        jargs = [jax.device_put(a) for a in (q, p)]
        want = np.asarray(jf(*jargs))
        jit = _median_seconds(lambda: jax.block_until_ready(jf(*jargs)), min_calls=3)
        fields = {"ours_qps": queries / ours, "jit_qps": queries / jit, "ours_over_jit": ours / jit,
                  "equal_to_jit": float(np.mean(got == want))}
        ks, kout, why = _keops(lambda lazy: lambda: _sq_dist(lazy, q, p).argKmin(K=10, dim=1))
        fields |= ({"keops_qps": queries / ks, "equal_to_keops": float(np.mean(got == kout))}
                   if ks is not None else {"keops": why})
        record("memory-safe", f"kNN k=10 {queries:,}x{points:,} f64 under {limit}", **fields)
    except Exception as e:  # noqa: BLE001
        record("memory-safe", "kNN speed", error=f"{type(e).__name__}: {str(e)[:300]}")
    finally:
        jax.config.update("jax_enable_x64", False)


# ---------------------------------------------------------------- kNN neighbours

def knn8(a: Any, b: Any) -> Any:
    return jax.lax.top_k(-jnp.sum((a[:, None] - b[None]) ** 2, -1), 8)[1]


def bench_knn_exact(limit: str | None) -> None:
    label = f"kNN k=8 2,000x20,000 f32{' under ' + limit if limit else ''}"
    try:
        rng = np.random.default_rng(0)
        q = rng.standard_normal((2000, 3)).astype(np.float32)
        p = rng.standard_normal((20000, 3)).astype(np.float32)
        t = gx.explore(knn8, q, p, options=gx.CompileOptions(
            gx.parse_bytes(limit) if limit else None, BACKEND))
        got = np.asarray(t.run(backend=BACKEND).value)
        want = np.asarray(jax.jit(knn8)(q, p))
        d64 = ((q[:, None, :].astype(np.float64) - p[None].astype(np.float64)) ** 2).sum(-1)
        rows = np.nonzero((got != want).any(1))[0]
        worst = 0.0
        for r in rows:
            a, b = np.sort(d64[r, got[r]]), np.sort(d64[r, want[r]])
            worst = max(worst, float(np.max(np.abs(a - b) / np.maximum(b, 1e-300))))
        record("knn-exact", label, rows_differing=len(rows), worst_rel_distance_gap=worst,
               ulps_f32=worst / 2.0**-24, rules=sorted({r.rule for s in t.stages
                                                        for r in s.report.rewrites}))
    except Exception as e:  # noqa: BLE001
        record("knn-exact", label, error=f"{type(e).__name__}: {str(e)[:300]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows here too")
    ap.add_argument("--budget", type=float, default=600.0, help="seconds; later sections skip")
    ap.add_argument("--large", action="store_true", help="also N=200,000 (kernel-vector)")
    ap.add_argument("--only", default="kernels,knn-exact,memory-safe,models,graphs",
                    help="comma-separated sections")
    ap.add_argument("--backend", default="gpu", help=argparse.SUPPRESS)
    ap.add_argument("--small", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    global BACKEND, SMALL
    BACKEND, SMALL = a.backend, (16 if a.small else 1)
    reason = registry.unavailable_reason(BACKEND)
    if reason is not None:
        print(f"{BACKEND} backend unavailable: {reason}")
        return
    device = "host"
    if BACKEND == "gpu":
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        device = f"{props['name'].decode()}, CuPy {cupy.__version__}"
    if jax.default_backend() == "gpu":  # like for like: our backends compute f32 dots in f32
        jax.config.update("jax_default_matmul_precision", "highest")
        device += ", jax.jit's float32 dots at 'highest' precision (no TF32)"
    print(f"device: {device}, backend {BACKEND}, JAX {jax.__version__} ({jax.default_backend()}), "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    sections: dict[str, Callable[[], None]] = {
        "kernels": bench_kernels,
        "knn-exact": lambda: (bench_knn_exact(None), bench_knn_exact("64MiB")),
        "memory-safe": lambda: (bench_kernel_vector(20_000 // SMALL, "64MiB", True),
                                bench_knn_speed(10_000 // SMALL, 100_000 // SMALL, "256MiB"),
                                a.large and bench_kernel_vector(200_000, "256MiB", False)),
        "models": bench_models,
        "graphs": bench_graphs,
    }
    for name in a.only.split(","):
        if time.perf_counter() - START > a.budget:
            record(name, "skipped", note=f"time budget {a.budget:.0f} s spent")
            continue
        sections[name]()
        if a.json:
            with open(a.json, "w") as f:
                json.dump(ROWS, f, indent=1, default=str)
    print(f"done in {time.perf_counter() - START:.1f} s")


if __name__ == "__main__":
    main()
