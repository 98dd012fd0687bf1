"""The reference backend: the interpreter core with the op table's NumPy references.

It is the correctness oracle for every pass. Each value is dropped right after its last use
(backends/interpreter.py), so the peak of temporaries that tracemalloc measures follows the
program's schedule. The CPU backend is this interpreter with compiled kernels and BLAS dots.
"""

from __future__ import annotations

import contextlib
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir import dtypes
from ..ir.graph import Graph, Node, TensorType
from ..ir.ops import OPS
from ..options import CompileOptions
from .interpreter import Interpreter, last_uses
from .numpy_temporaries import workspace_bytes
from .registry import Backend, Run, Step, register
from .result import Kernel

__all__ = ["ArgumentError", "NumpyInterpreter", "ReferenceBackend", "check_args",
           "evaluate", "last_uses", "measured", "run"]


class ArgumentError(ValueError):
    """Arguments that do not match the graph's parameters."""


def check_args(g: Graph, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    if len(args) != len(g.params):
        raise ArgumentError(f"@{g.name} takes {len(g.params)} array arguments, got {len(args)}")
    out = []
    for p, a in zip(g.param_nodes, args):
        arr = np.asarray(a)
        t = p.type
        assert isinstance(t, TensorType)
        name = p.attrs.get("name", f"%{p.id}")
        if tuple(arr.shape) != t.shape:
            raise ArgumentError(f"argument {name} has shape {tuple(arr.shape)}, but the graph "
                                f"was traced with shape {t.shape}")
        want = dtypes.to_numpy(t.dtype)
        if arr.dtype != want:
            if np.can_cast(arr.dtype, want, "same_kind"):
                arr = arr.astype(want)
            else:
                raise ArgumentError(f"argument {name} has element type {arr.dtype}, but the "
                                    f"graph was traced with {want}")
        out.append(arr)
    return out


def as_typed(n: Node, out: Any) -> Any:
    """A node's value as NumPy arrays of the node's element type(s)."""
    if isinstance(n.type, TensorType):
        want = dtypes.to_numpy(n.type.dtype)
        if not isinstance(out, np.ndarray) or out.dtype != want:
            out = np.asarray(out, dtype=want)
        return out
    return tuple(np.asarray(o, dtype=dtypes.to_numpy(t.dtype))
                 for o, t in zip(out, n.type.elements))  # type: ignore[union-attr]


class NumpyInterpreter(Interpreter):
    """The interpreter on NumPy: every op through its op-table reference."""

    def quiet(self) -> contextlib.AbstractContextManager:
        return np.errstate(all="ignore")

    def run_op(self, n: Node, vals: Sequence[Any]) -> Any:
        return OPS[n.op].ref(*vals, **n.attrs)

    def run_node(self, n: Node, vals: Sequence[Any]) -> Any:
        return as_typed(n, super().run_node(n, vals))

    # ---- the executable's side: measured with tracemalloc

    peak_how = "tracemalloc"

    def prepare(self, args: Sequence[Any]) -> list[np.ndarray]:
        return check_args(self.graph, args)

    def execute(self, prepared: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run on prepared arguments without tracemalloc (which slows allocation): timing."""
        return self.evaluate(prepared)

    def warm_up(self, prepared: Sequence[np.ndarray]) -> None:
        """Anything to do before a measured run (compilation, say)."""

    def run(self, args: Sequence[Any]) -> Run:
        prepared = self.prepare(args)
        self.compile_bodies()  # (region bodies' interpreters: made now, not inside the measure)
        self.warm_up(prepared)
        kernels = self.all_kernels()
        for k in kernels:
            k.seconds = 0.0
        steps: list[Step] = []
        outs, seconds, peak = measured(self.graph, prepared,
                                       lambda hook: self.evaluate(prepared, hook), steps)
        listed = tuple(Kernel(k.name, k.source, k.seconds) for k in self.all_kernels())
        return Run(outs, seconds, peak, listed, self.peak_how, steps=tuple(steps))


def evaluate(g: Graph, args: Sequence[np.ndarray],
             after_step: Callable[[Node, object], None] | None = None,
             consume: bool = False) -> list[np.ndarray]:
    """Run `g` on `args` (already checked) and return its outputs; `consume`: see
    `Interpreter.evaluate`."""
    return NumpyInterpreter(g).evaluate(args, after_step, consume)


def run(g: Graph, args: Sequence[np.ndarray]) -> tuple[list[np.ndarray], float, int]:
    """(outputs, seconds, peak bytes of temporaries measured with tracemalloc)."""
    r = NumpyInterpreter(g).run(args)
    return r.outputs, r.seconds, r.peak_bytes


def measured(g: Graph, args: Sequence[np.ndarray],
             execute: Callable[[Callable[[Node, object], None]], list[np.ndarray]],
             steps: list[Step] | None = None) -> tuple[list[np.ndarray], float, int]:
    """Run `execute(after_step)` (an interpreter loop over `g` that calls the hook after each
    node) and measure it: (outputs, seconds, peak bytes of temporaries). The peak is taken
    step by step: after each node, the step's traced peak less the output buffers that exist
    by then (the program's results are not temporaries). `steps`, when given, receives each
    step's live and peak temporaries (the memory timeline's measured curve)."""
    outputs = set(g.outputs)
    seen: set[int] = set()
    state = {"outputs": 0, "peak": 0, "steps": 0}
    # each step's (node, live, peak), written in place: allocated before the base is taken,
    # so that recording the steps allocates nothing the measurement would count
    record = np.zeros((len(g.nodes) if steps is not None else 0, 3), np.int64)

    elements: dict[int, list[int]] = {}  # tuple node -> its elements that are outputs
    for o in g.outputs:
        if g[o].op == "get_tuple_element":
            elements.setdefault(g[o].inputs[0], []).append(g[o].attrs["index"])

    def after_step(n: Node, value: object) -> None:
        if n.id in outputs:
            state["outputs"] += _new_buffer_bytes(value, args, seen)
        elif n.id in elements and isinstance(value, tuple):
            state["outputs"] += _new_buffer_bytes(tuple(value[k] for k in elements[n.id]),
                                                  args, seen)
        current, peak = tracemalloc.get_traced_memory()
        state["peak"] = max(state["peak"], peak - base - state["outputs"])
        k = state["steps"]
        if k < len(record):
            record[k] = (n.id, current - base - state["outputs"], peak - base - state["outputs"])
            state["steps"] = k + 1
        tracemalloc.reset_peak()

    started_here = not tracemalloc.is_tracing()
    if started_here:
        tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        t0 = time.perf_counter()
        outs = execute(after_step)
        seconds = time.perf_counter() - t0
    finally:
        if started_here:
            tracemalloc.stop()
    if steps is not None:
        steps += [Step(int(node), max(0, int(live)), max(0, int(peak)))
                  for node, live, peak in record[:state["steps"]]]
    return outs, seconds, max(0, state["peak"])


def _new_buffer_bytes(value: object, args: Sequence[np.ndarray], seen: set[int]) -> int:
    """Bytes of the buffers behind `value` that the run allocated (not views of the inputs),
    each counted once across calls."""
    total = 0
    for arr in value if isinstance(value, tuple) else (value,):
        if not isinstance(arr, np.ndarray):
            continue
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        if id(root) in seen or any(np.shares_memory(root, a) for a in args):
            continue
        seen.add(id(root))
        total += root.nbytes
    return total


class ReferenceBackend(Backend):
    name = "reference"
    peak_how = NumpyInterpreter.peak_how
    temporaries = staticmethod(workspace_bytes)
    runs_body = staticmethod(lambda n: True)  # every kernel runs node by node

    def compile(self, graph: Graph, options: CompileOptions) -> NumpyInterpreter:
        return NumpyInterpreter(graph)


register(ReferenceBackend())
