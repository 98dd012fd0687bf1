"""Split programs on Dask (issue 16): the kernel-vector product on a LocalCluster against the
CPU backend in the same run, and its scaling over worker counts.

Prints, measured in this run:
  - the Gaussian kernel-vector product exp(-0.5*sum((x[:,None]-y[None])**2,-1)) @ v, float64,
    D=3, at N (default 200,000) under --limit (default 256MiB): the CPU backend (numba kernels
    on every core, chunk after chunk) and backend="dask" on a LocalCluster of one worker
    process per core (one thread each), their seconds, measured peaks and the ratio;
  - scaling at --scaling-n (default 50,000; 0 skips it) over --workers (default 1,2): seconds
    per worker count and the speed-up over one worker.
Each cluster is started before its timed runs (start-up is not timed); each timed scaling run
is the second on its cluster; at --n the one run includes the workers' kernel loading (seconds
of minutes). `uptime`'s load average is printed beside the figures: the machine may be shared.
Usage: python -m bench.distributed [--n N] [--limit 256MiB] [--scaling-n N] [--workers 1,2,4]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

import jax
import numpy as np

import explorer as gx
from bench.memory_safe import kernel_vector
from explorer.backends import registry
from explorer.backends.dask import local_cluster
from explorer.units import format_bytes

jax.config.update("jax_enable_x64", True)


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def problem(n: int, limit: str) -> tuple[gx.Trace, tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((n, 3)), rng.standard_normal((n, 3)), rng.standard_normal(n))
    tr = gx.explore(kernel_vector, *args, memory_limit=limit)
    loop = next(x for x in tr.final.graph.nodes if x.op == "loop")
    print(f"kernel-vector product, float64, N = M = {n:,}, D = 3, under {limit}: one loop of "
          f"{-(-loop.attrs['size'] // loop.attrs['chunk']):,} x {loop.attrs['chunk']:,} rows "
          f"(planned peak {format_bytes(tr.final.cost.peak_bytes)})")
    return tr, args


def cpu_run(tr: gx.Trace) -> Any:
    exe = registry.executable(tr.final.graph, "cpu", tr.options)
    exe.warm = True  # its kernels compile on first use (numba's disk cache): no whole warm-up run
    return tr.run(backend="cpu")


def dask_runs(tr: gx.Trace, workers: int, repeats: int) -> list[Any]:
    from distributed import Client

    with local_cluster(workers) as cluster, Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(workers)
        return [tr.run(backend="dask", client=client, progress=False) for _ in range(repeats)]


def row(name: str, r: Any, limit: str, note: str = "") -> None:
    print(f"  {name:<34}{r.seconds:10.2f} s  {format_bytes(r.peak_bytes):>12}  {limit:>8}  {note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--limit", default="256MiB")
    ap.add_argument("--scaling-n", type=int, default=50_000)
    ap.add_argument("--workers", default="1,2", help="worker counts for the scaling runs")
    ap.add_argument("--skip-main", action="store_true", help="only the scaling runs")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(f"{platform.machine()}, {cores} cores, {time.strftime('%Y-%m-%d')}, {load()}")
    limit_b = gx.parse_bytes(args.limit)

    if not args.skip_main:
        tr, _ = problem(args.n, args.limit)
        print(f"  {'run':<34}{'seconds':>12}  {'peak':>12}  {'limit':>8}")
        d = dask_runs(tr, cores, 1)[-1]  # one run: the workers load their kernels in it
        row(f"dask, LocalCluster {cores} x 1 thread", d, args.limit,
            f"workers used {len(d.workers)}; {load()}")
        c = cpu_run(tr)
        row(f"CPU backend ({cores} numba threads)", c, args.limit, load())
        err = float(np.max(np.abs(np.asarray(d.value) - np.asarray(c.value)))
                    / np.max(np.abs(np.asarray(c.value))))
        print(f"  dask / CPU backend time: {d.seconds / c.seconds:.3f} (goal <= 1.2); "
              f"max relative difference {err:.1e}; peaks within the limit: "
              f"{max(d.peak_bytes, c.peak_bytes) <= limit_b}")

    if args.scaling_n:
        tr, _ = problem(args.scaling_n, args.limit)
        first: tuple[int, float] | None = None
        for w in (int(x) for x in args.workers.split(",")):
            r = dask_runs(tr, w, 2)[-1]
            first = first or (w, r.seconds)
            row(f"dask, {w} worker(s) x 1 thread", r, args.limit,
                f"speed-up over {first[0]} worker(s): {first[1] / r.seconds:.2f}; {load()}")


if __name__ == "__main__":
    main()
