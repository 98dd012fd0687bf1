"""What remarks cost: `explore()` of the 12-layer MLP+attention gradient (1,730 nodes traced)
with remarks on and off (explorer.ir.remarks.disabled), in the same run, interleaved.

Times are this process's CPU seconds (time.process_time: explore() runs on one thread), which
a machine shared with other jobs disturbs far less than wall-clock time does. Prints the
median time of each, their ratio (issue 41's goal: remarks cost at most 10%, a
ratio of at most 1.10), and the remarks by pass and kind on that program. On a loaded machine
the two explore() medians move by more than remarks cost, so it also times each pass alone,
on its own input stage, on and off (interleaved): the sum of those differences over
explore()'s time is the cost with less noise.

    python -m bench.remarks [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from contextlib import nullcontext

import explorer as gx
from explorer.examples import mlp_attention_grad
from explorer.ir.remarks import disabled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    repeats = ap.parse_args().repeats
    fn, args = mlp_attention_grad()
    t = gx.explore(fn, *args)  # warm-up: JAX's jaxpr cache, the op table's lazy parts
    with disabled():
        gx.explore(fn, *args)
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeats):
        for on in (True, False):  # interleaved, so drift in the machine's load hits both
            with nullcontext() if on else disabled():
                t0 = time.process_time()
                gx.explore(fn, *args)
                times[on].append(time.process_time() - t0)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    nodes = len(t.stages[0].graph)
    print(f"mlp_attention_grad: {nodes:,} nodes traced, {len(t.stages)} stages, "
          f"{repeats} runs each, medians")
    print(f"explore() with remarks {on:.3f} CPU s, without {off:.3f} CPU s: ratio {on / off:.3f} "
          f"(goal <= 1.10); fastest runs {min(times[True]):.3f} s and "
          f"{min(times[False]):.3f} s: ratio {min(times[True]) / min(times[False]):.3f}")
    extra = 0.0
    for k, s in enumerate(t.stages[1:], start=1):
        if s.pass_ is None:
            continue
        p = s.pass_
        pass_times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(repeats):
            for on in (True, False):
                with nullcontext() if on else disabled():
                    t0 = time.process_time()
                    p(t.stages[k - 1].graph)
                    pass_times[on].append(time.process_time() - t0)
        a, b = statistics.median(pass_times[True]), statistics.median(pass_times[False])
        extra += a - b
        print(f"  {s.name} alone: {a * 1e3:.1f} ms with remarks, {b * 1e3:.1f} ms without")
    print(f"passes' extra time with remarks / explore() without: {extra / off:.3f}")
    count = Counter((s.name, r.kind) for s in t.stages for r in s.report.remarks)
    rules = Counter((s.name, r.rule) for s in t.stages for r in s.report.remarks)
    print(f"remarks: {sum(count.values())}")
    for (stage, kind), k in sorted(count.items()):
        print(f"  {stage:<20}{kind:<10}{k:>6}")
    print("by rule:")
    for (stage, rule), k in sorted(rules.items()):
        print(f"  {stage:<20}{rule:<30}{k:>6}")


if __name__ == "__main__":
    main()
