"""The reference interpreter: one loop over the graph with the op table's NumPy references.

It is the correctness oracle for every pass. Each value is dropped right after its last use,
so the measured peak of temporaries follows the program's schedule.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Sequence

import numpy as np

from ..ir import dtypes
from ..ir.graph import Graph, Node, TensorType
from ..ir.ops import OPS


class ArgumentError(ValueError):
    """Arguments that do not match the graph's parameters."""


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
    return frees


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


def eval_node(n: Node, vals: Sequence[object]) -> object:
    region = REGIONS.get(n.op)
    out = region(n, vals) if region else OPS[n.op].ref(*vals, **n.attrs)
    if isinstance(n.type, TensorType):
        want = dtypes.to_numpy(n.type.dtype)
        if not isinstance(out, np.ndarray) or out.dtype != want:
            out = np.asarray(out, dtype=want)
        return out
    return tuple(np.asarray(o, dtype=dtypes.to_numpy(t.dtype))
                 for o, t in zip(out, n.type.elements))  # type: ignore[union-attr]


def _eval_kernel(n: Node, vals: Sequence[object]) -> object:
    outs = evaluate(n.attrs["body"], vals)  # type: ignore[arg-type]
    return outs[0] if len(outs) == 1 else tuple(outs)


# Region ops (those with a `body` graph) -> how the interpreter evaluates them.
REGIONS = {"kernel": _eval_kernel}


def evaluate(g: Graph, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run `g` on `args` (already checked) and return its outputs."""
    env: dict[int, object] = {}
    frees = last_uses(g)
    params = {p: k for k, p in enumerate(g.params)}
    with np.errstate(all="ignore"):
        for n in g.nodes:
            if n.op == "parameter":
                env[n.id] = args[params[n.id]]
            else:
                env[n.id] = eval_node(n, [env[i] for i in n.inputs])
            for dead in frees.get(n.id, ()):
                del env[dead]
    return [env[o] for o in g.outputs]  # type: ignore[misc]


def run(g: Graph, args: Sequence[np.ndarray]) -> tuple[list[np.ndarray], float, int]:
    """(outputs, seconds, peak bytes of temporaries measured with tracemalloc)."""
    args = check_args(g, args)
    started_here = not tracemalloc.is_tracing()
    if started_here:
        tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        t0 = time.perf_counter()
        outs = evaluate(g, args)
        seconds = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if started_here:
            tracemalloc.stop()
    return outs, seconds, max(0, peak - base - _owned_output_bytes(outs, args))


def _owned_output_bytes(outs: Sequence[object], args: Sequence[np.ndarray]) -> int:
    """Bytes of output buffers that the run allocated (not views of the inputs), each once."""
    seen: set[int] = set()
    total = 0
    for o in outs:
        for arr in (o if isinstance(o, tuple) else (o,)):
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
