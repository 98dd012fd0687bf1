"""The dask backend on a LocalCluster of 2 worker processes (loopback only): the same values as
the CPU backend, per-task measured peaks within the limit, a killed worker retried, bad
addresses refused quickly, and nothing left running."""

from __future__ import annotations

import importlib.util
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import combine, registry
from explorer.backends.reference import NumpyInterpreter
from explorer.ir.graph import TupleType

distributed = pytest.importorskip("distributed", reason="backend='dask' needs dask.distributed")
pytest.importorskip("numba", reason="the dask backend's tasks run the CPU backend's kernels")

from explorer.backends import dask as gd  # noqa: E402


def kernel_vector(x: jax.Array, y: jax.Array, v: jax.Array) -> jax.Array:
    return jnp.exp(-0.5 * jnp.sum((x[:, None] - y[None]) ** 2, -1)) @ v


def knn(q: jax.Array, p: jax.Array) -> jax.Array:
    return jax.lax.top_k(-jnp.sum((q[:, None] - p[None]) ** 2, -1), 10)[1]


def nearest(q: jax.Array, p: jax.Array) -> tuple[jax.Array, jax.Array]:
    d = jnp.sum((q[:, None] - p[None]) ** 2, -1)
    return jnp.argmin(d, 1), jnp.max(jnp.tanh(d), 0)


def row_norms(x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.sqrt(jnp.sum(jnp.exp(-(x[:, None] - y[None]) ** 2), (1, 2)))


RNG = np.random.default_rng(0)
F32 = np.float32
PROGRAMS: dict[str, tuple[Any, tuple[np.ndarray, ...], str]] = {
    "kernel-vector (sum)": (kernel_vector, (RNG.standard_normal((3000, 3), F32),
                                            RNG.standard_normal((3200, 3), F32),
                                            RNG.standard_normal(3200, F32)), "16MiB"),
    "knn (top_k with indices)": (knn, (RNG.standard_normal((1200, 3), F32),
                                       RNG.standard_normal((3000, 3), F32)), "16MiB"),
    "argmin and max (concat)": (nearest, (RNG.standard_normal((1400, 3), F32),
                                          RNG.standard_normal((2400, 3), F32)), "16MiB"),
    "row norms": (row_norms, (RNG.standard_normal((1500, 4), F32),
                              RNG.standard_normal((1800, 4), F32)), "16MiB"),
}


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate()}


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with gd.local_cluster(2) as cluster, \
            distributed.Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(2)
        yield c


def _loops(tr: gx.Trace) -> list[Any]:
    return [n for n in tr.final.graph.nodes if n.op == "loop"]


