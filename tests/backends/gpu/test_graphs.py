"""The graph-capture layer (explorer/backends/gpu/graphs.py) on the host: the zoo's GPU
programs (program.py over a fake array module) captured with a recording fake stream
(tests/backends/gpu/fake_device.py), which replays what the capture recorded without the
program's Python. Checked: captured once per signature and replayed after; the results of
every call, on new inputs each time, equal to the reference interpreter's and the uncaptured
program's; no program line, kernel object or scan step runs from Python at replay; host
arguments go straight into the input buffers; a program that reads a device value on the host
(a while, a conditional, an `.item()`) is not captured, runs as it is, and the listing says
why. The real CuPy path (`cupy_capture`) has NOT run here: it needs a GPU
(bench/gpu_device_run.sh)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference
from explorer.backends.gpu import program as program_module
from explorer.backends.gpu.graphs import CapturedProgram, host_syncs
from explorer.backends.gpu.program import generate_program
from explorer.backends.reference import NumpyInterpreter
from explorer.ir import Graph, Node
from explorer.measure.inputs import random_inputs
from tests.backends.cuda_host import host_compiler
from tests.backends.gpu import fake_device
from tests.backends.gpu.fake_device import TAPE, FakeStream, HostSync, private_pool, xp
from tests.corpora.wide import PROGRAMS as WIDE_PROGRAMS
from tests.corpora.zoo import zoo
from tests.passes.semantic import assert_outputs_close

# the routines (convolutions, gathers...) launch their CUDA compiled for the host
pytestmark = pytest.mark.skipif(host_compiler() is None, reason="no g++ to build the host kernels")

ZOO = zoo()
WIDE = {f"wide {name}": make for name, make in WIDE_PROGRAMS.items()}  # (made when tested)
HOST_READS = {"while_halving", "cond_switch"}  # a while, a cond: each read on the host


class FakeKernel:
    """A fused kernel on the fake device: its body by the reference, one launch (one entry
    on the tape under capture). `calls` counts the Python calls of kernel objects."""

    calls = 0
    in_place: frozenset[int] = frozenset()

    def __init__(self, node: Node, name: str) -> None:
        self.name, self.body = name, node.attrs["body"]
        self.seconds, self.timed, self.reason = 0.0, False, ""
        self.code = "stand-in for generated CUDA"

    def __call__(self, vals: list[Any]) -> Any:
        FakeKernel.calls += 1

        def launch(*v: Any) -> Any:
            with np.errstate(all="ignore"):
                return reference.evaluate(self.body, list(v))[0]

        return fake_device.run(launch, tuple(vals))


@pytest.fixture(autouse=True)
def _ops_as_device_computations(monkeypatch: pytest.MonkeyPatch) -> None:
    """An op's NumPy reference on device arrays is one device computation here (CuPy runs
    each NumPy function it dispatches to on the device; the fake records the op whole,
    since a reference's inner `np.asarray` would leave the fake's recording). Where CuPy
    lacks a function, a real run goes to the host and the capture fails (tested below)."""

    def device_op(ref: Any, _xp: Any) -> Any:
        def op(*vals: Any, **attrs: Any) -> Any:
            with np.errstate(all="ignore"):
                return fake_device.run(ref, vals, attrs)

        return op

    monkeypatch.setattr(program_module, "device_op", device_op)


class Counted:
    """The program's entry point, counting its Python calls."""

    def __init__(self, fn: Any) -> None:
        self.fn, self.calls = fn, 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return self.fn(*args)


def _captured(g: Graph) -> tuple[CapturedProgram, Counted, Any]:
    program = generate_program(g, xp, FakeKernel, NumpyInterpreter)
    fn = Counted(program.fn)
    return CapturedProgram(fn, xp, FakeStream, private_pool, host_syncs(g, program.kernels)), fn, program


def _inputs(g: Graph, seed: int, like: list[np.ndarray]) -> list[np.ndarray]:
    """Random arguments of the graph's signature, like the traced ones (indices in range)."""
    return reference.check_args(g, random_inputs(g, np.random.default_rng(seed), like=like))


def _check(g: Graph, got: list[Any], args: list[np.ndarray], what: str) -> None:
    with np.errstate(all="ignore"):
        want = reference.evaluate(g, list(args))
    assert_outputs_close(want, [np.asarray(fake_device.plain(o)) for o in got], what)


