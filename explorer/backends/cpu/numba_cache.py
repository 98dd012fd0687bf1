"""numba's on-disk cache, with each compilation variant kept apart.

numba keys a cached function by its module, qualified name and first line (the file name),
then by the argument types, the machine, and hashes of the bytecode and the closure's cells
(numba/core/caching.py, `_index_key`): not by the flags it was compiled with. A loop built
from one definition with `parallel=True` and again with `parallel=False` (the CPU backend
picks by size) shares one entry, and whichever was saved first is what both load. Measured
on a 2-core AMD EPYC VM: a 2x8x8x2 image's im2col took 80 us instead of 5 running the
parallel build (numba's thread pool for 128 rows), and the other way round a large one runs
the serial build on one core. `cached_njit` compiles a copy of the function whose qualified
name carries the flags, so each variant has its own file.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from typing import Any


def cached_njit(**flags: Any) -> Callable[[Callable[..., Any]], Any]:
    """`numba.njit(cache=True, **flags)`, its cache entry named for `flags` too."""
    from numba import njit

    tag = re.sub(r"\W", "_", "_".join(f"{k}_{v}" for k, v in sorted(flags.items())))

    def wrap(fn: Callable[..., Any]) -> Any:
        copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                                  fn.__closure__)
        copy.__qualname__ = f"{fn.__qualname__}__{tag}" if tag else fn.__qualname__
        copy.__module__, copy.__kwdefaults__ = fn.__module__, fn.__kwdefaults__
        return njit(cache=True, **flags)(copy)

    return wrap