@pytest.mark.parametrize("name", PROGRAMS)
def test_same_values_as_the_cpu_backend_and_peaks_within_the_limit(name: str, client: Any) -> None:
    fn, args, limit = PROGRAMS[name]
    tr = gx.explore(fn, *args, memory_limit=limit)
    assert _loops(tr), "the program must be split for this test to mean anything"
    want = tr.run(backend="cpu")
    got = tr.run(backend="dask", client=client)
    for w, g in zip(jax.tree_util.tree_leaves(want.value), jax.tree_util.tree_leaves(got.value)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert 0 < got.peak_bytes <= gx.parse_bytes(limit)
    assert got.workers and set(got.workers) <= set(client.scheduler_info()["workers"])
    assert got.backend == "dask" and got.peak_bytes <= gx.parse_bytes(limit)
    names = {k.name for k in got.kernels}
    assert names == {k.name for k in want.kernels}  # the CPU backend's kernels, in the loops
    in_loops = [k for k in got.kernels if k.name.startswith("loop_")]  # map-reduce or inside
    assert in_loops and sum(k.seconds for k in in_loops) > 0  # timed on the workers


def test_tree_merge_equals_the_sequential_loop() -> None:
    """combine.merge over any grouping of ranges gives what one pass over the chunks gives."""
    small = {knn: ((300, 3), (700, 3)), nearest: ((300, 3), (500, 3)), row_norms: ((500, 4), (400, 4))}
    for fn, shapes in small.items():
        name = fn.__name__
        tr = gx.explore(fn, *(RNG.standard_normal(s, F32) for s in shapes), memory_limit="512KiB")
        args = tr.example_args
        g = tr.final.graph
        [n] = _loops(tr)
        interp = NumpyInterpreter(g)
        env: dict[int, Any] = {}
        interp.evaluate(tr.flat_args(args), lambda node, value, env=env: env.__setitem__(node.id, value))
        vals = [env[i] for i in n.inputs]
        size, chunk = n.attrs["size"], n.attrs["chunk"]
        types = list(n.type.elements) if isinstance(n.type, TupleType) else [n.type]
        whole = interp.loop_range(n, vals, 0, size)
        for tasks in (1, 2, 3, 7):
            parts = [(lo, hi, interp.loop_range(n, vals, lo, hi))
                     for lo, hi in gd.ranges(size, chunk, tasks)]
            while len(parts) > 1:  # fan-in 2 here, MERGE_FAN_IN on the cluster
                parts = [(p[0][0], p[-1][1], combine.merge(np, n.attrs["combine"], types, p))
                         for p in (parts[k:k + 2] for k in range(0, len(parts), 2))]
            for w, got in zip(whole, parts[0][2]):
                np.testing.assert_allclose(got, w, rtol=1e-5, err_msg=f"{name}, {tasks} tasks")


def test_ranges_cover_the_loop_in_whole_chunks() -> None:
    assert gd.ranges(10, 3, 2) == [(0, 6), (6, 10)]  # 4 iterations, 2 a task
    assert gd.ranges(10, 3, 99) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert gd.ranges(9, 9, 4) == [(0, 9)]
    with pytest.raises(ValueError, match="not consecutive"):
        combine.merge(np, [("add",)], [], [(0, 2, [np.ones(1)]), (3, 4, [np.ones(1)])])


def test_active_client_and_gx_compile_take_a_client_or_an_address(client: Any) -> None:
    fn, args, limit = PROGRAMS["kernel-vector (sum)"]
    want = np.asarray(gx.compile(fn, memory_limit=limit)(*args))
    by_client = gx.compile(fn, memory_limit=limit, backend="dask", client=client)
    np.testing.assert_allclose(np.asarray(by_client(*args)), want, rtol=1e-5, atol=1e-5)
    by_address = gx.compile(fn, memory_limit=limit, backend="dask",
                            client=client.scheduler.address)
    np.testing.assert_allclose(np.asarray(by_address(*args)), want, rtol=1e-5, atol=1e-5)
    tr = by_client.trace_for(*args)
    with client.as_current():  # distributed.get_client() finds it
        r = tr.run(backend="dask")
    assert set(r.workers) <= set(client.scheduler_info()["workers"])


def test_without_a_client_a_local_cluster_is_started_and_closed(monkeypatch) -> None:
    started: list[Any] = []

    def small_cluster() -> Any:  # a thread-based one keeps the test fast
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                           dashboard_address="127.0.0.1:0")
        started.append(cluster)
        return cluster

    monkeypatch.setattr(gd, "local_cluster", small_cluster)
    before = _threads()
    tr = gx.explore(kernel_vector, *PROGRAMS["kernel-vector (sum)"][1], memory_limit="1MiB")
    unsplit = gx.explore(lambda x: x * 2.0 + 1.0, np.ones(4, F32))
    np.testing.assert_allclose(unsplit.run(backend="dask").value, 3.0)
    assert not started  # no split loop: no cluster
    r = tr.run(backend="dask")
    np.testing.assert_allclose(r.value, tr.run(backend="cpu").value, rtol=1e-5, atol=1e-5)
    [cluster] = started
    assert cluster.status.name == "closed"
    _no_new_threads(before)


