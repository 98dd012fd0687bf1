"""The one interpreter core every backend runs on (torch.fx's `Interpreter` is the model).

`Interpreter(graph)` walks the graph's nodes in order, binding parameters to arguments,
computing each node from its inputs and dropping every value right after its last use, so
the live memory follows the program's schedule. Region ops are handled here once: a `kernel`
or `call` runs its body (unless the backend compiled the kernel), `while`, `conditional` and
`scan` run their bodies through the control-flow drivers (control_flow.py, which generated
programs call too), and a split `loop` runs its
body chunk by chunk and folds the chunk results with the combiners of backends/combine.py,
written against the backend's array namespace `xp`.

A backend subclasses it and overrides only what differs:
  run_op(node, values)        any op of the table (required)
  run_dot(node, values)       dot_general (default: run_op)
  compile_kernel(node, name)  a fused kernel -> a callable with name/source/seconds, or None
                              to run the kernel's body node by node
  run_while / run_conditional / run_scan / run_shard_map
                              control flow (JAX lowers them to lax), chunk (slicing)
and, for the executable's side, prepare / execute / run (how it is measured).
Region bodies get child interpreters of the same class, made once per node.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.ops import OPS
from ..ir.ops.regions import bodies
from ..ir.traits import OpKind
from . import control_flow, spmd
from .combine import Combiner, chunk_of, span_types
from .control_flow import elements, one_or_tuple

AfterStep = Callable[[Node, object], None]


def last_uses(g: Graph) -> dict[int, list[int]]:
    """node id -> ids of values whose last reader it is (never the graph's outputs)."""
    last: dict[int, int] = {}
    for n in g.nodes:
        for i in n.inputs:
            last[i] = n.id
    keep = set(g.outputs)
    frees: dict[int, list[int]] = {}
    for value, reader in last.items():
        if value not in keep:
            frees.setdefault(reader, []).append(value)
    for n in g.nodes:  # never read: dropped at once (as the memory planner assumes)
        if n.id not in last and n.id not in keep and n.op != "parameter":
            frees.setdefault(n.id, []).append(n.id)
    return frees


class Interpreter:
    """Runs one graph; see the module docstring."""

    xp: ClassVar[Any] = np  # the array namespace the combiners use

    def __init__(self, graph: Graph, prefix: str = "") -> None:
        self.graph, self.prefix = graph, prefix
        self.frees = last_uses(graph)
        self.params = {p: k for k, p in enumerate(graph.params)}
        self.children: dict[tuple[int, str, int], Interpreter] = {}
        self.kernels: dict[int, Any] = {}
        for n in graph.nodes:
            if n.op == "kernel":
                k = self.compile_kernel(n, f"{prefix}{n.attrs['body'].name}")
                if k is not None:
                    self.kernels[n.id] = k

    # ---- what a backend overrides

    def run_op(self, n: Node, vals: Sequence[Any]) -> Any:
        raise NotImplementedError(f"{type(self).__name__} runs no {n.op}")

    def run_dot(self, n: Node, vals: Sequence[Any]) -> Any:
        return self.run_op(n, vals)

    def compile_kernel(self, n: Node, name: str) -> Any:
        return None

    def quiet(self) -> contextlib.AbstractContextManager:
        """The context the walk over the nodes runs in (NumPy: floating-point warnings off)."""
        return contextlib.nullcontext()

    def chunk(self, x: Any, axis: int, start: int, stop: int) -> Any:
        return chunk_of(x, axis, start, stop)

    # ---- the walk

    def stepped(self, prepared: Sequence[Any], after_step: AfterStep) -> list[Any]:
        """A run on prepared arguments that calls `after_step(node, value)` after each node
        of the graph's top level (the profile's and the memory timeline's hook)."""
        return self.evaluate(prepared, after_step)

    def sync(self) -> None:
        """Wait until the work launched so far has finished (a device backend's queue)."""

    def evaluate(self, args: Sequence[Any], after_step: AfterStep | None = None,
                 consume: bool = False) -> list[Any]:
        """The graph's outputs on `args` (already prepared); `after_step(node, value)` is
        called after each node is computed (the measuring hook). With `consume`, `args` is a
        list the caller hands over: its entries are dropped once bound, so a parameter's
        buffer is freed at its last use here when nothing outside holds it (a kernel body
        run node by node then frees what its unfused ops would have)."""
        env: dict[int, Any] = {}
        with self.quiet():
            if consume:
                for p, k in self.params.items():
                    env[p] = args[k]
                assert isinstance(args, list)
                args[:] = [None] * len(args)
            for n in self.graph.nodes:
                if n.op == "parameter":
                    value = env[n.id] if consume else args[self.params[n.id]]
                else:
                    vals = [env[i] for i in n.inputs]
                    for dead in self.frees.get(n.id, ()):  # the op holds them now: a body
                        env.pop(dead, None)  # run node by node may free them early
                    value = self.run_node(n, vals)
                    del vals
                env[n.id] = value
                for dead in self.frees.get(n.id, ()):
                    env.pop(dead, None)
                if after_step is not None:
                    after_step(n, value)
                del value
        return [env[o] for o in self.graph.outputs]

    def run_node(self, n: Node, vals: Sequence[Any]) -> Any:
        if n.id in self.kernels:
            return self.kernels[n.id](vals)
        region = _REGIONS.get(n.op)
        if region is not None:
            return region(self, n, vals)
        if OPS[n.op].kind == OpKind.COLLECTIVE and spmd.in_shard_map():
            return spmd.collective(n, vals)  # the devices of the shard_map meet here
        if n.op == "dot_general":
            return self.run_dot(n, vals)
        return self.run_op(n, vals)

    # ---- regions, handled once

    def child(self, n: Node, key: str = "body", index: int = 0) -> Interpreter:
        """The interpreter of one of `n`'s bodies (made on first use)."""
        slot = (n.id, key, index)
        if slot not in self.children:
            body = n.attrs[key]
            if isinstance(body, (list, tuple)):
                body = body[index]
            tag = "" if key == "body" else f"{key}{index if key == 'branches' else ''}/"
            self.children[slot] = self.make_child(body, f"{self.prefix}{n.op}_{n.id}/{tag}")
        return self.children[slot]

    def make_child(self, body: Graph, prefix: str) -> Interpreter:
        return type(self)(body, prefix)

    def run_kernel(self, n: Node, vals: Sequence[Any]) -> Any:
        return one_or_tuple(self.child(n).evaluate(vals, consume=isinstance(vals, list)))

    def body_function(self, n: Node, key: str = "body", index: int = 0) -> Callable[..., list[Any]]:
        """One of `n`'s bodies as the control-flow drivers call it: a function of its
        parameters returning its results (its child interpreter made on the first call)."""
        return lambda *args: self.child(n, key, index).evaluate(args)

    def run_while(self, n: Node, vals: Sequence[Any]) -> Any:
        return control_flow.run_while(self.body_function(n, "cond"), self.body_function(n), vals)

    def run_conditional(self, n: Node, vals: Sequence[Any]) -> Any:
        branches = n.attrs["branches"]
        return control_flow.run_conditional(
            [self.body_function(n, "branches", k) for k in range(len(branches))],
            [len(b.params) for b in branches], vals)

    def run_scan(self, n: Node, vals: Sequence[Any]) -> Any:
        """Iteration i reads row i of each scanned input and writes row i of each stacked
        result (allocated once), so one iteration's temporaries are live at a time."""
        a = n.attrs
        return control_flow.run_scan(self.body_function(n), vals, n.type, a["length"], a["reverse"],
                                     a["num_consts"], a["num_carry"], self.xp)

    def run_shard_map(self, n: Node, vals: Sequence[Any]) -> Any:
        """Its body on every device of its mesh (a thread each), meeting at collectives
        (backends/spmd.py): the global semantics, on one host."""
        return spmd.run_shard_map(self, n, vals)

    def run_loop(self, n: Node, vals: Sequence[Any]) -> Any:
        """A split loop: the body on each chunk (the tail body on a shorter last chunk), the
        chunk results folded in as they come, so one iteration's temporaries are live."""
        return one_or_tuple(self.loop_range(n, vals, 0, n.attrs["size"]))

    def loop_range(self, n: Node, vals: Sequence[Any], lo: int, hi: int) -> list[Any]:
        """The loop's results over positions [lo, hi) (`lo` on a chunk boundary) in the frame
        of `lo`: concat results hold those rows only, index results count from `lo`. A
        distributed backend runs ranges as tasks and merges them with combine.merge."""
        a = n.attrs
        size, chunk = a["size"], a["chunk"]
        split = dict(a["split_inputs"])
        types = elements(n.type)
        combiner = Combiner(self.xp, a["combine"], span_types(types, a["combine"], hi - lo))  # type: ignore[arg-type]
        for start in range(lo, hi, chunk):
            stop = min(start + chunk, size)
            body = self.child(n) if stop - start == chunk else self.child(n, "tail")
            args = [self.chunk(v, split[k], start, stop) if k in split else v
                    for k, v in enumerate(vals)]
            outs = body.evaluate(args)
            del args
            combiner.add(start - lo, outs)
            del outs
        return combiner.results()

    def all_kernels(self) -> list[Any]:
        """The compiled kernels of this graph and of every body below it, in order."""
        out = list(self.kernels.values())
        for child in self.children.values():
            out += child.all_kernels()
        return out

    def compile_bodies(self) -> None:
        """Make the child interpreters of every region now (so kernels inside split loops and
        control-flow bodies are compiled and listed before the first run)."""
        for n in self.graph.nodes:
            if n.op == "kernel" and n.id in self.kernels:
                continue
            for (key, index), _ in bodies(n):
                self.child(n, key, index or 0).compile_bodies()


_REGIONS: dict[str, Callable[[Interpreter, Node, Sequence[Any]], Any]] = {
    "kernel": lambda self, n, v: self.run_kernel(n, v),
    "call": lambda self, n, v: self.run_kernel(n, v),
    "while": lambda self, n, v: self.run_while(n, v),
    "conditional": lambda self, n, v: self.run_conditional(n, v),
    "loop": lambda self, n, v: self.run_loop(n, v),
    "scan": lambda self, n, v: self.run_scan(n, v),
    "shard_map": lambda self, n, v: self.run_shard_map(n, v),
}
