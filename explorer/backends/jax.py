"""The JAX backend: any stage's graph lowered to `jax.lax` and jitted, so that "our passes +
XLA" can be timed against "XLA alone" (jax.jit of the user's function).

It is the interpreter core run on traced JAX values, under `jax.jit`: each op lowers through
its op-table row's `jax` field. Regions: a `kernel` or `call` body is inlined (XLA re-fuses it
as it likes); `while` becomes `lax.while_loop`, `conditional` `lax.switch` and `scan`
`lax.scan` (never unrolled: XLA sees the loop), `shard_map` `jax.shard_map` on a mesh of the
devices JAX has (a sharded parameter is put on the devices as its sharding says, a
`sharding_constraint` is `with_sharding_constraint`; too few devices say how many are
needed, ir/ops/sharding.py). A split `loop`
is the core's chunk loop, unrolled while tracing, with each chunk's results combined by
backends/combine.py on jax.numpy. Being
unrolled, XLA sees every chunk and may schedule them together, so the loop's memory bound
is a hint to XLA here, not a guarantee; the CPU and GPU backends keep it. A graph holding
64-bit types (a float32 distance computed in float64, say, or a program traced under x64) is
compiled and called under `jax.enable_x64(True)`, whatever the process's setting, so that JAX
computes the types the graph says; its other types are explicit, so nothing else changes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..analysis.device_bytes import devices
from ..ir import dtypes
from ..ir.graph import Graph, Node, TupleType
from ..ir.ops import OPS, OpError
from ..ir.ops.regions import bodies, scan_groups
from ..ir.ops.sharding import jax_mesh, jax_sharding, jax_spec
from ..ir.sharding import Sharding
from ..options import CompileOptions
from .control_flow import one_or_tuple
from .interpreter import Interpreter
from .reference import check_args
from .registry import Backend, Run, register
from .result import Kernel


class SignatureMismatch(TypeError):
    """Arguments a tree_call function was not traced for."""


class JaxInterpreter(Interpreter):
    """The interpreter on traced JAX values: each op through its row's `jax` lowering; control
    flow as lax.while_loop / lax.switch; kernels and calls inlined; split loops unrolled."""

    xp = jnp

    def run_op(self, n: Node, vals: Sequence[Any]) -> Any:
        row = OPS[n.op]
        if row.jax is None:
            raise OpError(f"{n.describe()}: {n.op} has no JAX lowering")
        return row.jax(*vals, **n.attrs)

    def run_while(self, n: Node, vals: Sequence[Any]) -> Any:
        cond, body = self.child(n, "cond"), self.child(n, "body")
        state = jax.lax.while_loop(lambda s: cond.evaluate(s)[0],
                                   lambda s: tuple(body.evaluate(s)), tuple(vals))
        return one_or_tuple(state)

    def run_scan(self, n: Node, vals: Sequence[Any]) -> Any:
        a, body = n.attrs, self.child(n)
        consts, carry, xs = scan_groups(vals, a)
        nk = a["num_carry"]

        def step(c: tuple, x: tuple) -> tuple[tuple, tuple]:
            outs = body.evaluate([*consts, *c, *x])
            return tuple(outs[:nk]), tuple(outs[nk:])

        final, ys = jax.lax.scan(step, tuple(carry), tuple(xs), length=a["length"],
                                 reverse=a["reverse"])
        return one_or_tuple([*final, *ys])

    def run_shard_map(self, n: Node, vals: Sequence[Any]) -> Any:
        a, body = n.attrs, self.child(n)
        fn = jax.shard_map(lambda *xs: tuple(body.evaluate(xs)), mesh=jax_mesh(a["mesh"]),
                           in_specs=tuple(jax_spec(s) for s in a["in_specs"]),
                           out_specs=tuple(jax_spec(s) for s in a["out_specs"]), check_vma=False)
        return one_or_tuple(list(fn(*vals)))

    def run_conditional(self, n: Node, vals: Sequence[Any]) -> Any:
        branches, operands = n.attrs["branches"], list(vals[1:])
        fns, start = [], 0
        for k, b in enumerate(branches):
            child, size = self.child(n, "branches", k), len(b.params)
            fns.append(lambda ops, c=child, s=start, m=size: tuple(c.evaluate(ops[s:s + m])))
            start += size
        index = jnp.clip(jnp.asarray(vals[0], jnp.int32), 0, len(branches) - 1)
        return one_or_tuple(jax.lax.switch(index, fns, operands))


def lower(g: Graph) -> Callable[..., list[Any]]:
    """A function of the graph's parameters returning its outputs, written in jax.lax."""
    interpreter = JaxInterpreter(g)
    return lambda *args: interpreter.evaluate(args)