def _no_new_threads(before: set[str], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while (left := _threads() - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"left running: {sorted(left)}"


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:9", "not a scheduler::address"])
def test_a_bad_address_is_a_clear_error_within_seconds(address: str) -> None:
    tr = gx.explore(kernel_vector, *PROGRAMS["kernel-vector (sum)"][1], memory_limit="1MiB")
    before = _threads()
    t0 = time.monotonic()
    with pytest.raises(gd.DaskError, match="cannot connect to the Dask scheduler"):
        tr.run(backend="dask", client=address)
    assert time.monotonic() - t0 < gd.CONNECT_TIMEOUT_S + 5
    _no_new_threads(before)
    with pytest.raises(registry.BackendError, match="takes client= and progress="):
        tr.run(backend="dask", scheduler=address)
    with pytest.raises(registry.BackendError, match="takes no run settings"):
        tr.run(backend="cpu", client=address)


def test_worker_memory_limits_are_checked_against_the_tasks(client: Any) -> None:
    class Small:  # what scheduler_info says of a cluster whose workers have 1 MiB each
        def scheduler_info(self, n_workers: int = 5) -> dict:
            return {"workers": {"tcp://w:1": {"memory_limit": 2**20, "nthreads": 2}}}

    interp = gd.DaskInterpreter(gx.explore(kernel_vector, *PROGRAMS["kernel-vector (sum)"][1],
                                           memory_limit="1MiB").final.graph,
                                options=gx.CompileOptions(memory_limit=2**20))
    with pytest.raises(gd.DaskError, match=r"tcp://w:1 has memory_limit=1.0 MiB.*2 threads"):
        interp._check_memory(Small(), [np.zeros(100)])
    interp._check_memory(client, [np.zeros(100)])  # the test cluster's workers: room enough


def test_a_killed_worker_is_retried_and_the_result_is_right(client: Any) -> None:
    rng = np.random.default_rng(1)
    args = (rng.standard_normal((4000, 3)), rng.standard_normal((4000, 3)),
            rng.standard_normal(4000))
    tr = gx.explore(kernel_vector, *args, memory_limit="2MiB")
    want = tr.run(backend="cpu").value
    pids = client.run(os.getpid)
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["r"] = tr.run(backend="dask", client=client)
        except BaseException as e:  # noqa: BLE001 - reported below
            result["error"] = e

    runner = threading.Thread(target=run)
    runner.start()
    victim = None
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline and runner.is_alive():
        busy = [w for w, keys in client.processing().items()
                if any("gambit-chunks" in str(k) for k in keys)]
        victim = busy[0] if busy else None
        time.sleep(0.02)
    assert victim is not None, "the run ended before a worker could be killed"
    os.kill(pids[victim], signal.SIGKILL)
    runner.join(120)
    assert "error" not in result, result.get("error")
    np.testing.assert_allclose(result["r"].value, want, rtol=1e-5, atol=1e-5)
    client.wait_for_workers(2, timeout=60)  # the nanny restarts it for the next tests


def test_registered_and_unavailable_without_dask(monkeypatch) -> None:
    assert "dask" in registry.names() and "dask" in registry.available()
    assert "dask" not in registry.sweep()  # runs over every backend do not start clusters
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "distributed" else real(name, *a))
    reason = registry.unavailable_reason("dask")
    assert reason is not None and "distributed is not installed" in reason
    assert "pip install gambit-explorer[distributed]" in reason
    assert "dask" not in registry.available()
    with pytest.raises(registry.BackendError, match="distributed is not installed"):
        registry.get("dask")


def test_long_runs_show_dask_progress(client: Any, monkeypatch, capsys) -> None:
    monkeypatch.setattr(gd, "PROGRESS_AFTER_S", 0.0)
    fn, args, limit = PROGRAMS["kernel-vector (sum)"]
    tr = gx.explore(fn, *args, memory_limit=limit)
    tr.run(backend="dask", client=client, progress=True)
    assert "Completed" in capsys.readouterr().out


def test_gambit_magic_runs_on_the_scheduler_given(client: Any, monkeypatch) -> None:
    from IPython.core.error import UsageError

    from explorer import magic
    from tests.ipyshell import ipython_shell

    monkeypatch.setattr(magic, "display", lambda *a: None)
    ip = ipython_shell()
    ip.user_ns.update(kernel_vector=kernel_vector, args=PROGRAMS["kernel-vector (sum)"][1])
    cell = "kernel_vector(*args)"
    line = f"--backend dask --scheduler {client.scheduler.address} --memory-limit 16MiB"
    value = ip.run_cell_magic("gambit", line + " --out dask_trace", cell)
    want = ip.user_ns["dask_trace"].run(backend="cpu").value
    np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(UsageError, match="cannot connect to the Dask scheduler"):
        ip.run_cell_magic("gambit", "--backend dask --scheduler tcp://127.0.0.1:9", cell)
    with pytest.raises(UsageError, match="--scheduler is for --backend dask"):
        ip.run_cell_magic("gambit", "--backend cpu --scheduler tcp://127.0.0.1:9", cell)


def test_the_widget_run_row_names_the_workers_and_links_the_dashboard(client: Any) -> None:
    from explorer.view.runs import RunLog
    from explorer.view.schema import RunRow, problems

    fn, args, limit = PROGRAMS["kernel-vector (sum)"]
    tr = gx.explore(fn, *args, memory_limit=limit)
    with client.as_current():
        row = RunLog(tr, repeats=1).run(len(tr.stages) - 1, "dask")
    assert not row["error"] and row["ok"], row
    assert 1 <= row["workers"] <= len(client.scheduler_info()["workers"])
    assert row["dashboard"] == client.dashboard_link
    assert problems(row, RunRow) == []
    cpu = RunLog(tr, repeats=1).run(len(tr.stages) - 1, "cpu")
    assert cpu["workers"] == 0 and cpu["dashboard"] == ""


def test_profile_and_memory_timeline_on_the_cluster(client: Any) -> None:
    """trace.profile and trace.memory_timeline take the backend's run settings, as trace.run
    does: the split loops run as tasks on the given cluster, timed as one statement each."""
    fn, args, limit = next(iter(PROGRAMS.values()))
    tr = gx.explore(fn, *args, memory_limit=limit)
    p = tr.profile(backend="dask", client=client, repeats=2)
    loops = [r for r in p.rows if r.op == "loop"]
    assert loops and all(r.seconds > 0 for r in loops) and p.total > 0
    m = tr.memory_timeline(backend="dask", client=client)
    assert m.memory_limit == gx.parse_bytes(limit) and m.planned_peak <= m.memory_limit
