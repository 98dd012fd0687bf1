"""A stage's GPU program captured as a CUDA graph once per signature, then replayed (issue 40,
Part 2: no Python per op, no Python per step).

The first call with a signature (the arguments' shapes and dtypes) allocates the graph's
input buffers in a memory pool of the graph's own, copies the arguments in, runs the
program once on them as it is (compiling its kernels; that run's results are the call's),
then runs it again under stream capture: every launch of the program's lines (generated
kernels, cuBLAS, CuPy's own kernels) is recorded, not run, into one CUDA graph. A scan's
steps run from Python during the capture only, so the graph holds the body's launches once
per step (its trip count is static) and a replay has no Python per step. Every later call
with that signature copies its arguments into the input buffers (one copy each, on the
device; host arrays go straight into them), launches the graph, and returns copies of the
output buffers (so that a result outlives the next call). Values stay on the device from the
input buffers to the outputs; intermediates live in the graph's pool, which nothing else
allocates from, so a replay never writes over another value.

What cannot be captured, the program runs as it is, with the reason in the listing: a
`while` (its condition is read on the host at every step: CuPy 13/14 exposes no CUDA graph
conditional nodes, so the loop runs from the host), a `conditional` (its selector is read on
the host), an opaque op or a kernel that runs its host reference, and anything that turns
out to synchronise with the host during the capture (an op CuPy lacks, copied to the host
and back): CUDA refuses it and the capture is abandoned, with CuPy's message as the reason.

Everything takes the array module and a stream factory as arguments (as program.py takes
`xp`), so the layer runs on the host with a recording fake stream
(tests/backends/gpu/test_graphs.py). NOT YET RUN ON A GPU: the CuPy path (`cupy_capture`:
`cupy.cuda.Stream.begin_capture()`/`end_capture()`, `Graph.launch()`, a private
`cupy.cuda.MemoryPool`) is written to CuPy 13/14's documented API and has not run on a
device; bench/gpu_device_run.sh runs it on the first lent GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from ...ir.graph import Graph
from .program import to_device

Signature = tuple[tuple[tuple[int, ...], str], ...]


def host_syncs(graph: Graph, kernels: Sequence[Any] = ()) -> list[str]:
    """Why the program of `graph` cannot be captured as a CUDA graph: each node (in any body)
    that reads a device value on the host, and each kernel (of `kernels`) that runs its
    host reference. Empty when nothing known does."""
    out: list[str] = []

    def walk(g: Graph, where: str) -> None:
        for n in g.nodes:
            at = f"{where}%{n.id}" + (f" at {n.source.file}:{n.source.line}" if n.source else "")
            if n.op == "while":
                out.append(f"while {at}: its condition is read on the host at every step "
                           "(CuPy has no CUDA graph conditional nodes: the loop runs from the host)")
            elif n.op == "conditional":
                out.append(f"conditional {at}: its selector is read on the host")
            elif n.op == "opaque":
                out.append(f"opaque {at}: runs on the host")
            if n.op == "kernel":
                continue
            for v in n.attrs.values():
                for body in (v if isinstance(v, list | tuple) else (v,)):
                    if isinstance(body, Graph):
                        walk(body, f"{where}%{n.id}/")

    walk(graph, "")
    for k in kernels:
        inner = getattr(k, "epilogue", k)
        if getattr(inner, "code", "") is None:
            out.append(f"kernel {k.name}: runs its host reference ({getattr(inner, 'reason', '')})")
    return out


def scans(graph: Graph) -> list[str]:
    """The listing's line for each top-level scan of a captured program."""
    return [f"scan %{n.id}: its {n.attrs['length']} steps' launches are captured in the graph "
            "(no Python per step at replay)" for n in graph.nodes if n.op == "scan"]


@dataclass
class Captured:
    """One signature's graph: its input buffers, output buffers, stream and pool."""

    graph: Any
    inputs: list[Any]
    outputs: list[Any]
    stream: Any
    pool: Any