@pytest.mark.parametrize("name", sorted(set(ZOO) - HOST_READS) + list(WIDE))
def test_a_program_is_captured_once_and_replayed_without_its_python(name: str) -> None:
    fn, args = ZOO[name] if name in ZOO else WIDE[name]("small")
    t = gx.explore(fn, *args)
    g = t.final.graph
    cap, entry, _ = _captured(g)
    assert cap.capturable, cap.reasons  # (newton_fori: a fori_loop is a scan, static trips)
    traced = reference.check_args(g, t.flat_args(args))
    calls = [traced, _inputs(g, 1, traced), _inputs(g, 2, traced)]
    first = cap(*[xp.asarray(a) for a in calls[0]])  # device arguments
    _check(g, first, calls[0], f"{name}: the capturing call")
    assert (cap.captures, cap.replays, entry.calls) == (1, 0, 2)  # a plain run, then the capture
    (graph,) = [c.graph for c in cap.captured.values()]
    assert graph.ops, "nothing was recorded"
    kernels_before, uploads = FakeKernel.calls, TAPE.uploads
    for k, a in enumerate(calls[1:], 1):
        out = cap(*a)  # host arguments: straight into the input buffers
        _check(g, out, a, f"{name}: replay {k}")
    assert (cap.captures, cap.replays, graph.launches) == (1, 2, 2)
    assert entry.calls == 2 and FakeKernel.calls == kernels_before  # no Python per op or step
    assert TAPE.uploads - uploads == sum(a.ndim > 0 for a in calls[1]) * 2
    # a result outlives the next call (outputs are copies of the graph's buffers)
    again = cap(*calls[1])
    _check(g, out, calls[2], f"{name}: the earlier result kept")
    _check(g, again, calls[1], f"{name}: replay 3")


def test_a_scan_is_captured_whole_and_the_listing_says_so() -> None:
    fn, args = ZOO["rnn_scan"]
    t = gx.explore(fn, *args)
    g = t.final.graph
    cap, _, program = _captured(g)
    (scan,) = [n for n in g.nodes if n.op == "scan"]
    steps = scan.attrs["length"]
    text = cap.listing(g)
    assert "captured once per signature" in text
    assert f"scan %{scan.id}: its {steps} steps' launches are captured in the graph" in text
    body_kernels = sum(1 for n in scan.attrs["body"].nodes if n.op == "kernel")
    before = FakeKernel.calls
    cap(*reference.check_args(g, t.flat_args(args)))
    per_run = (FakeKernel.calls - before) // 2  # (the plain run and the capture)
    assert per_run >= steps * body_kernels  # the body's launches, once per step
    (graph,) = [c.graph for c in cap.captured.values()]
    assert len(graph.ops) >= steps * max(body_kernels, 1)


@pytest.mark.parametrize("name", sorted(HOST_READS))
def test_a_program_that_reads_the_device_on_the_host_is_not_captured(name: str) -> None:
    fn, args = ZOO[name]
    t = gx.explore(fn, *args)
    g = t.final.graph
    cap, entry, _ = _captured(g)
    assert {n.op for n in g.nodes} & {"while", "conditional"}
    assert not cap.capturable
    text = cap.listing(g)
    assert text.startswith("# CUDA graph: not captured")
    assert ("while %" in text and "CuPy has no CUDA graph conditional nodes" in text) or \
        "conditional %" in text, text
    flat = reference.check_args(g, t.flat_args(args))
    for _ in range(2):
        _check(g, cap(*[xp.asarray(a) for a in flat]), flat, name)
    assert cap.captures == 0 and entry.calls == 2  # line by line, every call


def test_a_host_sync_found_during_the_capture_abandons_it_with_the_reason() -> None:
    calls = []

    def program(x: Any) -> list[Any]:
        calls.append(1)
        y = xp.tanh(x)
        scale = float(y.sum().item())  # a value read on the host: CUDA refuses it under capture
        return [y * scale]

    cap = CapturedProgram(program, xp, FakeStream, private_pool)
    assert cap.capturable  # (nothing known ahead)
    x = np.linspace(-1, 1, 5).astype(np.float32)
    want = np.tanh(x) * np.tanh(x).sum()
    for _ in range(3):
        np.testing.assert_allclose(fake_device.plain(cap(xp.asarray(x))[0]), want, rtol=1e-6)
    assert not cap.capturable and cap.captures == 0
    assert "the capture failed (HostSync" in cap.reasons[0] and ".item()" in cap.reasons[0]
    assert "not captured" in cap.listing()
    assert len(calls) == 1 + 1 + 2  # plain run, the failed capture, then line by line
    assert not TAPE.capturing  # the capture was ended


