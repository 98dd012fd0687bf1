"""The JAX backend: any stage's graph lowered to `jax.lax` and jitted, so that "our passes +
XLA" can be timed against "XLA alone" (jax.jit of the user's function).

Each op lowers through its op-table row's `jax` field. Regions: a `kernel` or `call` body is
inlined (XLA re-fuses it as it likes); `while` becomes `lax.while_loop` and `conditional`
`lax.switch`. A split `loop` becomes a Python loop over its chunks, unrolled while tracing,
with each chunk's results combined as backends/loop_combine.py combines them. Being
unrolled, XLA sees every chunk and may schedule them together, so the loop's memory bound
is a hint to XLA here, not a guarantee; the CPU and GPU backends keep it. Without
`jax_enable_x64`, JAX computes 64-bit types in 32 bits; the numeric check then flags them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..ir import dtypes
from ..ir.graph import Graph, Node, TupleType
from ..ir.ops import OPS, OpError
from .result import Kernel


def lower(g: Graph) -> Callable[..., list[Any]]:
    """A function of the graph's parameters returning its outputs, written in jax.lax."""

    def fn(*args: Any) -> list[Any]:
        env: dict[int, Any] = {}
        params = {p: k for k, p in enumerate(g.params)}
        for n in g.nodes:
            vals = [env[i] for i in n.inputs]
            if n.op == "parameter":
                env[n.id] = args[params[n.id]]
            elif n.op in REGIONS:
                env[n.id] = REGIONS[n.op](n, vals)
            else:
                row = OPS[n.op]
                if row.jax is None:
                    raise OpError(f"{n.describe()}: {n.op} has no JAX lowering")
                env[n.id] = row.jax(*vals, **n.attrs)
        return [env[o] for o in g.outputs]

    return fn


def _one_or_tuple(outs: Sequence[Any]) -> Any:
    return outs[0] if len(outs) == 1 else tuple(outs)


def _inline(n: Node, vals: Sequence[Any]) -> Any:
    return _one_or_tuple(lower(n.attrs["body"])(*vals))


def _while(n: Node, vals: Sequence[Any]) -> Any:
    cond, body = lower(n.attrs["cond"]), lower(n.attrs["body"])
    state = jax.lax.while_loop(lambda s: cond(*s)[0], lambda s: tuple(body(*s)), tuple(vals))
    return _one_or_tuple(state)


def _conditional(n: Node, vals: Sequence[Any]) -> Any:
    branches, operands = n.attrs["branches"], list(vals[1:])
    fns, start = [], 0
    for b in branches:
        k = len(b.params)
        fns.append(lambda ops, b=b, s=start, k=k: tuple(lower(b)(*ops[s:s + k])))
        start += k
    index = jnp.clip(jnp.asarray(vals[0], jnp.int32), 0, len(branches) - 1)
    return _one_or_tuple(jax.lax.switch(index, fns, operands))


_ACCUMULATE = {"add": jnp.add, "mul": jnp.multiply, "max": jnp.maximum, "min": jnp.minimum,
               "and": jnp.logical_and, "or": jnp.logical_or}


def _loop(n: Node, vals: Sequence[Any]) -> Any:
    a = n.attrs
    size, chunk, specs = a["size"], a["chunk"], [tuple(s) for s in a["combine"]]
    split = dict(a["split_inputs"])
    pieces: list[list[Any]] = [[] for _ in specs]
    acc: list[Any] = [None] * len(specs)
    for start in range(0, size, chunk):
        stop = min(start + chunk, size)
        body = a["body"] if stop - start == chunk else a["tail"]
        args = [jax.lax.slice_in_dim(v, start, stop, axis=split[k]) if k in split else v
                for k, v in enumerate(vals)]
        outs = lower(body)(*args)
        for k, spec in enumerate(specs):
            if spec[0] == "index":
                outs[k] = outs[k] + jnp.asarray(start, outs[k].dtype)
        for k, spec in enumerate(specs):
            kind = spec[0]
            if kind == "concat":
                pieces[k].append(outs[k])
            elif kind == "index":
                continue
            elif acc[k] is None:
                acc[k] = outs[k]
                for f, s in enumerate(specs):
                    if s[0] == "index" and s[1] == k:
                        acc[f] = outs[f]
            elif kind == "top_k":
                _merge_top_k(acc, outs, specs, k, spec[1])
            else:
                followers = [f for f, s in enumerate(specs) if s[0] == "index" and s[1] == k]
                if followers:
                    new, old = outs[k], acc[k]
                    win = new > old if kind == "max" else new < old
                    if jnp.issubdtype(new.dtype, jnp.inexact):
                        win = win | (jnp.isnan(new) & ~jnp.isnan(old))
                    for f in followers:
                        acc[f] = jnp.where(win, outs[f], acc[f])
                acc[k] = _ACCUMULATE[kind](acc[k], outs[k])
    results = [jnp.concatenate(pieces[k], axis=s[1]) if s[0] == "concat" else acc[k]
               for k, s in enumerate(specs)]
    return _one_or_tuple(results)


