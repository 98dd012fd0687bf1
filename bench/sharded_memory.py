"""Memory per device (issue 43): the planner's per-device peak against what XLA plans for one
device, on every sharded zoo program (tests/corpora/sharded.py), each stage of the default
pipeline that changed the program (and the traced one).

Prints, measured in this run, per program and stage: the planned peak of all devices together
(what reference and cpu hold on one host), the planned peak per device, the jax backend's
per-device peak of that stage (XLA memory_analysis of the partitioned module on CPU; the
largest device's peak_bytes_in_use on GPU) and their ratio; and jax.jit of the user's
function against the traced stage's plan. The issue's figure: planned >= 0.9 x measured.
Usage: python -m bench.sharded_memory [--devices 4]
"""

from __future__ import annotations

import argparse
import os
import re
import sys


def _host_devices(n: int) -> None:
    """Host devices, set before JAX is imported (it fixes them when it starts)."""
    if "jax" in sys.modules:
        raise RuntimeError("bench.sharded_memory must set XLA_FLAGS before JAX is imported")
    flags = re.sub(r"--xla_force_host_platform_device_count=\S*", "", os.environ.get("XLA_FLAGS", ""))
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=4)
    devices = parser.parse_args().devices
    _host_devices(devices)

    import explorer as gx
    from explorer.measure.timing import measure_jax
    from tests.corpora.sharded import programs

    header = ("program", "stage", "planned, all", "planned/device", "XLA/device", "planned/XLA")
    rows, worst = [], float("inf")
    for name, (fn, args) in programs(devices).items():
        trace = gx.explore(fn, *args)
        for k, stage in enumerate(trace.stages):
            if k and not stage.report.changed:
                continue
            plan = stage.memory
            run = trace.run(*args, backend="jax", stage=k)
            ratio = plan.device_peak / run.peak_bytes if run.peak_bytes else float("inf")
            worst = min(worst, ratio)
            rows.append((name, f"{stage.name} on jax", f"{plan.peak_bytes:,}",
                         f"{plan.device_peak:,}", f"{run.peak_bytes:,}", f"{ratio:.2f}"))
        jit = measure_jax(fn, list(args), None, jit=True, repeats=1)
        traced = trace.stages[0].memory
        ratio = traced.device_peak / jit.peak_bytes if jit.peak_bytes else float("inf")
        worst = min(worst, ratio)
        rows.append((name, "jax-jit (vs traced)", f"{traced.peak_bytes:,}",
                     f"{traced.device_peak:,}", f"{jit.peak_bytes:,}", f"{ratio:.2f}"))
    widths = [max(len(r[c]) for r in (header, *rows)) for c in range(len(header))]
    print(f"{devices} host devices; bytes of temporaries (inputs and outputs excluded); "
          f"XLA's measured by {jit.peak_how}")
    for r in (header, *rows):
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    print(f"smallest planned/XLA: {worst:.2f} (the figure: >= 0.9 on every program)")


if __name__ == "__main__":
    main()
