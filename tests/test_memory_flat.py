"""Memory over a long session: explore-and-run cycles on the reference, cpu and jax backends keep
resident memory flat once every cache is warm, and every cache stays within its size.

Two sessions. One re-explores the same programs, as a notebook does on each edit: 16 random programs explored
and run on every backend at their traced and final stages, 8 times over; the executables
(registry.CACHE_SIZE, 32) are evicted and rebuilt on every cycle. Measured on a 2-core machine:
RSS rises about 11 MiB over the first 4 cycles (numba and XLA warming up), then 0.2-0.5 MiB a
cycle (1.5 MiB over the 4 measured ones); jax alone stays within 0.1 MiB. The bound is 16 MiB.
(Run late in a full `pytest -n 2` on a machine at load 17 it once grew 19 MiB, probably JAX's own
caches (not verified), which the test now empties at each cycle, as the other test does.)
(The differential fuzz, which also calls JAX eager, grew 5 MiB a program before it cleared
JAX's caches.)

The other explores ever new programs: random programs of 12 structures, each program with
sizes and argument values of its own (make_program's shape seed), 240 programs (2,400 under
GAMBIT_FUZZ=full), none repeated, on every backend at their traced and final stages. Numba
never frees compiled machine code (numba issues 2290, 6707), so kernels compiled per shape
cost about 1 MiB for every new program; CPU kernels are now shape-generic (cpu_codegen.py) and
compile once per structure. After a warm-up of 8 programs per structure, the measured part
may compile at most 8 more kernels (24 at full scale: broadcast patterns not met before, as a
size-1 dimension is part of a kernel's structure), and RSS may grow by at most 8 MiB plus
2 MiB per kernel it compiled plus 16 KiB a program (JAX's own per new jitted function: see
PER_PROGRAM). JAX keeps caches of its own, LRU-bounded by JAX at 1,024 to
4,096 entries (traced functions, lowerings, executables: about 30 KiB a program until they
are full), which a long session empties with `jax.clear_caches()`; the test does that every
24 programs, so that it measures ours. Measured on the loaded 2-core machine (load average
10-16), reference, cpu and jax, clearing JAX's caches: programs 97-240 grew RSS by 1.0 MiB
(2 kernels compiled); the per-shape kernels before this change grew it by 29 MiB over
programs 97-192 (12 kernels compiled). Without clearing JAX's caches: +16 MiB over programs
49-480 (2 kernels compiled); reference alone with clearing, +1.3 MiB over 432 programs.
"""

from __future__ import annotations

import gc
import sys
import time
import warnings

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.backends import registry
from explorer.backends.cpu import kernels as cpu
from explorer.passes.split import InfeasibleMemoryLimit
from tests.conftest import FULL_FUZZ
from tests.corpora.fuzz_programs import make_program, rss_bytes

PROGRAMS, WARM, CYCLES = 16, 4, 8
BOUND = 16 * 2**20


def _explore_and_run(seed: int, backends: tuple[str, ...], shape_seed: int | None = None) -> None:
    p = make_program(seed, shape_seed)
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
            jax.clear_caches()  # JAX's own LRU-bounded caches: see the module docstring
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


STRUCTURES, PER_STRUCTURE_WARM, CLEAR_JAX_EVERY = 12, 8, 24
NEW_PROGRAMS = 2400 if FULL_FUZZ else 240
NEW_BOUND, PER_KERNEL = 8 * 2**20, 2 * 2**20
# JAX's own native memory per new function it traces and jits, which jax.clear_caches() does
# not hand back: plain `jax.jit(fn)(*args)` of these programs grew RSS (after malloc_trim) by
# 5.0 MiB over 720 programs (7 KiB each), `jax.make_jaxpr` by 0.4 MiB over 240; explore and
# run on all three backends about 15 KiB a program in all (2026-11-26, jax 0.10.2). The full
# scale's 2,304 measured programs grew 44.8 MiB with 5 new kernels, over the old bound.
PER_PROGRAM = 16 * 2**10
NEW_KERNELS = 24 if FULL_FUZZ else 8  # broadcast patterns not met in the warm-up


@pytest.mark.fuzz  # `make fuzz` runs it at full scale, 2,400 programs
def test_rss_stays_flat_over_ever_new_programs() -> None:
    backends = tuple(b for b in ("reference", "cpu", "jax") if b in registry.available())
    warm = STRUCTURES * PER_STRUCTURE_WARM
    t0 = time.perf_counter()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for k in range(NEW_PROGRAMS):
            if k == warm:
                gc.collect()
                start, kernels = rss_bytes(), set(cpu._COMPILED)
            _explore_and_run(1000 + k % STRUCTURES, backends, shape_seed=k)
            if (k + 1) % CLEAR_JAX_EVERY == 0:
                jax.clear_caches()
            assert len(registry._CACHE) <= registry.CACHE_SIZE
            assert len(cpu._COMPILED) <= cpu.KERNEL_CACHE_SIZE
    gc.collect()
    grew, new = rss_bytes() - start, set(cpu._COMPILED) - kernels
    print(f"{NEW_PROGRAMS - warm} new programs after {warm}: RSS {start / 2**20:.1f} -> "
          f"{(start + grew) / 2**20:.1f} MiB, {len(new)} kernels compiled, "
          f"{time.perf_counter() - t0:.0f} s")
    assert len(new) <= NEW_KERNELS, f"{len(new)} kernels compiled for programs of known structure"
    assert grew < NEW_BOUND + PER_KERNEL * len(new) + PER_PROGRAM * (NEW_PROGRAMS - warm), (
        f"RSS grew {grew / 2**20:.1f} MiB over {NEW_PROGRAMS - warm} new programs "
        f"({len(new)} new kernels)")


def test_compile_keeps_a_bounded_number_of_traces() -> None:
    import jax.numpy as jnp

    from explorer.compile import TRACES

    f = gx.compile(lambda x: jnp.sum(jnp.exp(x) * 2.0))
    for n in range(1, TRACES + 6):
        assert np.isclose(f(np.zeros(n, np.float32)), 2.0 * n)
    shapes = [sig[1][0][0] for sig in f.traces]  # the least recently used are gone
    assert shapes == [(n,) for n in range(6, TRACES + 6)]
