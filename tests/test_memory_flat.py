"""Memory over a long session: explore-and-run cycles on the reference, cpu and jax backends keep
resident memory flat once every cache is warm, and every cache stays within its size.

A session re-explores programs, as a notebook does on each edit: 16 random programs explored
and run on every backend at their traced and final stages, 8 times over; the executables
(registry.CACHE_SIZE, 32) are evicted and rebuilt on every cycle. Measured on a 2-core machine:
RSS rises about 11 MiB over the first 4 cycles (numba and XLA warming up), then 0.2-0.5 MiB a
cycle (1.5 MiB over the 4 measured ones); jax alone stays within 0.1 MiB. The bound is 16 MiB.
(The differential fuzz, which also calls JAX eager, grew 5 MiB a program before it cleared
JAX's caches; the cpu backend's numba code for each new kernel, about 1 MiB, is never freed
by numba: see explorer/backends/cpu.py.)
"""

from __future__ import annotations

import gc
import sys
import warnings

import numpy as np

import explorer as gx
from explorer.backends import cpu, registry
from explorer.passes.split import InfeasibleMemoryLimit
from tests.fuzz_programs import make_program, rss_bytes

PROGRAMS, WARM, CYCLES = 16, 4, 8
BOUND = 16 * 2**20


def _explore_and_run(seed: int, backends: tuple[str, ...]) -> None:
    p = make_program(seed)
    fn = p.fn()
    try:
        tr = gx.explore(fn, *p.args, memory_limit=p.memory_limit)
    except InfeasibleMemoryLimit as e:
        tr = gx.explore(fn, *p.args, memory_limit=e.needed)
    for b in backends:
        for stage in (0, -1):
            tr.run(backend=b, stage=stage)


def _kernel_modules() -> int:
    return sum(name.startswith("gambit_kernel_") for name in list(sys.modules))


def test_rss_stays_flat_over_explore_and_run_cycles() -> None:
    backends = tuple(b for b in ("reference", "cpu", "jax") if b in registry.available())
    before = _kernel_modules()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for cycle in range(CYCLES):
            if cycle == WARM:
                gc.collect()
                start = rss_bytes()
            for seed in range(PROGRAMS):
                _explore_and_run(seed, backends)
                assert len(registry._CACHE) <= registry.CACHE_SIZE
                assert len(cpu._COMPILED) <= cpu.KERNEL_CACHE_SIZE
                assert _kernel_modules() - before <= cpu.KERNEL_CACHE_SIZE
    gc.collect()
    grew = rss_bytes() - start
    assert grew < BOUND, f"RSS grew {grew / 2**20:.0f} MiB over {CYCLES - WARM} cycles"
