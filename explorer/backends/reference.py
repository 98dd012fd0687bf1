"""The reference interpreter: one loop over the graph with the op table's NumPy references.

It is the correctness oracle for every pass. Each value is dropped right after its last use,
so the measured peak of temporaries follows the program's schedule.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable, Sequence

import numpy as np

from ..ir import dtypes
from ..ir.graph import Graph, Node, TensorType, TupleType
from ..ir.ops import OPS
from .loop_combine import Combiner, chunk_of


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
    for n in g.nodes:  # never read: dropped at once (as the memory planner assumes)
        if n.id not in last and n.id not in keep and n.op != "parameter":
            frees.setdefault(n.id, []).append(n.id)
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


# ---- region ops of imported HLO (issue 8): call, while, conditional


def _eval_while(n: Node, vals: Sequence[object]) -> object:
    state = list(vals)
    while bool(evaluate(n.attrs["cond"], state)[0]):  # type: ignore[arg-type]
        state = evaluate(n.attrs["body"], state)  # type: ignore[arg-type]
    return state[0] if len(state) == 1 else tuple(state)


def _eval_conditional(n: Node, vals: Sequence[object]) -> object:
    branches = n.attrs["branches"]
    selector = int(np.asarray(vals[0]))
    pick = selector if 0 <= selector < len(branches) else len(branches) - 1
    start = sum(len(b.params) for b in branches[:pick])
    body = branches[pick]
    outs = evaluate(body, vals[1 + start:1 + start + len(body.params)])  # type: ignore[arg-type]
    return outs[0] if len(outs) == 1 else tuple(outs)


REGIONS.update({"call": _eval_kernel, "while": _eval_while, "conditional": _eval_conditional})


def evaluate(g: Graph, args: Sequence[np.ndarray],
             after_step: Callable[[Node, object], None] | None = None) -> list[np.ndarray]:
    """Run `g` on `args` (already checked) and return its outputs. `after_step(node, value)`
    is called after each node is computed (the measuring hook)."""
    env: dict[int, object] = {}
    frees = last_uses(g)
    params = {p: k for k, p in enumerate(g.params)}
    with np.errstate(all="ignore"):
        for n in g.nodes:
            if n.op == "parameter":
                value = args[params[n.id]]
            else:
                value = eval_node(n, [env[i] for i in n.inputs])
            env[n.id] = value
            for dead in frees.get(n.id, ()):
                del env[dead]
            if after_step is not None:
                after_step(n, value)
            del value
    return [env[o] for o in g.outputs]  # type: ignore[misc]


def run(g: Graph, args: Sequence[np.ndarray]) -> tuple[list[np.ndarray], float, int]:
    """(outputs, seconds, peak bytes of temporaries measured with tracemalloc)."""
    args = check_args(g, args)
    return measured(g, args, lambda hook: evaluate(g, args, hook))


def measured(g: Graph, args: Sequence[np.ndarray],
             execute: Callable[[Callable[[Node, object], None]], list[np.ndarray]],
             ) -> tuple[list[np.ndarray], float, int]:
    """Run `execute(after_step)` (an interpreter loop over `g` that calls the hook after each
    node) and measure it: (outputs, seconds, peak bytes of temporaries). The peak is taken
    step by step: after each node, the step's traced peak less the output buffers that exist
    by then (the program's results are not temporaries). Every backend that runs on NumPy
    measures itself through this."""
    outputs = set(g.outputs)
    seen: set[int] = set()
    state = {"outputs": 0, "peak": 0}

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
        _, peak = tracemalloc.get_traced_memory()
        state["peak"] = max(state["peak"], peak - base - state["outputs"])
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


# ---- the `loop` region op (issue 4): chunk by chunk, one iteration's temporaries at a time


def _eval_loop(n: Node, vals: Sequence[object]) -> object:
    a = n.attrs
    size, chunk = a["size"], a["chunk"]
    split = dict(a["split_inputs"])
    types = n.type.elements if isinstance(n.type, TupleType) else (n.type,)
    combiner = Combiner(a["combine"], types)
    for start in range(0, size, chunk):
        stop = min(start + chunk, size)
        body = a["body"] if stop - start == chunk else a["tail"]
        args = [chunk_of(v, split[k], start, stop) if k in split else v  # type: ignore[arg-type]
                for k, v in enumerate(vals)]
        outs = evaluate(body, args)  # type: ignore[arg-type]
        del args
        combiner.add(start, outs)
        del outs
    results = combiner.results()
    return results[0] if len(results) == 1 else tuple(results)


REGIONS["loop"] = _eval_loop