@dataclass
class CapturedProgram:
    """`fn` (a generated program: device arrays in, a list of device arrays out) captured
    once per signature and replayed. `xp` is the array module, `new_stream()` makes a
    capturing stream (CuPy's Stream(non_blocking=True): begin_capture, end_capture ->
    graph with launch(stream), synchronize, a context that makes it current), and
    `private_pool()` gives (a pool, a context in which allocations come from it)."""

    fn: Callable[..., list[Any]]
    xp: Any
    new_stream: Callable[[], Any]
    private_pool: Callable[[], tuple[Any, AbstractContextManager[Any]]]
    reasons: list[str] = field(default_factory=list)  # why not (then fn runs as it is)
    captured: dict[Signature, Captured] = field(default_factory=dict)
    captures: int = 0
    replays: int = 0
    kept: list[Any] = field(default_factory=list)  # pools of abandoned captures

    @property
    def capturable(self) -> bool:
        return not self.reasons

    def listing(self, graph: Graph | None = None) -> str:
        """The note the program's listing carries."""
        if self.reasons:
            return ("# CUDA graph: not captured, the program runs line by line: "
                    + "; ".join(self.reasons) + "\n")
        return ("# CUDA graph: captured once per signature (shapes, dtypes) on its first call, "
                "replayed after: arguments copied into its input buffers, one launch\n"
                + "".join(f"# {s}\n" for s in (scans(graph) if graph else ())))

    def __call__(self, *args: Any) -> list[Any]:
        if self.reasons:
            return self.fn(*args)
        sig = tuple((tuple(a.shape), str(a.dtype)) for a in args)
        entry = self.captured.get(sig)
        if entry is None:
            return self._capture(sig, args)
        self.replays += 1
        with entry.stream:
            for buf, a in zip(entry.inputs, args):
                self._copy_in(buf, a)
            entry.graph.launch(stream=entry.stream)
            outs = [o.copy() for o in entry.outputs]
        entry.stream.synchronize()
        return outs

    def _copy_in(self, buf: Any, a: Any) -> None:
        if isinstance(a, self.xp.ndarray):
            self.xp.copyto(buf, a)
        elif a.ndim == 0:  # (to_device keeps a 0-d -0.0's sign: see there)
            self.xp.copyto(buf, to_device(self.xp, a))
        else:  # a host array: straight into the device buffer
            buf.set(a)

    def _capture(self, sig: Signature, args: Sequence[Any]) -> list[Any]:
        pool, allocating = self.private_pool()
        stream = self.new_stream()
        with allocating, stream:
            inputs = [self.xp.empty(shape, dtype) for shape, dtype in sig]
            for buf, a in zip(inputs, args):
                self._copy_in(buf, a)
            first = self.fn(*inputs)  # compiles the kernels; its results are this call's
            stream.synchronize()
            stream.begin_capture()
            try:
                outputs = self.fn(*inputs)
            except Exception as e:  # a host synchronisation CUDA refused under capture
                with _quiet():
                    stream.end_capture()
                self.kept.append(pool)  # (this call's results live in it)
                self.reasons.append(f"the capture failed ({type(e).__name__}: "
                                    f"{(str(e).splitlines() or [''])[0]})")
                return first
            graph = stream.end_capture()
        self.captured[sig] = Captured(graph, inputs, list(outputs), stream, pool)
        self.captures += 1
        return first


@contextmanager
def _quiet() -> Iterator[None]:
    """(Ending a capture that an error invalidated raises too: that error says nothing more.)"""
    try:
        yield
    except Exception:  # noqa: S110
        pass


def cupy_capture(fn: Callable[..., list[Any]], reasons: list[str],
                 limit: int | None = None) -> CapturedProgram:
    """`fn` captured with CuPy: a non-blocking stream per signature, and a private memory
    pool per graph, holding its buffers from one call to the next (of at most `limit`
    bytes where given: an allocation past it fails with CuPy's OutOfMemoryError). (Not yet
    run on a GPU: see the module's docstring.)"""
    import cupy

    def pool() -> tuple[Any, AbstractContextManager[Any]]:
        p = cupy.cuda.MemoryPool()
        if limit is not None:
            p.set_limit(size=limit)
        return p, cupy.cuda.using_allocator(p.malloc)

    return CapturedProgram(fn, cupy, lambda: cupy.cuda.Stream(non_blocking=True), pool,
                           list(reasons))
