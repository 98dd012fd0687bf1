"""The Dask backend: split loops run as Dask tasks on a `distributed` cluster.

Install with `pip install gambit-explorer[distributed]` (dask and distributed).

Everything outside split loops runs in the client process on the CPU backend (those parts are
small by construction: the split pass moved what does not fit into loops). Each split `loop`
becomes a Dask graph:
  - its inputs (and the program, whose kernels the workers compile) are scattered once, to
    every worker (`broadcast=True`, so a worker that dies takes no input with it);
  - its iterations are cut into ranges of consecutive chunks, about TASKS_PER_THREAD per
    worker thread; each range is one task that runs its chunks one after another with the CPU
    backend's generated kernels (Interpreter.loop_range, the core's own loop driver);
  - the ranges' partial results are combined by a tree reduction (MERGE_FAN_IN at a time)
    with the combiners every backend uses (combine.merge), and the root is gathered.
Dask schedules, moves data, retries the tasks of a worker that dies, and shows progress.

Which cluster: `client=` (trace.run, gx.compile, `%%gambit --scheduler`) takes a
`distributed.Client` or a scheduler address; without one the active client is used
(`distributed.get_client()`); without that a LocalCluster sized to the machine (one worker
process per core, one thread each, on 127.0.0.1, dashboard on loopback) is started when the
run reaches its first split loop, and closed when the run ends. An unreachable address fails
within CONNECT_TIMEOUT_S.

Memory: the split pass sized the chunks so one iteration fits `memory_limit`; a task holds one
iteration's temporaries plus its running results, so every task's peak of temporaries is
bounded by the limit, per worker thread. Measured runs trace each task with tracemalloc (exact
with one thread per worker, as in the clusters we start; with several threads per worker the
tasks' allocations mix, so the figure is an upper bound); the run reports the largest peak of
the client and of any task, and the workers that ran tasks. Before running, every worker's
Dask memory limit is checked against what it may hold: the loop's inputs plus `memory_limit`
per thread.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
import tracemalloc
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..ir import dtypes
from ..ir.graph import Graph, Node, TupleType
from ..options import CompileOptions
from ..units import format_bytes
from . import combine
from .control_flow import one_or_tuple
from .cpu import CpuBackend, CpuInterpreter
from .registry import Backend, BackendError, Run, register

TASKS_PER_THREAD = 4  # ranges per worker thread: enough to balance load and retry cheaply
MERGE_FAN_IN = 4  # partial results combined per tree-reduction task
CONNECT_TIMEOUT_S = 5  # a scheduler address that does not answer by then is an error
PROGRESS_AFTER_S = 2.0  # runs still going after this long show Dask's progress bar
WORKER_CACHE_SIZE = 8  # programs whose compiled interpreter a worker keeps
# Dask's statistical profiler holds the running task's frames for a moment every 10 ms, which
# keeps a buffer the task has dropped alive and inflates its measured peak by up to one array:
# the clusters we start run without it.
NO_PROFILER = {"distributed": {"worker": {"profile": {"enabled": False}}}}


class DaskError(BackendError):
    """A cluster that cannot be reached or cannot hold the program."""


# ---------------------------------------------------------------- the cluster


@dataclass
class Session:
    """The client runs use, and what this module started for them (closed on exit). Without
    a client given or active, the LocalCluster is started on first use (a program with no
    split loop never starts one)."""

    given: Any = None  # a distributed.Client, or None: a LocalCluster when first needed
    owned: list[Any] = field(default_factory=list)
    progress: bool | None = None  # None: in a notebook or terminal, for long runs

    @property
    def client(self) -> Any:
        if self.given is None:
            import distributed

            cluster = local_cluster()
            self.owned.append(cluster)
            self.given = distributed.Client(cluster, set_as_default=False)
            self.owned.append(self.given)
        return self.given

    @property
    def dashboard(self) -> str | None:
        if self.given is None:
            return None
        try:
            if "dashboard" not in self.given.scheduler_info().get("services", {}):
                return None
            return str(self.given.dashboard_link)
        except Exception:  # an address we cannot format is no reason to fail a run
            return None

    def close(self) -> None:
        for thing in reversed(self.owned):
            with contextlib.suppress(Exception):
                thing.close()
        self.owned.clear()


_ACTIVE: ContextVar[Session | None] = ContextVar("gambit_dask_session", default=None)


def local_cluster(n_workers: int | None = None, **kwargs: Any) -> Any:
    """A LocalCluster as this backend starts one: worker processes on 127.0.0.1, one thread
    each (Dask's profiler off),
    the dashboard on loopback (a page that asks for bokeh when bokeh is not installed)."""
    import dask.config
    from distributed import LocalCluster

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    options: dict[str, Any] = dict(n_workers=n_workers or cores or 1, threads_per_worker=1,
                                   processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                   config=dask.config.merge(dask.config.config, NO_PROFILER))
    options.update(kwargs)
    return LocalCluster(**options)


def connect(client: Any = None, progress: bool | None = None) -> Session:
    """A Session on `client`: a distributed.Client, a scheduler address, or None (the active
    client, else a new LocalCluster closed with the session)."""
    import distributed

    if isinstance(client, distributed.Client):
        if client.status not in ("running", "connecting", "newly-created"):
            raise DaskError(f"the Dask client given is {client.status}")
        return Session(client, progress=progress)
    if isinstance(client, str):
        try:
            c = distributed.Client(client, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as e:
            _stop_failed_client(e)
            raise DaskError(f"cannot connect to the Dask scheduler at {client!r} within "
                            f"{CONNECT_TIMEOUT_S} s: {type(e).__name__}: {e}") from None
        return Session(c, [c], progress)
    if client is not None:
        raise DaskError(f"client= takes a distributed.Client or a scheduler address such as "
                        f"'tcp://10.0.0.1:8786', not {type(client).__name__}")
    try:
        return Session(distributed.get_client(), progress=progress)
    except ValueError:  # no active client: a LocalCluster, started when first needed
        return Session(None, progress=progress)


def _stop_failed_client(e: BaseException) -> None:
    """A distributed.Client whose connection timed out leaves its event-loop thread ("IO
    loop") running (distributed 2026.8: Client.__init__ raises from `sync` after starting
    it, and nothing stops it): find that client in the traceback and stop its loop."""
    import distributed

    tb = e.__traceback__
    while tb is not None:
        c = tb.tb_frame.f_locals.get("self")
        runner = getattr(c, "_loop_runner", None) if isinstance(c, distributed.Client) else None
        if runner is not None:
            runner.stop()
            return
        tb = tb.tb_next


@contextlib.contextmanager
def session(client: Any = None, progress: bool | None = None) -> Iterator[Session]:
    """Runs on the dask backend inside this context use `client` (see connect); what the
    session started is closed when it ends, error or not. Nested sessions reuse the outer one
    unless given a client of their own."""
    outer = _ACTIVE.get()
    if outer is not None and client is None:
        yield outer if progress is None else replace(outer, progress=progress)
        return
    s = connect(client, progress)
    token = _ACTIVE.set(s)
    try:
        yield s
    finally:
        _ACTIVE.reset(token)
        s.close()


# ---------------------------------------------------------------- worker side


@dataclass(frozen=True)
class Part:
    """A task's result: the loop's results over positions [lo, hi) in the frame of lo (see
    Interpreter.loop_range), with what the run reports about the tasks behind it."""

    lo: int
    hi: int
    outs: list[np.ndarray]
    peak: int | None  # largest measured peak of temporaries of these tasks
    workers: frozenset[str]
    kernel_seconds: dict[str, float]


_WORKER_EXES: OrderedDict[str, CpuInterpreter] = OrderedDict()
_WARM: set[tuple[str, int, str]] = set()
_EXES_LOCK = threading.Lock()


def _worker_interpreter(token: str, graph: Graph) -> CpuInterpreter:
    """The worker's CPU interpreter of the client's program (kernels compiled once per
    worker; numba's disk cache spares recompiling on one machine)."""
    with _EXES_LOCK:
        if token not in _WORKER_EXES:
            _WORKER_EXES[token] = CpuInterpreter(graph)
            while len(_WORKER_EXES) > WORKER_CACHE_SIZE:
                old, _ = _WORKER_EXES.popitem(last=False)
                _WARM.difference_update({w for w in _WARM if w[0] == old})
        _WORKER_EXES.move_to_end(token)
        return _WORKER_EXES[token]


class _Tracing:
    """tracemalloc shared by the tasks of one worker process (started by the first, stopped
    by the last); see the module docstring on several threads per worker."""

    lock = threading.Lock()
    users = 0

    @classmethod
    @contextlib.contextmanager
    def peak(cls, result: list[int]) -> Iterator[None]:
        with cls.lock:
            if cls.users == 0 and not tracemalloc.is_tracing():
                tracemalloc.start()
            cls.users += 1
            base, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
        try:
            yield
            _, peak = tracemalloc.get_traced_memory()
            result.append(peak - base)
        finally:
            with cls.lock:
                cls.users -= 1
                if cls.users == 0:
                    tracemalloc.stop()


def _measured(fn: Callable[[], list[np.ndarray]], measure: bool) -> tuple[list[np.ndarray], int | None]:
    """fn's results and, if `measure`, its peak of temporaries (its results excluded)."""
    if not measure:
        return fn(), None
    seen: list[int] = []
    with _Tracing.peak(seen):
        outs = fn()
    return outs, max(0, seen[0] - sum(o.nbytes for o in outs))


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except ValueError:  # run outside a worker (tests of the task functions)
        return f"pid {os.getpid()}"


def _numba_threads(per_host: dict[str, int]) -> None:
    """Share this host's cores among the worker threads Dask runs on it (numba's setting is
    per thread): no oversubscription."""
    import numba

    host = _worker_name().rsplit(":", 1)[0]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    want = max(1, (cores or 1) // max(1, per_host.get(host, 1)))
    numba.set_num_threads(min(want, numba.config.NUMBA_NUM_THREADS))


def run_range(token: str, graph: Graph, node_id: int, lo: int, hi: int, measure: bool,
              per_host: dict[str, int], *vals: np.ndarray) -> Part:
    """One task: the loop `node_id` of `graph` over positions [lo, hi). `per_host`: worker
    threads per host address."""
    _numba_threads(per_host)
    exe = _worker_interpreter(token, graph)
    n = graph[node_id]
    with exe.quiet():
        if measure:  # numba compiles on a kernel's first call: keep that out of the peak
            chunk, size = n.attrs["chunk"], n.attrs["size"]
            for start, kind in ((lo, "body"), (size - size % chunk, "tail")):
                if lo <= start < hi and (token, node_id, kind) not in _WARM:
                    exe.loop_range(n, vals, start, min(start + chunk, size))
                    _WARM.add((token, node_id, kind))
        kernels = exe.all_kernels()
        before = {k.name: k.seconds for k in kernels}
        outs, peak = _measured(lambda: exe.loop_range(n, vals, lo, hi), measure)
    spent = {k.name: k.seconds - before.get(k.name, 0.0) for k in exe.all_kernels()}
    return Part(lo, hi, outs, peak, frozenset({_worker_name()}), spent)


def merge_parts(specs: Sequence[tuple], types: Sequence[Any], measure: bool, *parts: Part) -> Part:
    """One tree-reduction task: consecutive parts combined (combine.merge)."""
    with np.errstate(all="ignore"):
        outs, peak = _measured(
            lambda: combine.merge(np, specs, types, [(p.lo, p.hi, p.outs) for p in parts]),
            measure)
    peaks = [p.peak for p in parts if p.peak is not None] + ([] if peak is None else [peak])
    seconds: dict[str, float] = {}
    for p in parts:
        for name, s in p.kernel_seconds.items():
            seconds[name] = seconds.get(name, 0.0) + s
    return Part(parts[0].lo, parts[-1].hi, outs, max(peaks) if peaks else None,
                frozenset().union(*(p.workers for p in parts)) | {_worker_name()}, seconds)


# ---------------------------------------------------------------- client side


def ranges(size: int, chunk: int, tasks: int) -> list[tuple[int, int]]:
    """[lo, hi) position ranges of about equal numbers of whole chunks, `tasks` at most."""
    iterations = -(-size // chunk)
    tasks = max(1, min(tasks, iterations))
    cuts = [k * iterations // tasks for k in range(tasks + 1)]
    return [(a * chunk, min(b * chunk, size)) for a, b in zip(cuts, cuts[1:])]


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class DaskInterpreter(CpuInterpreter):
    """The CPU backend's interpreter in the client process, whose split loops run on Dask."""

    peak_how = "tracemalloc, client and each task (the largest)"

    def __init__(self, graph: Graph, prefix: str = "",
                 options: CompileOptions | None = None) -> None:
        self.options = options or CompileOptions()
        self.token = uuid.uuid4().hex  # the workers' cache key for this program
        self.warming = False
        self.report: dict[str, Any] = {}
        super().__init__(graph, prefix)

    def make_child(self, body: Graph, prefix: str) -> Any:
        """As the CPU backend's (a split body of the map-reduce form is one fused kernel), with
        this run's options."""
        child = super().make_child(body, prefix)
        if isinstance(child, DaskInterpreter):
            child.options = self.options
        return child

    # ---- the loop, distributed

    def run_loop(self, n: Node, vals: Sequence[Any]) -> Any:
        types = list(n.type.elements) if isinstance(n.type, TupleType) else [n.type]
        if self.warming:  # the client's kernels are warmed on stand-in loop results
            return one_or_tuple([np.zeros(t.shape, dtypes.to_numpy(t.dtype)) for t in types])
        s = _ACTIVE.get()
        if s is None:
            raise DaskError("a dask run needs a session (DaskExecutable.run opens one)")
        client, a = s.client, n.attrs
        measure = bool(self.report.get("measure"))
        threads = client.nthreads()
        if not threads:
            raise DaskError(f"the Dask cluster at {client.scheduler.address} has no workers")
        self._check_memory(client, vals)
        graph_f, *val_fs = client.scatter([self.graph, *vals], broadcast=True, hash=False)
        tag = f"{self.token[:8]}-{n.id}"
        per_host: dict[str, int] = {}
        for address, k in threads.items():
            host = address.rsplit(":", 1)[0]
            per_host[host] = per_host.get(host, 0) + k
        parts = [client.submit(run_range, self.token, graph_f, n.id, lo, hi, measure, per_host,
                               *val_fs,
                               key=f"gambit-chunks-{tag}-{lo}", pure=False, priority=-k)
                 for k, (lo, hi) in enumerate(ranges(a["size"], a["chunk"],
                                                     TASKS_PER_THREAD * sum(threads.values())))]
        every = list(parts)
        level = 0
        while len(parts) > 1:
            level += 1
            parts = [client.submit(merge_parts, a["combine"], types, measure,
                                   *parts[k:k + MERGE_FAN_IN],
                                   key=f"gambit-combine-{tag}-{level}-{k}", pure=False,
                                   priority=level)
                     for k in range(0, len(parts), MERGE_FAN_IN)]
            every += parts
        try:
            part = self._wait(s, parts[0], every)
        except BaseException:
            client.cancel(every + [graph_f, *val_fs], force=True)
            raise
        del every, parts, graph_f, val_fs
        self._record(n, part)
        return one_or_tuple(part.outs)

    def _check_memory(self, client: Any, vals: Sequence[Any]) -> None:
        limit = self.options.memory_limit
        if limit is None:
            return
        inputs = sum(int(np.asarray(v).nbytes) for v in vals)
        for address, w in client.scheduler_info(n_workers=-1)["workers"].items():
            have, threads = w.get("memory_limit") or 0, w.get("nthreads", 1)
            need = inputs + threads * limit
            if have and have < need:
                raise DaskError(
                    f"Dask worker {address} has memory_limit={format_bytes(have)}, less than a "
                    f"split loop may hold there: its inputs ({format_bytes(inputs)}) plus "
                    f"memory_limit={format_bytes(limit)} for each of its {threads} threads "
                    f"({format_bytes(need)}); give the workers more memory or fewer threads")

    def _wait(self, s: Session, root: Any, every: list[Any]) -> Part:
        from distributed import progress, wait

        show = s.progress
        if show is None:
            show = _in_notebook() or sys.stdout.isatty()
        if show:
            with s.client.as_current():
                try:
                    wait([root], timeout=PROGRESS_AFTER_S)
                except TimeoutError:  # a long run: Dask's progress bar (a widget in notebooks)
                    progress(every, notebook=_in_notebook())
        return root.result()

    def _record(self, n: Node, part: Part) -> None:
        r = self.report
        r["workers"] = r.get("workers", frozenset()) | part.workers
        if part.peak is not None:
            r["task_peak"] = max(r.get("task_peak", 0), part.peak)
        for k in self.child(n).all_kernels() + (
                self.child(n, "tail").all_kernels() if n.attrs.get("tail") is not None else []):
            k.seconds += part.kernel_seconds.get(k.name, 0.0)

    # ---- the executable's side

    def warm_up(self, prepared: Sequence[np.ndarray]) -> None:
        if not self.warm:  # compile the client's own kernels, loops stood in for
            self.warming = True
            try:
                self.evaluate(prepared)
            finally:
                self.warming = False
            self.warm = True

    def execute(self, prepared: Sequence[np.ndarray]) -> list[np.ndarray]:
        with session():
            self.report = {}
            return self.evaluate(prepared)

    def run(self, args: Sequence[Any]) -> Run:
        with session() as s:
            self.report = {"measure": True}
            r = super().run(args)
            report, self.report = self.report, {}
            peak = max(r.peak_bytes, report.get("task_peak", 0))
            return replace(r, peak_bytes=peak, workers=tuple(sorted(report.get("workers", ()))),
                           dashboard=s.dashboard)


class DaskBackend(Backend):
    name = "dask"
    peak_how = DaskInterpreter.peak_how
    # the tasks run the CPU backend's kernels (fused map-reduce bodies included): its plan
    temporaries = staticmethod(CpuBackend.temporaries)
    runs_body = staticmethod(CpuBackend.runs_body)
    loop_body = staticmethod(CpuBackend.loop_body)
    in_sweeps = False  # run when asked by name: without a client a run starts a cluster

    def unavailable_reason(self) -> str | None:
        missing = [m for m in ("dask", "distributed") if importlib.util.find_spec(m) is None]
        if missing:
            return (f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not "
                    f"installed (pip install gambit-explorer[distributed])")
        return CpuBackend().unavailable_reason()

    def session(self, client: Any = None, progress: bool | None = None,
                **settings: Any) -> contextlib.AbstractContextManager:
        if settings:
            raise BackendError(f"backend 'dask' takes client= and progress=, not "
                               f"{', '.join(settings)}")
        return session(client, progress)

    def compile(self, graph: Graph, options: CompileOptions) -> DaskInterpreter:
        return DaskInterpreter(graph, options=options)


register(DaskBackend())
