"""numba's on-disk cache with each compilation variant kept apart
(backends/cpu/numba_cache.py)."""

from __future__ import annotations

from pathlib import Path


def test_parallel_and_serial_builds_of_one_loop_have_their_own_cache_entries(tmp_path) -> None:  # noqa: ANN001
    """numba's disk cache keys a function by name, line, types and closure, not by its
    flags: without `cached_njit` a serial build loaded the parallel one saved before it (a
    tiny im2col ran 80 us instead of 5). A fresh process compiles the parallel variant,
    the next one asks for the serial one: a cache miss, not the parallel entry."""
    import subprocess
    import sys

    (tmp_path / "loops.py").write_text(
        "from numba import prange\n"
        "from explorer.backends.cpu.numba_cache import cached_njit\n"
        "def make(parallel):\n"
        "    @cached_njit(parallel=parallel)\n"
        "    def total(x):\n"
        "        s = 0.0\n"
        "        for i in prange(x.shape[0]):\n"
        "            s += x[i]\n"
        "        return s\n"
        "    return total\n")
    run = ("import sys, numpy as np, loops; f = loops.make({}); assert f(np.ones(9)) == 9.0; "
           "print(sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values()))")
    env = {**__import__("os").environ, "PYTHONPATH": f"{tmp_path}:{Path(__file__).parents[3]}"}
    outs = [subprocess.run([sys.executable, "-c", run.format(p)], env=env, capture_output=True,
                           text=True, check=True).stdout.split() for p in (True, False, False)]
    assert outs == [["0", "1"], ["0", "1"], ["1", "0"]]  # (the third: the serial entry, cached)
