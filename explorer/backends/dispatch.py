"""Backends by name: which are available here, and running a graph on one of them.

Every backend's run returns (outputs, seconds, peak bytes of temporaries, kernels). Compiled
executables are kept per (backend, graph), so running a stage again reuses its kernels.
"""

from __future__ import annotations

import importlib.util
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir.graph import Graph
from . import reference
from .result import Kernel

RunOutput = tuple[list[np.ndarray], float, int, tuple[Kernel, ...]]
_CACHE: OrderedDict[tuple[str, Graph, int | None], Any] = OrderedDict()
_CACHE_SIZE = 32


def gpu_unavailable_reason() -> str | None:
    """Why the GPU backend cannot run here (None when it can)."""
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed (pip install 'gambit-explorer[gpu]')"
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CuPy finds no CUDA device"
    except Exception as e:  # CUDA driver or runtime missing
        return f"CuPy cannot reach a GPU: {str(e).splitlines()[0]}"
    return None


def available() -> tuple[str, ...]:
    names = ["reference"]
    if importlib.util.find_spec("numba") is not None:
        names.append("cpu")
    if gpu_unavailable_reason() is None:
        names.append("gpu")
    names.append("jax")
    return tuple(names)


def executable(graph: Graph, backend: str, memory_limit: int | None = None) -> Any:
    key = (backend, graph, memory_limit if backend == "gpu" else None)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    if backend == "cpu":
        from . import cpu

        exe: Any = cpu.compile(graph)
    elif backend == "gpu":
        from . import gpu

        exe = gpu.compile(graph, memory_limit=memory_limit)
    elif backend == "jax":
        from . import jax as jax_backend

        exe = jax_backend.compile(graph)
    else:
        raise ValueError(f"unknown backend {backend!r}; available: {', '.join(available())}")
    _CACHE[key] = exe
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return exe


def run_graph(graph: Graph, args: Sequence[np.ndarray], backend: str = "reference",
              memory_limit: int | None = None) -> RunOutput:
    if backend == "reference":
        outs, seconds, peak = reference.run(graph, args)
        return outs, seconds, peak, ()
    if backend not in available():
        reason = gpu_unavailable_reason() if backend == "gpu" else None
        raise ValueError(f"backend {backend!r} is not available here"
                         + (f": {reason}" if reason else "")
                         + f"; available: {', '.join(available())}")
    return executable(graph, backend, memory_limit).run(args)


def time_graph(graph: Graph, args: Sequence[np.ndarray], backend: str, repeats: int = 5,
               warmup: int = 1) -> list[float]:
    """Seconds of `repeats` runs after `warmup` ones, without memory tracing (which slows
    allocation). Arguments are moved to the device once, before timing."""
    if backend == "reference":
        prepared: Any = reference.check_args(graph, args)

        def once() -> None:
            reference.evaluate(graph, prepared)
    else:
        exe = executable(graph, backend)
        prepared = exe.prepare(args)

        def once() -> None:
            exe.execute(prepared)
    for _ in range(warmup):
        once()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        once()
        times.append(time.perf_counter() - t0)
    return times
