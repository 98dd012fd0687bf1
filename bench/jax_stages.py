"""Passes against XLA (issue 42, part 3): the jax backend's final and traced stages of every
bench program over `jax.jit` of the original function, paired call by call.

    python -m bench.jax_stages                  # the table: jax final / jax.jit, traced / jax.jit
    python -m bench.jax_stages --stages gnn     # also every pipeline prefix of programs whose
                                                # name holds "gnn": which pass first costs XLA
    python -m bench.jax_stages --rounds 2       # a smoke run

The programs are bench/models.py's `models()` and the wide zoo's `wide("bench")`
(tests/corpora/wide.py). Each program runs in a fresh Python process, timed by bench/models.py's
`compare` with the jax backend's columns only, so each column alternates with jax.jit call by
call (`paired`: at least 25 steps a round, 5 rounds, the median of per-round ratios).
"jax final, cpu's plan" is the final stage with the passes told the cpu backend instead
(passes/targets.py: the rewrites that decline for XLA fire): what those decisions buy. A column
"after P" is `gx.compile(fn, backend="jax", pipeline=<the default pipeline up to and including
its k-th pass P>)`: the first column whose ratio rises names the pass that made XLA slower.
The machine's load average is printed with the table: the ratios are robust to a load that
drifts between rounds, not to one that changes within a fraction of a second.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.models import Program, compare, models
from explorer.passes import DEFAULT_PIPELINE, get
from tests.corpora.wide import wide

FINAL, TRACED = ("jax final", "jax", None), ("jax traced", "jax", [])


def _as_for(backend: str) -> list[str]:
    """The default pipeline with every pass that reads the backend told `backend`: the
    stages as they were planned for it, run on the jax backend."""
    return [f"{p}{{backend={backend}}}" if "backend" in getattr(type(get(p)), "options_read", ())
            else p for p in DEFAULT_PIPELINE]


# the final stage planned as for the cpu backend (no decision for XLA): what those decisions
# buy, paired in the same run
AS_CPU = ("jax final, cpu's plan", "jax", _as_for("cpu"))


def programs() -> dict[str, Program]:
    return {**wide("bench"), **models()}


def prefix_columns() -> list[tuple[str, str, list[str] | None]]:
    """One column per prefix of the default pipeline that ends with a pass."""
    return [(f"after {k}:{p}", "jax", list(DEFAULT_PIPELINE[:k + 1]))
            for k, p in enumerate(DEFAULT_PIPELINE)]


def measure(name: str, rounds: int, stages: bool) -> dict[str, Any]:
    fn, args = programs()[name]
    columns = [FINAL, TRACED, AS_CPU] + (prefix_columns()[:-1] if stages else [])
    return compare(fn, args, rounds, columns)


def _fresh(name: str, rounds: int, stages: bool) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.jax_stages", "--one", name, "--rounds", str(rounds)]
    done = subprocess.run(cmd + (["--stages-here"] if stages else []), capture_output=True,
                          text=True, cwd=Path(__file__).parent.parent)
    if done.returncode:
        return {"jax.jit": f"error: {(done.stderr.strip().splitlines() or ['?'])[-1][:100]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cell(v: Any) -> str:
    return f"{v:.2f}" if isinstance(v, float) else str(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", nargs="*", default=None, help="programs whose name holds one")
    ap.add_argument("--stages", nargs="*", default=None,
                    help="also time every pipeline prefix of programs whose name holds one")
    ap.add_argument("--one", help="(internal) one program's row as JSON, in this process")
    ap.add_argument("--stages-here", action="store_true", help="(internal)")
    ns = ap.parse_args()
    if ns.one:
        print(json.dumps(measure(ns.one, ns.rounds, ns.stages_here)), flush=True)
        return
    print(f"load average before: {os.getloadavg()}", flush=True)
    print("| program | jax.jit | jax final / jax.jit | jax traced / jax.jit | "
          "jax final, cpu's plan / jax.jit |")
    print("|---|---|---|---|---|", flush=True)
    names = [n for n in programs() if ns.only is None or any(s in n for s in ns.only)]
    for name in names:
        stages = ns.stages is not None and any(s in name for s in ns.stages)
        row = _fresh(name, ns.rounds, stages)
        jit = row.get("jax.jit")
        jit_cell = f"{jit * 1e3:.2f} ms" if isinstance(jit, float) else str(jit)
        print(f"| {name} | {jit_cell} | {_cell(row.get('jax final'))} | "
              f"{_cell(row.get('jax traced'))} | {_cell(row.get(AS_CPU[0]))} | "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        for label, _, _ in prefix_columns()[:-1] if stages else []:
            print(f"|   {label} | | {_cell(row.get(label))} | |", flush=True)
    print(f"load average after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
