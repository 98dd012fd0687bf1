"""The what-if controls at model scale (issue 41): on the 12-layer model's gradient
(explorer.examples.mlp_attention_grad, 1,730 traced nodes), how long a control change takes
from setting the trait to the new stage's view built (the Python side of the redraw: the
re-plan, the swap and the view of the stage shown), for a few memory limits, an infeasible
one (refused), no limit, and a pipeline edit; and the same on a program that the split does
cut, whose chunks change with the limit. Also the one-time search for the limits the split
can meet (what the slider spans; once per pipeline, when the panel opens).

Each figure is measured in this run with time.perf_counter, on a widget as trace.widget()
makes it (the background view builder on), showing the final stage.

    python -m bench.whatif
"""

from __future__ import annotations

import time

import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.examples import mlp_attention_grad
from explorer.units import format_bytes

GOAL = 1.0  # seconds per control change (issue 41)


def _timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def pairwise(x, y, b):  # type: ignore[no-untyped-def]
    d = jnp.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
    return jnp.exp(-d) @ b


def changes(w, values: list[tuple[str, object]]) -> float:  # type: ignore[no-untyped-def]
    """Set each (trait, value) in turn; print the seconds and the outcome; the slowest."""
    worst = 0.0
    print(f"{'change':<44}{'seconds':>9}  outcome")
    for trait, value in values:
        seconds = _timed(lambda: setattr(w, trait, value))  # noqa: B023
        worst = max(worst, seconds)
        s = w.whatif
        loops = ", ".join(f"%{k} x{n}" for k, n in s["chunks"].items()) or "no split loop"
        outcome = ("refused: smallest " + f"{s['smallest_limit']:,}" if s["error"] else
                   f"{len(w.stages)} stages, planned peak {format_bytes(s['planned_peak'])}, "
                   f"{loops}, view of stage {w.stage} {w.stages[w.stage]['name']}")
        print(f"{trait + ' = ' + repr(value)[:30]:<44}{seconds:>9.3f}  {outcome}")
    return worst


def main() -> None:
    fn, args = mlp_attention_grad(12)
    trace = gx.explore(fn, *args)
    w = trace.widget()
    w.index = len(w.stages) - 1
    print(f"12-layer model gradient: {len(trace.stages[0].graph):,} traced nodes, "
          f"{len(trace.stages)} stages, final planned peak "
          f"{format_bytes(trace.final.cost.peak_bytes)}")
    found = _timed(w.find_limits)
    s = w.whatif
    print(f"finding the feasible limits (once per pipeline): {found:.3f} s: smallest "
          f"{s['smallest_limit']:,} bytes (needed by {s['needed_by'][:60]}), nothing split from "
          f"{s['unsplit_limit']:,}")
    smallest = s["smallest_limit"]
    worst = changes(w, [("memory_limit", "1MiB"), ("memory_limit", "512KiB"),
                        ("memory_limit", str(smallest + 4096)), ("memory_limit", str(smallest)),
                        ("memory_limit", str(smallest // 2)), ("memory_limit", ""),
                        ("pipeline", ["simplify", "dce", "fuse"]), ("pipeline", list(w.pipeline)),
                        ("memory_limit", "1MiB")])
    verdict = "within" if worst <= GOAL else "OVER"
    print(f"slowest control change: {worst:.3f} s ({verdict} the {GOAL:.0f} s goal)")

    # a program the split does cut: the chunks change with the limit
    rng = np.random.default_rng(0)
    x, y, b = (rng.standard_normal(s) for s in ((2000, 3), (1000, 3), (1000, 2)))
    w = gx.explore(pairwise, x, y, b).widget()
    w.index = len(w.stages) - 1
    found = _timed(w.find_limits)
    print(f"\npairwise kernel sum (2000 x 1000 points): feasible limits found in {found:.3f} s: "
          f"{w.whatif['smallest_limit']:,} to {w.whatif['unsplit_limit']:,} bytes")
    worst = changes(w, [("memory_limit", "4MiB"), ("memory_limit", "1MiB"),
                        ("memory_limit", "256KiB"), ("memory_limit", "1KiB"),
                        ("memory_limit", "")])
    print(f"slowest control change: {worst:.3f} s")


if __name__ == "__main__":
    main()
