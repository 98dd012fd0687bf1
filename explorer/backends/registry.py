"""The backend registry: the one list of backends that `trace.run`, `trace.compare`,
`gx.compile`, `%%gambit --backend` and the widget's run tab read.

A backend is an object with
  name                        its key ("cpu")
  peak_how                    how its runs measure peak memory ("tracemalloc", ...)
  temporaries                 what its ops allocate beyond their results, declared to the
                              memory planner (analysis/memory.py), or None for nothing
  runs_body                   kernel/call node -> whether it runs the body node by node
                              (its temporaries are then the body's), or None for never
  loop_body                   split loop body -> its peak as the backend runs it (a fused
                              kernel), or None to plan it node by node
  unavailable_reason()        None when it can run here, else why not
  compile(graph, options)     -> an Executable
  session(**settings)         the context runs with per-run settings happen in (the dask
                              backend's client=; by default none are taken)
and an Executable has
  run(args) -> Run            one measured run: values, seconds, peak, kernels
  prepare(args) / execute(p)  for timing: arguments moved and checked once, then bare runs
  stepped(p, after_step)      (optional) a bare run calling after_step(node, value) after
                              each top-level node: the profile's hook (explorer/measure/profile.py)
  sync()                      (with stepped) wait for the work launched so far

Adding a backend is one module that subclasses `Backend` (usually with an `Interpreter`
subclass, backends/interpreter.py) and calls `register(...)`, plus its import in
backends/__init__.py. A backend that generates programs (cpu/, gpu/) adds a `ProgramWriter`
subclass (program_writer.py) and an `Executable` subclass (executable.py).
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..analysis.memory import BodyPeak, RunsBody, Workspace, declare_temporaries
from ..ir.graph import Graph
from ..options import CompileOptions
from .result import Kernel


class BackendError(ValueError):
    """A backend name that is not registered, or a backend that cannot run here."""


@dataclass(frozen=True)
class Step:
    """Temporaries measured at one top-level step of a run: `live` bytes right after node
    `node` ran, and the `peak` bytes reached while it ran (the memory timeline's data)."""

    node: int
    live: int
    peak: int


@dataclass(frozen=True)
class Run:
    """What one measured run of an executable reports."""

    outputs: list[Any]  # NumPy arrays, one per graph output
    seconds: float
    peak_bytes: int  # measured peak of temporaries: all allocations but inputs and outputs
    kernels: tuple[Kernel, ...] = field(default=())
    peak_how: str = ""  # how the peak was measured
    workers: tuple[str, ...] = ()  # a distributed run: the workers that ran its tasks
    dashboard: str | None = None  # a distributed run: its cluster's dashboard
    program: str = ""  # the generated program that ran (the CPU backend's), if any
    steps: tuple[Step, ...] = ()  # per top-level step, where the backend measures it so
    devices: int | None = None  # a sharded run: peak_bytes is one device's (the largest), of these


class Executable(Protocol):
    def run(self, args: Sequence[Any]) -> Run: ...

    def prepare(self, args: Sequence[Any]) -> Any: ...

    def execute(self, prepared: Any) -> list[Any]: ...


class Backend:
    """The base of every backend; see the module docstring."""

    name: str = ""
    peak_how: str = ""
    temporaries: Workspace | None = None
    runs_body: RunsBody | None = None
    loop_body: BodyPeak | None = None
    in_sweeps: bool = True  # runs over every backend (sweep()) include it; dask's starts a cluster

    def unavailable_reason(self) -> str | None:
        return None

    def compile(self, graph: Graph, options: CompileOptions) -> Executable:
        raise NotImplementedError

    def session(self, **settings: Any) -> contextlib.AbstractContextManager:
        """The context runs with per-run settings happen in (the dask backend's client=);
        a backend that takes none refuses any."""
        if settings:
            raise BackendError(f"backend {self.name!r} takes no run settings, got "
                               f"{', '.join(settings)}")
        return contextlib.nullcontext()

    def __repr__(self) -> str:
        reason = self.unavailable_reason()
        return f"<backend {self.name}: {'available' if reason is None else reason}>"


_BACKENDS: dict[str, Backend] = {}
_CACHE: OrderedDict[tuple[str, Graph, CompileOptions], Executable] = OrderedDict()
CACHE_SIZE = 32


def register(backend: Backend) -> Backend:
    """Add (or replace) a backend; its temporaries go to the memory planner."""
    if not backend.name or not isinstance(backend.name, str):
        raise BackendError(f"{backend!r} has no name")
    _BACKENDS[backend.name] = backend
    declare_temporaries(backend.name, backend.temporaries, backend.runs_body, backend.loop_body)
    for key in [k for k in _CACHE if k[0] == backend.name]:
        del _CACHE[key]
    return backend


def unregister(name: str) -> None:
    _BACKENDS.pop(name, None)
    declare_temporaries(name, None)
    for key in [k for k in _CACHE if k[0] == name]:
        del _CACHE[key]


def names() -> tuple[str, ...]:
    """Every registered backend, available here or not."""
    return tuple(_BACKENDS)


def available() -> tuple[str, ...]:
    """The backends that can run here."""
    return tuple(n for n, b in _BACKENDS.items() if b.unavailable_reason() is None)


def sweep() -> tuple[str, ...]:
    """The available backends that runs over "every backend" use (the fuzz, `%%gambit
    --compare`, the widget's default runs): all but those that only run when asked by name
    (dask, which starts a cluster)."""
    return tuple(n for n in available() if _BACKENDS[n].in_sweeps)


def unavailable_reason(name: str) -> str | None:
    """Why registered backend `name` cannot run here (None when it can)."""
    if name not in _BACKENDS:
        raise BackendError(f"unknown backend {name!r}; registered: {', '.join(_BACKENDS)}")
    return _BACKENDS[name].unavailable_reason()


def get(name: str) -> Backend:
    """The backend `name`, available here; else a BackendError that says why not."""
    if name not in _BACKENDS:
        raise BackendError(f"unknown backend {name!r}; registered: {', '.join(_BACKENDS)} "
                           f"(available here: {', '.join(available())})")
    backend = _BACKENDS[name]
    reason = backend.unavailable_reason()
    if reason is not None:
        raise BackendError(f"backend {name!r} is not available here: {reason}; "
                           f"available: {', '.join(available())}")
    return backend


def executable(graph: Graph, name: str, options: CompileOptions | None = None) -> Executable:
    """The compiled executable of `graph` on backend `name`, kept per (backend, graph,
    options) so that running a stage again reuses its kernels."""
    options = options or CompileOptions()
    key = (name, graph, options)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    exe = get(name).compile(graph, options)
    _CACHE[key] = exe
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return exe


def run_graph(graph: Graph, args: Sequence[Any], name: str = "reference",
              options: CompileOptions | None = None) -> Run:
    """One measured run of `graph` on backend `name`."""
    return executable(graph, name, options).run(args)


# The least time a warm-up runs before timing. The worker threads of what ran before
# (OpenBLAS's spin 2^28 cycles after each call: 0.1-0.25 s) still hold the cores: measured on
# 2 cores, XLA's 1024^2 matmul took 14 ms instead of 7 for about 100 ms after a NumPy dot, so
# whichever of two programs was timed second after our CPU backend looked 2x slower. Sleeping
# them off instead lets the cores idle down, which slows the next millisecond-long program.
WARM_S = 0.3


def warm_up(fn: Any, calls: int) -> None:
    """Call `fn` `calls` times, and on until WARM_S seconds have passed (none at all for
    calls=0: a caller that times a long run once, cold)."""
    t0 = time.perf_counter()
    done = 0
    while calls and (done < calls or time.perf_counter() - t0 < WARM_S):
        fn()
        done += 1


def time_graph(graph: Graph, args: Sequence[Any], name: str,
               options: CompileOptions | None = None, repeats: int = 5,
               warmup: int = 1) -> list[float]:
    """Seconds of `repeats` runs after `warmup` ones, without memory tracing (which slows
    allocation). Arguments are moved to the device once, before timing."""
    exe = executable(graph, name, options)
    prepared = exe.prepare(args)
    warm_up(lambda: exe.execute(prepared), warmup)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        exe.execute(prepared)
        times.append(time.perf_counter() - t0)
    return times
