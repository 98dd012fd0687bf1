"""The GPU backend (CuPy; `pip install 'gambit-explorer[gpu]'`).

Fused kernels become generated CUDA (gpu_codegen.py: ElementwiseKernel / ReductionKernel);
`dot_general` calls cuBLAS through `cupy.matmul`; split loops run on the device, chunk by
chunk; other ops run their op-table NumPy reference on CuPy arrays (NumPy dispatches to
CuPy through `__array_function__`/`__array_ufunc__`), or on the host when CuPy lacks one
(scipy.special's functions), which is correct but copies. Peak memory is read from CuPy's
memory pool after each step (used bytes, less inputs and outputs); a `memory_limit` becomes
the pool's limit (plus the inputs and outputs, which the limit does not count), so a run
that needs more fails with CuPy's OutOfMemoryError instead of exceeding it.

Nothing here imports CuPy at module load: without it, this module imports and
`dispatch.gpu_unavailable_reason()` says why the backend is absent.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir import dtypes
from ..ir.graph import Graph, Node, TupleType
from ..ir.ops import OPS
from . import reference
from .gpu_codegen import GpuKernelCode, generate
from .kernel_plan import Access, PlanError, plan_kernel
from .loop_combine import Combiner, chunk_of
from .result import Kernel


def _cp() -> Any:
    import cupy

    return cupy


def sync() -> None:
    _cp().cuda.get_current_stream().synchronize()


def view(x: Any, a: Access, shape: tuple[int, ...]) -> Any:
    """Input `x` as a broadcast view of `shape` that reads it through access `a`."""
    target = [1] * len(shape)
    for dim, loop_dim in zip(x.shape, a.index):
        if loop_dim is not None:
            target[loop_dim] = dim
    return _cp().broadcast_to(x.reshape(target), shape)


def _build(code: GpuKernelCode) -> Any:
    cp = _cp()
    if code.kind == "elementwise":
        return cp.ElementwiseKernel(code.in_params, code.out_params, code.operation, code.name,
                                    preamble=code.preamble)
    return cp.ReductionKernel(code.in_params, code.out_params, code.map_expr, code.reduce_expr,
                              code.post_map_expr, code.identity, code.name,
                              reduce_type=code.reduce_type, preamble=code.preamble)


@dataclass
class GpuKernel:
    name: str
    body: Graph
    code: GpuKernelCode | None = None
    compiled: list[Any] = field(default_factory=list)
    reason: str = ""
    seconds: float = 0.0
    out_dtype: Any = None

    @property
    def source(self) -> str:
        if self.code is not None:
            return self.code.source
        return f"// runs on the host reference interpreter: {self.reason}\n{self.body}\n"

    def __call__(self, vals: Sequence[Any], timed: bool = False) -> Any:
        t0 = time.perf_counter()
        if self.code is None:
            cp = _cp()
            out = cp.asarray(reference.evaluate(self.body, [cp.asnumpy(v) for v in vals])[0])
        else:
            out = self._launch(vals)
        if timed:
            sync()
            self.seconds += time.perf_counter() - t0
        return out

    def _launch(self, vals: Sequence[Any]) -> Any:
        cp, code = _cp(), self.code
        assert code is not None
        if not self.compiled:
            self.compiled = [_build(code)] + ([_build(code.then)] if code.then else [])
        args = [view(vals[a.param], a, code.shape) for a in code.accesses]
        if code.kind == "elementwise":
            out = cp.empty(code.shape, self.out_dtype)
            self.compiled[0](*args, out)
            return out
        reduced = self.compiled[0](*args, axis=code.axes)
        if code.then is None:
            return reduced
        assert code.then is not None
        more = [view(vals[a.param], a, code.then.shape) for a in code.then.accesses]
        out = cp.empty(code.then.shape, self.out_dtype)
        self.compiled[1](reduced, *more, out)
        return out


def compile_kernel(node: Node, name: str) -> GpuKernel:
    body = node.attrs["body"]
    k = GpuKernel(name, body, out_dtype=dtypes.to_numpy(node.type.dtype))  # type: ignore[union-attr]
    try:
        k.code = generate(plan_kernel(body), body.name.replace("-", "_"))
    except PlanError as e:
        k.reason = str(e)
    return k


def _dot(lhs: Any, rhs: Any, dimension_numbers: Any, preferred_element_type: str | None = None) -> Any:
    """dot_general as one batched cupy.matmul (cuBLAS), after moving dims into place."""
    cp = _cp()
    (lc, rc), (lb, rb) = dimension_numbers
    lf = [i for i in range(lhs.ndim) if i not in (*lc, *lb)]
    rf = [i for i in range(rhs.ndim) if i not in (*rc, *rb)]
    batch = [lhs.shape[i] for i in lb]
    m, n = math.prod(lhs.shape[i] for i in lf), math.prod(rhs.shape[i] for i in rf)
    k = math.prod(lhs.shape[i] for i in lc)
    a = cp.transpose(lhs, (*lb, *lf, *lc)).reshape(math.prod(batch), m, k)
    b = cp.transpose(rhs, (*rb, *rc, *rf)).reshape(math.prod(batch), k, n)
    if preferred_element_type:
        a, b = (x.astype(dtypes.to_numpy(preferred_element_type), copy=False) for x in (a, b))
    out = cp.matmul(a, b)
    return out.reshape((*batch, *[lhs.shape[i] for i in lf], *[rhs.shape[i] for i in rf]))


def eval_op(n: Node, vals: Sequence[Any]) -> Any:
    cp = _cp()
    if n.op == "dot_general":
        out = _dot(*vals, **n.attrs)
    else:
        try:
            out = OPS[n.op].ref(*vals, **n.attrs) if n.op not in reference.REGIONS else None
        except (TypeError, ValueError, NotImplementedError):
            out = None
        if out is None or not isinstance(out, cp.ndarray | tuple):
            host = reference.eval_node(n, [cp.asnumpy(v) for v in vals])
            return tuple(cp.asarray(h) for h in host) if isinstance(host, tuple) else cp.asarray(host)
    if isinstance(n.type, TupleType):
        return tuple(cp.asarray(o, dtypes.to_numpy(t.dtype)) for o, t in zip(out, n.type.elements))
    return cp.asarray(out, dtypes.to_numpy(n.type.dtype))


_ON_DEVICE = {"add": "add", "mul": "multiply", "max": "maximum", "min": "minimum",
              "and": "logical_and", "or": "logical_or"}


@dataclass
class GpuExecutable:
    graph: Graph
    memory_limit: int | None = None
    prefix: str = ""

    def __post_init__(self) -> None:
        self.frees = reference.last_uses(self.graph)
        self.kernels: dict[int, GpuKernel] = {}
        self.loops: dict[int, tuple[GpuExecutable, GpuExecutable | None]] = {}
        for n in self.graph.nodes:
            if n.op == "kernel":
                self.kernels[n.id] = compile_kernel(n, f"{self.prefix}{n.attrs['body'].name}")
            elif n.op == "loop":
                inner, tail = f"{self.prefix}loop_{n.id}/", n.attrs.get("tail")
                self.loops[n.id] = (GpuExecutable(n.attrs["body"], prefix=inner),
                                    GpuExecutable(tail, prefix=inner + "tail/") if tail else None)

    def all_kernels(self) -> list[GpuKernel]:
        out = list(self.kernels.values())
        for body, tail in self.loops.values():
            out += body.all_kernels() + (tail.all_kernels() if tail else [])
        return out

    def evaluate(self, args: Sequence[Any], after_step: Any = None, timed: bool = False) -> list[Any]:
        env: dict[int, Any] = {}
        params = {p: k for k, p in enumerate(self.graph.params)}
        for n in self.graph.nodes:
            vals = [env[i] for i in n.inputs]
            if n.op == "parameter":
                value = args[params[n.id]]
            elif n.id in self.kernels:
                value = self.kernels[n.id](vals, timed)
            elif n.id in self.loops:
                value = self._loop(n, vals, timed)
            else:
                value = eval_op(n, vals)
            env[n.id] = value
            del vals
            for dead in self.frees.get(n.id, ()):
                del env[dead]
            if after_step is not None:
                after_step(n, value)
            del value
        return [env[o] for o in self.graph.outputs]

    def _loop(self, n: Node, vals: Sequence[Any], timed: bool) -> Any:
        cp, a = _cp(), n.attrs
        specs = [tuple(s) for s in a["combine"]]
        split, (body, tail) = dict(a["split_inputs"]), self.loops[n.id]
        types = n.type.elements if isinstance(n.type, TupleType) else (n.type,)
        on_device = all(s[0] == "concat" or s[0] in _ON_DEVICE for s in specs)
        host = None if on_device else Combiner(specs, types)  # top_k / index merges: on the host
        acc: list[Any] = [cp.empty(t.shape, dtypes.to_numpy(t.dtype)) if s[0] == "concat" else None
                          for s, t in zip(specs, types)]
        for start in range(0, a["size"], a["chunk"]):
            stop = min(start + a["chunk"], a["size"])
            exe = body if stop - start == a["chunk"] else tail
            assert exe is not None
            outs = exe.evaluate([chunk_of(v, split[k], start, stop) if k in split else v
                                 for k, v in enumerate(vals)], timed=timed)
            if host is not None:
                host.add(start, [cp.asnumpy(o) for o in outs])
                continue
            for k, (s, o) in enumerate(zip(specs, outs)):
                if s[0] == "concat":
                    chunk_of(acc[k], s[1], start, stop)[...] = o
                elif acc[k] is None:
                    acc[k] = o.copy()
                else:
                    getattr(cp, _ON_DEVICE[s[0]])(acc[k], o, out=acc[k])
        results = [cp.asarray(r) for r in host.results()] if host is not None else acc
        return results[0] if len(results) == 1 else tuple(results)

    def prepare(self, args: Sequence[np.ndarray]) -> list[Any]:
        cp = _cp()
        return [cp.asarray(a) for a in reference.check_args(self.graph, args)]

    def execute(self, prepared: Sequence[Any]) -> list[Any]:
        outs = self.evaluate(prepared)
        sync()
        return outs

    def run(self, args: Sequence[np.ndarray]) -> tuple[list[np.ndarray], float, int, tuple[Kernel, ...]]:
        cp = _cp()
        pool = cp.get_default_memory_pool()
        device_args = self.prepare(args)
        self.execute(device_args)  # compile the kernels and warm up
        for k in self.all_kernels():
            k.seconds = 0.0
        in_bytes = sum(int(a.nbytes) for a in device_args)
        out_bytes = sum(t.nbytes for t in (self.graph[o].type for o in self.graph.outputs))
        old_limit = pool.get_limit()
        if self.memory_limit is not None:
            pool.set_limit(size=self.memory_limit + in_bytes + out_bytes)
        base = pool.used_bytes()
        outputs, state = set(self.graph.outputs), {"out": 0, "peak": 0}

        def after_step(n: Node, value: Any) -> None:
            if n.id in outputs:
                state["out"] += sum(int(v.nbytes) for v in (value if isinstance(value, tuple) else (value,)))
            state["peak"] = max(state["peak"], pool.used_bytes() - base - state["out"])

        try:
            sync()
            t0 = time.perf_counter()
            outs = self.evaluate(device_args, after_step, timed=True)
            sync()
            seconds = time.perf_counter() - t0
        finally:
            pool.set_limit(size=old_limit)
        kernels = tuple(Kernel(k.name, k.source, k.seconds) for k in self.all_kernels())
        return [cp.asnumpy(o) for o in outs], seconds, max(0, state["peak"]), kernels


def compile(graph: Graph, memory_limit: int | None = None) -> GpuExecutable:  # noqa: A001
    _cp()  # fail here, with CuPy's own message, when it is missing
    return GpuExecutable(graph, memory_limit)
