"""Profile overhead and coverage (issue 25): on every realistic model of bench/models.py and
every zoo program, the final stage profiled on the cpu backend: a profiled run's time over a
bare run's (goal: at most 2x) and the node times' sum over the whole profiled run (goal:
within 10% of it), both measured in the same run of this script, alternating.

    python -m bench.profile            # every program
    python -m bench.profile --quick    # fewer repeats, the realistic models only
"""

from __future__ import annotations

import argparse
import math

import explorer as gx
from bench.models import models
from tests.corpora.zoo import zoo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--backend", default="cpu")
    a = ap.parse_args()
    repeats = 3 if a.quick else 7
    programs = dict(models())
    if not a.quick:
        programs.update({f"zoo/{k}": v for k, v in zoo().items()})
    print(f"{'program':<28}{'nodes':>6}{'bare ms':>10}{'profiled':>10}{'overhead':>10}"
          f"{'coverage':>10}  slowest node")
    worst_overhead, worst_cover = 0.0, 0.0
    for name, (fn, args) in programs.items():
        trace = gx.explore(fn, *args)
        p = trace.profile(backend=a.backend, repeats=repeats)
        top = p.top(1)
        slow = f"{top[0].name} {top[0].seconds / p.total:.0%}" if top else ""
        print(f"{name:<28}{len(trace.final.graph):>6}{p.unprofiled * 1e3:>10.3f}"
              f"{p.total * 1e3:>10.3f}{p.overhead:>9.2f}x{p.coverage:>10.1%}  {slow}")
        worst_overhead = max(worst_overhead, p.overhead)
        if not math.isnan(p.coverage):
            worst_cover = max(worst_cover, abs(1 - p.coverage))
    print(f"worst overhead {worst_overhead:.2f}x (goal <= 2x); node times within "
          f"{worst_cover:.1%} of the whole run (goal <= 10%)")


if __name__ == "__main__":
    main()