def _merge_top_k(acc: list[Any], outs: list[Any], specs: list[tuple], k: int, axis: int) -> None:
    follower = next((f for f, s in enumerate(specs) if s[0] == "index" and s[1] == k), None)
    both = jnp.moveaxis(jnp.concatenate([acc[k], outs[k]], axis=axis), axis, -1)
    values, order = jax.lax.top_k(both, acc[k].shape[axis])
    acc[k] = jnp.moveaxis(values, -1, axis)
    if follower is not None:
        idx = jnp.moveaxis(jnp.concatenate([acc[follower], outs[follower]], axis=axis), axis, -1)
        acc[follower] = jnp.moveaxis(jnp.take_along_axis(idx, order, -1), -1, axis)


REGIONS: dict[str, Callable[[Node, Sequence[Any]], Any]] = {
    "kernel": _inline, "call": _inline, "while": _while, "conditional": _conditional,
    "loop": _loop}


@dataclass
class JaxExecutable:
    graph: Graph

    def __post_init__(self) -> None:
        self.jitted = jax.jit(lower(self.graph))
        self.compiled: Any = None

    def _compile(self, args: Sequence[Any]) -> Any:
        if self.compiled is None:
            self.compiled = self.jitted.lower(*args).compile()
        return self.compiled

    def __call__(self, args: Sequence[Any]) -> list[Any]:
        outs = self._compile(args)(*args)
        jax.block_until_ready(outs)
        return outs

    def temp_bytes(self, args: Sequence[Any]) -> int | None:
        """XLA's planned temporaries (compiled memory_analysis), where the runtime gives it."""
        try:
            analysis = self._compile(args).memory_analysis()
        except (NotImplementedError, AttributeError, RuntimeError):
            return None
        return None if analysis is None else int(analysis.temp_size_in_bytes)

    def prepare(self, args: Sequence[np.ndarray]) -> list[Any]:
        return [jax.device_put(np.asarray(a, dtypes.to_numpy(p.dtype)))
                for a, p in zip(args, self.graph.param_nodes)]

    def execute(self, prepared: Sequence[Any]) -> list[Any]:
        return self(prepared)

    def run(self, args: Sequence[np.ndarray]) -> tuple[list[np.ndarray], float, int, tuple[Kernel, ...]]:
        device_args = self.prepare(args)
        self(device_args)  # compile and warm up
        t0 = time.perf_counter()
        outs = self(device_args)
        seconds = time.perf_counter() - t0
        peak = device_peak_bytes() if _on_gpu() else self.temp_bytes(device_args)
        text = self.compiled.as_text() if hasattr(self.compiled, "as_text") else ""
        result = [np.asarray(o) for o in outs]
        return result, seconds, int(peak or 0), (Kernel("xla-module", text, seconds),)


def _on_gpu() -> bool:
    return jax.default_backend() == "gpu"


def device_peak_bytes() -> int | None:
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def compile(graph: Graph) -> JaxExecutable:  # noqa: A001 - the backend's verb
    if any(isinstance(n.type, TupleType) and n.op == "parameter" for n in graph.nodes):
        raise OpError("tuple-typed parameters cannot be lowered")
    return JaxExecutable(graph)