@dataclass
class JaxExecutable:
    graph: Graph

    def __post_init__(self) -> None:
        self.wide = _wide(self.graph) and not jax.config.jax_enable_x64
        self.raw = jax.jit(lower(self.graph))
        self.jitted = self._typed(self.raw)
        self.compiled: Any = None

    def _types(self) -> contextlib.AbstractContextManager:
        """x64 where the graph holds 64-bit types (module doc), else nothing."""
        return jax.enable_x64(True) if self.wide else contextlib.nullcontext()

    def _typed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn`, called under x64 where the graph holds 64-bit types."""
        if not self.wide:
            return fn

        def call(*args: Any) -> Any:
            with jax.enable_x64(True):
                return fn(*args)

        return call

    def _compile(self, args: Sequence[Any]) -> Any:
        if self.compiled is None:
            with self._types():
                self.compiled = self.raw.lower(*args).compile()
        return self.compiled

    def __call__(self, args: Sequence[Any]) -> list[Any]:
        compiled = self._compile(args)
        with self._types():
            outs = compiled(*args)
        jax.block_until_ready(outs)
        return outs

    def temp_bytes(self, args: Sequence[Any]) -> int | None:
        """XLA's planned temporaries (compiled memory_analysis), where the runtime gives it."""
        try:
            analysis = self._compile(args).memory_analysis()
        except (NotImplementedError, AttributeError, RuntimeError):
            return None
        return None if analysis is None else int(analysis.temp_size_in_bytes)

    device_arrays = True  # gx.compile's calls give jax arrays back, as jax.jit's do

    def call(self, flat: Sequence[Any]) -> list[Any]:
        """gx.compile's call on arguments of the traced shapes and types: the jitted
        function itself, so JAX's C++ fast path dispatches it."""
        return self.jitted(*flat)

    def tree_call(self, in_tree: Any, out_tree: Any) -> Callable[..., Any]:
        """gx.compile's call on the user's own pytree of arrays: one jax.jit function that
        flattens the arguments, runs the graph and builds the result tree while tracing, so
        a call is JAX's C++ dispatch alone. Arguments unlike the traced ones raise
        SignatureMismatch when JAX traces them (gx.compile then takes its general path)."""
        params = self.graph.param_nodes
        run = lower(self.graph)

        def fn(*args: Any) -> Any:
            leaves, tree = jax.tree_util.tree_flatten(args)
            if tree != in_tree or len(leaves) != len(params):
                raise SignatureMismatch(f"arguments shaped like {tree}, traced as {in_tree}")
            flat = []
            for x, p in zip(leaves, params):
                if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
                    x = jax.random.key_data(x)
                if x.shape != p.type.shape or x.dtype != dtypes.to_numpy(p.type.dtype):
                    raise SignatureMismatch(f"{x.shape} {x.dtype} for {p.type}")
                flat.append(x)
            return jax.tree_util.tree_unflatten(out_tree, run(*flat))

        return self._typed(jax.jit(fn))

    def prepare(self, args: Sequence[np.ndarray]) -> list[Any]:
        """The arguments on the devices: laid out as their parameters' shardings say (on a
        mesh of the devices JAX has), else on the default device."""
        out = []
        for p, a in zip(self.graph.param_nodes, check_args(self.graph, args)):
            s = p.attrs.get("sharding")
            out.append(jax.device_put(a, jax_sharding(s)) if isinstance(s, Sharding)
                       else jax.device_put(a))
        return out

    def execute(self, prepared: Sequence[Any]) -> list[Any]:
        return self(prepared)

    def run(self, args: Sequence[np.ndarray]) -> Run:
        device_args = self.prepare(args)
        self(device_args)  # compile and warm up
        t0 = time.perf_counter()
        outs = self(device_args)
        seconds = time.perf_counter() - t0
        count = devices(self.graph)
        peak = device_peak_bytes(count or 1) if _on_gpu() else self.temp_bytes(device_args)
        text = self.compiled.as_text() if hasattr(self.compiled, "as_text") else ""
        result = [np.asarray(o) for o in outs]
        return Run(result, seconds, int(peak or 0), (Kernel("xla-module", text, seconds),),
                   peak_how(count), devices=count)


_X64_TYPES = frozenset({"f64", "i64", "u64", "c128"})


def _wide(g: Graph) -> bool:
    """Whether `g` (its bodies included) holds a 64-bit type."""
    for n in g.nodes:
        types = n.type.elements if isinstance(n.type, TupleType) else (n.type,)
        if any(t.dtype in _X64_TYPES for t in types):
            return True
        if any(_wide(b) for _, b in bodies(n)):
            return True
    return False


def _on_gpu() -> bool:
    return jax.default_backend() == "gpu"


def device_peak_bytes(count: int = 1) -> int | None:
    """The largest peak_bytes_in_use of the first `count` devices (a sharded program's mesh
    is made of the first devices, ir/ops/sharding.py)."""
    peaks = [(d.memory_stats() or {}).get("peak_bytes_in_use") for d in jax.devices()[:count]]
    known = [p for p in peaks if p is not None]
    return max(known) if known else None


def peak_how(devices: int | None = None) -> str:
    """How the jax backend measures a peak; `devices`: a sharded program's device count (on
    CPU, XLA's memory_analysis of the partitioned module is one device's; on GPU, the
    largest of the devices' peaks)."""
    how = "device peak" if _on_gpu() else "XLA memory_analysis"
    return how if devices is None else f"{how}, per device"


class JaxBackend(Backend):
    name = "jax"
    temporaries = None  # XLA plans its own buffers: nothing of ours to add

    @property
    def peak_how(self) -> str:  # type: ignore[override]
        return peak_how()

    def compile(self, graph: Graph, options: CompileOptions) -> JaxExecutable:
        if any(isinstance(n.type, TupleType) and n.op == "parameter" for n in graph.nodes):
            raise OpError("tuple-typed parameters cannot be lowered")
        return JaxExecutable(graph)


register(JaxBackend())
