"""What trace.numerics costs: the 12-layer MLP+attention gradient (1,730 nodes, 9 stages).

Prints, measured in this run (repeats interleaved; medians, and the best of each, which a
loaded machine disturbs least): one reference run of all
stages (each stage's graph on the reference interpreter at the program's precision, on the
traced example arguments) and `trace.numerics()` on the same arguments (every stage at the
program's precision and in float64, each output's and each surviving node's error), and their
ratio. Issue 41's figure: the ratio is at most 5. `first_change()` is timed apart: its
bisection runs only when asked for.
"""

from __future__ import annotations

import statistics
import time

import explorer as gx
from explorer.backends.reference import check_args, evaluate
from explorer.examples import mlp_attention_grad


def main(repeats: int = 7) -> None:
    fn, args = mlp_attention_grad()
    trace = gx.explore(fn, *args)
    flat = trace.flat_args(args)

    def reference_run() -> None:
        for s in trace.stages:
            evaluate(s.graph, check_args(s.graph, flat))

    def numerics() -> None:
        trace.numerics()

    reference_run(), numerics()  # warm-up: JAX and NumPy caches, lazily built tables
    runs: dict[str, list[float]] = {"reference": [], "numerics": []}
    for _ in range(repeats):
        for name, f in (("reference", reference_run), ("numerics", numerics)):
            t0 = time.perf_counter()
            f()
            runs[name].append(time.perf_counter() - t0)
    ref, num = (statistics.median(runs[k]) for k in ("reference", "numerics"))
    best_ref, best_num = (min(runs[k]) for k in ("reference", "numerics"))
    taken = trace.numerics()
    t0 = time.perf_counter()
    change = taken.first_change()
    bisect = time.perf_counter() - t0
    print(f"mlp_attention_grad: {len(trace.stages[0].graph)} nodes, {len(trace.stages)} stages")
    print(f"{'':33}{'median':>9}{'best':>9}")
    print(f"one reference run of all stages  {ref:8.3f}s {best_ref:8.3f}s")
    print(f"trace.numerics()                 {num:8.3f}s {best_num:8.3f}s")
    print(f"ratio                            {num / ref:8.2f}x {best_num / best_ref:8.2f}x"
          f"  (goal: at most 5x)")
    found = change.name if change else "no stage"
    if change is not None and change.firing is not None:
        found += f", firing {change.firing + 1} of {change.firings}"
    print(f"first_change() with bisection    {bisect:8.3f} s: {found}")


if __name__ == "__main__":
    main()