def test_each_signature_has_its_own_graph() -> None:
    def program(x: Any) -> list[Any]:
        return [xp.exp(x) * 2.0 + x.sum()]

    cap = CapturedProgram(program, xp, FakeStream, private_pool)
    rng = np.random.default_rng(0)
    for shape, dtype in [((3,), np.float32), ((3,), np.float32), ((4,), np.float32),
                         ((3,), np.float64), ((4,), np.float32)]:
        x = rng.standard_normal(shape).astype(dtype)
        got = fake_device.plain(cap(x)[0])
        assert got.dtype == dtype
        np.testing.assert_allclose(got, np.exp(x) * 2 + x.sum(), rtol=1e-6)
    assert (cap.captures, cap.replays) == (3, 2)


def test_the_fake_stream_refuses_what_cuda_refuses_under_capture() -> None:
    """(The fake itself can fail: a host read under capture raises, and invalidates it.)"""
    s = FakeStream()
    x = xp.asarray(np.ones(2))
    s.begin_capture()
    with pytest.raises(HostSync):
        bool(x.sum() > 0)
    with pytest.raises(HostSync, match="Invalidated"):
        s.end_capture()
    s.begin_capture()
    y = x * 3
    graph = s.end_capture()
    x[...] = 2.0
    graph.launch()
    assert fake_device.plain(y).tolist() == [6.0, 6.0]


@pytest.mark.parametrize("name", ["gpt_block", "while_halving"])
def test_the_gpu_backends_program_runs_through_its_graph(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """backend.GpuProgram on the fake device: its listing says whether the stage is a
    captured graph, `gx.compile`'s call (host arrays) and a measured run's warm-up go
    through it, and its results are the reference's."""
    from explorer.backends.gpu import backend

    monkeypatch.setattr(backend, "_cp", lambda: xp)
    monkeypatch.setattr(backend, "sync", lambda: None)
    monkeypatch.setattr(backend, "compile_kernel", FakeKernel)
    monkeypatch.setattr(backend, "cupy_capture", lambda fn, reasons, limit=None:
                        CapturedProgram(fn, xp, FakeStream, private_pool, reasons))
    fn, args = ZOO[name]
    t = gx.explore(fn, *args)
    g = t.final.graph
    exe = backend.GpuProgram(g)
    assert exe.program is not None and exe.captured is not None
    capturable = name not in HOST_READS
    assert exe.captured.capturable == capturable
    assert ("# CUDA graph: captured once per signature" in exe.source) == capturable
    assert ("# CUDA graph: not captured" in exe.source) != capturable
    traced = reference.check_args(g, t.flat_args(args))
    for a in (traced, _inputs(g, 1, traced), _inputs(g, 2, traced)):
        _check(g, exe.call(a), a, name)
    _check(g, exe.execute(exe.prepare(traced)), traced, name)  # device arguments
    assert (exe.captured.captures, exe.captured.replays) == ((1, 3) if capturable else (0, 0))


def test_a_kernel_on_its_host_reference_keeps_the_program_from_capture() -> None:
    """host_syncs over the program's kernels: one without CUDA (its body runs on the host
    reference, the value copied there and back) is a reason, an output fusion's by its
    epilogue."""

    class Kernel:
        def __init__(self, name: str, code: Any, reason: str = "") -> None:
            self.name, self.code, self.reason = name, code, reason

    class Fusion:
        name = "fused_9"
        epilogue = Kernel("fused_9_epilogue", None, "no CUDA form for this epilogue")

    fn, args = ZOO["gpt_block"]
    g = gx.explore(fn, *args).final.graph
    assert host_syncs(g, [Kernel("fused_3", "CUDA")]) == []
    got = host_syncs(g, [Kernel("fused_3", "CUDA"), Kernel("fused_5", None, "bitcast has no form"),
                         Fusion()])
    assert got == ["kernel fused_5: runs its host reference (bitcast has no form)",
                   "kernel fused_9: runs its host reference (no CUDA form for this epilogue)"]
