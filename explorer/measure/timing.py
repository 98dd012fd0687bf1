"""Timing: warm-up, repeats, median and minimum; peak memory as each backend can know it;
and a numeric check against the reference interpreter (closeness.py). The backends' shared
measuring code: trace.compare and the widget's runs measure with it.

Peak memory means temporaries (everything but inputs and outputs), measured as follows:
  reference, cpu, "numpy"  tracemalloc, step by step (NumPy reports its buffers to it; the
                           CPU kernels allocate only through NumPy, in their launcher)
  gpu                      CuPy's memory pool: bytes in use after each step, less inputs
                           and outputs
  jax, "jax-jit"           on GPU, the device's peak_bytes_in_use (process-wide, so only
                           an upper bound after bigger runs); on CPU, XLA's planned
                           temporaries from the compiled module's memory_analysis()
  "jax-eager"              on GPU the device's peak; on CPU nothing can see it (None)
A sharded program's peak on jax and "jax-jit" is per device (`devices` says over how many):
on GPU the largest of its devices' peaks, on CPU the memory_analysis of XLA's partitioned
module, which is one device's program ("XLA memory_analysis, per device").
Timing runs are separate from the run that measures memory, as tracing slows allocation.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import jax
import numpy as np

from ..backends import registry
from ..backends.jax import device_peak_bytes
from ..backends.result import Kernel
from ..ir.graph import Graph
from ..options import CompileOptions
from .closeness import check_outputs


@dataclass(frozen=True)
class Measurement:
    label: str  # "dot-order on cpu", "numpy", ...
    backend: str  # a backend name, or a baseline name
    median: float  # seconds
    minimum: float
    repeats: int
    peak_bytes: int | None  # None: this runtime cannot tell
    peak_how: str
    error: float | None  # largest error relative to the reference's magnitude
    ok: bool
    stage: str | None = None
    kernels: tuple[Kernel, ...] = field(default=())
    workers: tuple[str, ...] = ()  # a distributed run: the workers that ran its tasks
    dashboard: str | None = None  # a distributed run: its cluster's dashboard link
    program: str = ""  # the generated program that ran (the CPU backend's), if any
    devices: int | None = None  # a sharded run: peak_bytes is per device, over this many


def repeat(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> list[float]:
    """Seconds of `repeats` calls after a warm-up of at least `warmup` calls (and of
    registry.WARM_S seconds); `fn` must block until done."""
    registry.warm_up(fn, warmup)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _measurement(label: str, backend: str, times: list[float], peak: int | None, how: str,
                 got: Sequence[Any] | None, want: Sequence[np.ndarray] | None,
                 stage: str | None = None, kernels: tuple[Kernel, ...] = ()) -> Measurement:
    ok, error = (True, None) if got is None or want is None else check_outputs(got, want)
    return Measurement(label, backend, statistics.median(times), min(times), len(times), peak,
                       how, error, ok, stage, kernels)


def measure_graph(graph: Graph, args: Sequence[np.ndarray], backend: str,
                  want: Sequence[np.ndarray] | None, repeats: int = 5, label: str = "",
                  stage: str | None = None, options: CompileOptions | None = None) -> Measurement:
    """One stage on one backend: a measuring run (peak, kernels, values), then timing runs."""
    r = registry.run_graph(graph, args, backend, options)
    times = registry.time_graph(graph, args, backend, options, repeats, warmup=1)
    m = _measurement(label or backend, backend, times, r.peak_bytes, r.peak_how, r.outputs,
                     want, stage, r.kernels)
    return replace(m, workers=r.workers, dashboard=r.dashboard, program=r.program,
                   devices=r.devices)


def _device_peak(count: int) -> int | None:
    if jax.default_backend() != "gpu":
        return None
    return device_peak_bytes(count)


def _devices(compiled: Any) -> int | None:
    """How many devices a compiled program's arguments span (None: one)."""
    try:
        shardings = jax.tree_util.tree_leaves(compiled.input_shardings)
    except (AttributeError, NotImplementedError):
        return None
    count = max((len(s.device_set) for s in shardings), default=1)
    return count if count > 1 else None


def measure_jax(fn: Callable[..., Any], args: Sequence[Any], want: Sequence[np.ndarray] | None,
                jit: bool, repeats: int = 5) -> Measurement:
    """The user's function under JAX: eagerly (op by op) or jitted (XLA alone)."""
    device_args = [jax.device_put(a) for a in args]
    call = jax.jit(fn) if jit else fn

    def once() -> Any:
        return jax.block_until_ready(call(*device_args))

    outs = jax.tree_util.tree_leaves(once())
    times = repeat(once, repeats, warmup=1)
    compiled = jax.jit(fn).lower(*device_args).compile() if jit else None
    count = _devices(compiled) if jit else None
    peak, how = _device_peak(count or 1), "device peak"
    if peak is None and compiled is not None:
        analysis = compiled.memory_analysis()
        peak, how = (int(analysis.temp_size_in_bytes), "XLA memory_analysis") if analysis else (None, "")
    elif peak is None:
        how = "not visible on CPU"
    if count is not None and peak is not None:
        how += ", per device"
    name = "jax-jit" if jit else "jax-eager"
    return replace(_measurement(name, name, times, peak, how, outs, want), devices=count)
