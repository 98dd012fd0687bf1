"""The GPU backend (CuPy; `pip install 'gambit-explorer[gpu]'`).

Fused kernels become generated CUDA (codegen.py: ElementwiseKernel / ReductionKernel; reduce.py:
grid reductions where one block cannot hold a result's reduction, and row kernels for
softmax-like bodies, as RawModules);
`dot_general` calls cuBLAS through `cupy.matmul`; split loops run on the device, chunk by
chunk, combined on the device by backends/combine.py; other ops run their op-table NumPy
reference on CuPy arrays (NumPy dispatches to CuPy through `__array_function__` and
`__array_ufunc__`), or on the host when CuPy lacks one (scipy.special's functions), which is
correct but copies. Peak memory is read from CuPy's
memory pool after each step (used bytes, less inputs and outputs); a `memory_limit` becomes
the pool's limit (plus the inputs and outputs, which the limit does not count), so a run
that needs more fails with CuPy's OutOfMemoryError instead of exceeding it.

Nothing here imports CuPy at module load: without it, this module imports and the registry's
backend says why it is absent (`unavailable_reason()`).
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.graph import Graph, Node, TupleType
from ...ir.ops import OPS
from ...options import CompileOptions
from .. import reference
from ..codegen.kernel_plan import Access, PlanError, RowPlan, plan_any
from ..executable import Executable
from ..interpreter import Interpreter
from ..numpy_temporaries import workspace_bytes
from ..output_fusion import OutputFusion
from ..reference import check_args
from ..registry import Backend, Run, Step, register
from ..result import Kernel
from .codegen import GpuKernelCode, generate
from .cuda_dialect import NVRTC_OPTIONS, RAW_MODULE_OPTIONS
from .graphs import CapturedProgram, cupy_capture, host_syncs
from .mapreduce import body_peak, compile_body
from .program import device_op, generate_program, to_device
from .reduce import THREADS, GpuGridCode, GpuRowCode, generate_grid, generate_rows, is_grid, launch, listing


def _cp() -> Any:
    import cupy

    return cupy


def sync() -> None:
    _cp().cuda.get_current_stream().synchronize()


def view(x: Any, a: Access, shape: tuple[int, ...], body: Graph | None = None) -> Any:
    """Input `x` as a broadcast view of `shape` that reads it through access `a` (a slice:
    a strided view; a pad: the padded array, made on the device, its padding value a
    constant of the kernel's `body`; both: the slice of the padded array)."""
    if a.pad is not None:
        assert body is not None and a.fill is not None
        grown = [d + max(d - 1, 0) * i + max(lo, 0) + max(hi, 0) for d, (lo, hi, i) in zip(x.shape, a.pad)]
        out = _cp().full(grown, body[a.fill].attrs["value"].array.item(), dtype=x.dtype)
        out[tuple(slice(max(lo, 0), max(lo, 0) + (d - 1) * (i + 1) + 1 if d else max(lo, 0), i + 1)
                  for d, (lo, _, i) in zip(x.shape, a.pad))] = x
        out = out[tuple(slice(-min(lo, 0), g + min(hi, 0)) for g, (lo, hi, _) in zip(grown, a.pad))]
        x = out
    if a.window is not None:  # (of the padded input, where there is a pad too)
        x = x[tuple(slice(s, lim, st) for s, lim, st in a.window)]
    target = [1] * len(shape)
    for dim, loop_dim in zip(x.shape, a.index):
        if loop_dim is not None:
            target[loop_dim] = dim
    return _cp().broadcast_to(x.reshape(target), shape)




def _build(code: GpuKernelCode | GpuGridCode | GpuRowCode) -> Any:
    cp = _cp()
    if isinstance(code, GpuGridCode | GpuRowCode):
        module = cp.RawModule(code=code.source, options=RAW_MODULE_OPTIONS)
        names = [code.name] + ([f"{code.name}_combine"] if getattr(code, "parts", 1) > 1 else [])
        return {n: module.get_function(n) for n in names}
    if code.kind == "elementwise":
        return cp.ElementwiseKernel(code.in_params, code.out_params, code.operation, code.name,
                                    preamble=code.preamble, options=NVRTC_OPTIONS)
    return cp.ReductionKernel(code.in_params, code.out_params, code.map_expr, code.reduce_expr,
                              code.post_map_expr, code.identity, code.name,
                              reduce_type=code.reduce_type, preamble=code.preamble,
                              options=NVRTC_OPTIONS)


@dataclass
class GpuKernel:
    name: str
    body: Graph
    code: GpuKernelCode | GpuGridCode | GpuRowCode | None = None
    compiled: list[Any] = field(default_factory=list)
    reason: str = ""
    seconds: float = 0.0
    out_dtype: Any = None
    timed: bool = False  # (set for a measured run: each call waits for the device, timed)
    in_place: frozenset[int] = frozenset()  # (a result is never written over an input)

    @property
    def source(self) -> str:
        if isinstance(self.code, GpuGridCode | GpuRowCode):
            return listing(self.code)
        if self.code is not None:
            return self.code.source
        return f"// runs on the host reference interpreter: {self.reason}\n{self.body}\n"

    def __call__(self, vals: Sequence[Any]) -> Any:
        t0 = time.perf_counter()
        if self.code is None:
            cp = _cp()
            out = to_device(cp, reference.evaluate(self.body, [cp.asnumpy(v) for v in vals])[0])
        else:
            out = self._launch(vals)
        if self.timed:
            sync()
            self.seconds += time.perf_counter() - t0
        return out

    def _launch(self, vals: Sequence[Any]) -> Any:
        cp, code = _cp(), self.code
        assert code is not None
        if not self.compiled:
            then = getattr(code, "then", None)
            self.compiled = [_build(code)] + ([_build(then)] if then else [])
        if isinstance(code, GpuGridCode | GpuRowCode):
            module = self.compiled[0]

            def call(name: str, grid: tuple[int, ...], args: list[Any]) -> None:
                module[name](grid, (THREADS,), tuple(args))

            out = launch(code, [cp.ascontiguousarray(v) for v in vals], cp, call)
            if isinstance(code, GpuRowCode) or code.then is None:
                return out
            return self._then(code.then, vals, out)
        args = [view(vals[a.param], a, code.shape, self.body) for a in code.accesses]
        if code.kind == "elementwise":
            out = cp.empty(code.shape, self.out_dtype)
            self.compiled[0](*args, out)
            return out
        reduced = self.compiled[0](*args, axis=code.axes)
        if code.then is None:
            return reduced
        return self._then(code.then, vals, reduced)

    def _then(self, then: GpuKernelCode, vals: Sequence[Any], reduced: Any) -> Any:
        """An epilogue that reads inputs: the second, elementwise kernel."""
        more = [view(vals[a.param], a, then.shape, self.body) for a in then.accesses]
        out = _cp().empty(then.shape, self.out_dtype)
        self.compiled[1](reduced, *more, out)
        return out


class CublasOutputFusion(OutputFusion):
    """An output fusion (output_fusion.py) on the GPU: the dot through cuBLAS, then the
    epilogue as a generated elementwise kernel over its result."""

    comment = "//"
    library = "cuBLAS"  # type: ignore[assignment]

    def __init__(self, node: Node, name: str) -> None:
        super().__init__(node, name, compile_kernel)

    def product(self, a: Any, b: Any) -> Any:
        dot = self.plan.dot
        return _typed(dot, _dot(a, b, **dot.attrs))


def compile_kernel(node: Node, name: str) -> GpuKernel | OutputFusion:
    if (fused := CublasOutputFusion.of(node, name)) is not None:
        return fused
    body = node.attrs["body"]
    k = GpuKernel(name, body, out_dtype=dtypes.to_numpy(node.type.dtype))  # type: ignore[union-attr]
    try:
        k.code = kernel_code(body, body.name.replace("-", "_"))
    except PlanError as e:
        k.reason = str(e)
    return k


def kernel_code(body: Graph, name: str) -> GpuKernelCode | GpuGridCode | GpuRowCode:
    """A fused kernel's CUDA: CuPy's elementwise or reduction kernel where a block holds each
    result's reduction, a grid reduction where it does not, a row kernel for several
    reductions per row (reduce.py); PlanError when the body has none of these forms."""
    plan = plan_any(body)
    if isinstance(plan, RowPlan):
        return generate_rows(plan, name)
    if is_grid(plan):
        return generate_grid(plan, name)
    return generate(plan, name)


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


class GpuInterpreter(Interpreter):
    """The interpreter on CuPy arrays: generated CUDA kernels, cuBLAS dots, ops through their
    NumPy reference on CuPy arrays (or on the host where CuPy lacks one), and split loops
    combined on the device."""

    peak_how = "CuPy pool"

    def __init__(self, graph: Graph, prefix: str = "", memory_limit: int | None = None) -> None:
        super().__init__(graph, prefix)
        self.memory_limit = memory_limit
        self.compile_bodies()

    @property
    def xp(self) -> Any:  # type: ignore[override]
        return _cp()

    def make_child(self, body: Graph, prefix: str) -> Any:
        """A split body of the map-reduce form runs as one generated CUDA kernel
        (mapreduce.py); any other body on a child interpreter."""
        if body.name.startswith("split_"):
            fused = compile_body(body, prefix.rstrip("/").replace("/", "_") or body.name,
                                 GpuInterpreter)
            if fused is not None:
                return fused
        return GpuInterpreter(body, prefix)

    def compile_kernel(self, n: Node, name: str) -> GpuKernel:
        return compile_kernel(n, name)

    def sync(self) -> None:
        sync()

    def run_dot(self, n: Node, vals: Sequence[Any]) -> Any:
        return _typed(n, _dot(*vals, **n.attrs))

    def run_op(self, n: Node, vals: Sequence[Any]) -> Any:
        return _typed(n, device_op(OPS[n.op].ref, _cp())(*vals, **n.attrs))

    # ---- the executable's side: measured from CuPy's memory pool

    def prepare(self, args: Sequence[np.ndarray]) -> list[Any]:
        cp = _cp()
        return [to_device(cp, a) for a in check_args(self.graph, args)]

    def execute(self, prepared: Sequence[Any]) -> list[Any]:
        outs = self.evaluate(prepared)
        sync()
        return outs

    def run(self, args: Sequence[np.ndarray]) -> Run:
        device_args = self.prepare(args)
        self.execute(device_args)  # compile the kernels and warm up
        return measure(self.graph, device_args, lambda hook: self.evaluate(device_args, hook),
                       self.all_kernels(), self.memory_limit)


class GpuProgram(Executable):
    """A stage's executable on the GPU backend (executable.py): its generated program
    (program.py), whose lines launch the kernels and cuBLAS in order on device arrays; or
    (when the writer cannot write it) the GpuInterpreter, with the reason in `notes`."""

    peak_how = GpuInterpreter.peak_how
    interpreter_name = "the GPU interpreter"

    def __init__(self, graph: Graph, memory_limit: int | None = None) -> None:
        self.memory_limit = memory_limit
        super().__init__(graph,
                         lambda g: generate_program(g, _cp(), compile_kernel, GpuInterpreter),
                         lambda g: GpuInterpreter(g, memory_limit=memory_limit))
        self.captured: CapturedProgram | None = None
        if self.program is not None:
            reasons = host_syncs(graph, self.program.kernels)
            if os.environ.get("GAMBIT_GPU_GRAPHS", "1") == "0":
                reasons.append("GAMBIT_GPU_GRAPHS=0")
            self.captured = cupy_capture(self.program.fn, reasons, self._pool_limit())

    def _pool_limit(self) -> int | None:
        """A captured graph's pool under a `memory_limit`: the limit, plus its input buffers
        and two sets of outputs (the first call's and the graph's), which it does not count."""
        if self.memory_limit is None:
            return None
        g = self.graph
        ins = sum(g[p].type.nbytes for p in g.params)
        outs = sum(g[o].type.nbytes for o in g.outputs)
        return self.memory_limit + ins + 2 * outs

    @property
    def source(self) -> str:
        """The generated program, then whether it runs as a captured CUDA graph (graphs.py)."""
        text = super().source
        return text + self.captured.listing(self.graph) if self.captured is not None else text

    def prepare(self, args: Sequence[np.ndarray]) -> list[Any]:
        cp = _cp()
        return [to_device(cp, a) for a in check_args(self.graph, args)]

    def run_program(self, prepared: Sequence[Any]) -> list[Any]:
        """The program as its CUDA graph, captured on the first call (graphs.py), or line
        by line where it cannot be captured. Arguments on the host or the device."""
        assert self.program is not None and self.captured is not None
        if self.captured.capturable:
            outs = self.captured(*prepared)
        else:
            outs = self.program.fn(*[to_device(_cp(), a) for a in prepared])
        sync()
        return outs

    def call(self, flat: Sequence[Any]) -> list[Any]:
        """gx.compile's call: the user's arrays checked, then the program; host arrays go
        to the device once, straight into the captured graph's input buffers."""
        if self.program is None:
            return self.execute(self.prepare(flat))
        return self.run_program(check_args(self.graph, flat))

    def sync(self) -> None:
        sync()

    def warm_up(self, prepared: Sequence[Any]) -> None:
        self.execute(prepared)  # compile the kernels and warm up (before every measured run)

    def measure(self, prepared: Sequence[Any]) -> Run:
        return measure(self.graph, prepared, lambda hook: self.stepped(prepared, hook),
                       self.all_kernels(), self.memory_limit, self.source)


def measure(graph: Graph, device_args: Sequence[Any], run: Any, kernels: Sequence[Any],
            memory_limit: int | None, program: str | None = None) -> Run:
    """One measured run, `run(after_step)`: its time (kernels timed apart, each waiting for
    the device), and its peak from CuPy's memory pool after each step (used bytes, less the
    inputs and the outputs); a `memory_limit` is the pool's limit meanwhile (plus the inputs
    and outputs, which the limit does not count)."""
    cp = _cp()
    pool = cp.get_default_memory_pool()
    for k in kernels:
        k.seconds = 0.0
    in_bytes = sum(int(a.nbytes) for a in device_args)
    out_bytes = sum(t.nbytes for t in (graph[o].type for o in graph.outputs))
    old_limit = pool.get_limit()
    if memory_limit is not None:
        pool.set_limit(size=memory_limit + in_bytes + out_bytes)
    base = pool.used_bytes()
    outputs, state = set(graph.outputs), {"out": 0, "peak": 0}
    steps: list[Step] = []

    def after_step(n: Node, value: Any) -> None:
        if n.id in outputs:
            state["out"] += sum(int(v.nbytes) for v in (value if isinstance(value, tuple) else (value,)))
        live = pool.used_bytes() - base - state["out"]
        state["peak"] = max(state["peak"], live)
        steps.append(Step(n.id, max(0, live), max(0, live)))  # (the pool's in-step peak is not visible)

    try:
        sync()
        for k in kernels:
            k.timed = True
        t0 = time.perf_counter()
        outs = run(after_step)
        sync()
        seconds = time.perf_counter() - t0
    finally:
        for k in kernels:
            k.timed = False
        pool.set_limit(size=old_limit)
    listed = tuple(Kernel(k.name, k.source, k.seconds) for k in kernels)
    return Run([cp.asnumpy(o) for o in outs], seconds, max(0, state["peak"]), listed,
               GpuInterpreter.peak_how, program=program, steps=tuple(steps))


def _typed(n: Node, out: Any) -> Any:
    cp = _cp()
    if isinstance(n.type, TupleType):
        return tuple(to_device(cp, o, dtypes.to_numpy(t.dtype)) for o, t in zip(out, n.type.elements))
    return to_device(cp, out, dtypes.to_numpy(n.type.dtype))


def unavailable_reason() -> str | None:
    """Why the GPU backend cannot run here (None when it can)."""
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed (pip install 'gambit-explorer[gpu]')"
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CuPy finds no CUDA device"
    except Exception as e:  # CUDA driver or runtime missing
        return f"CuPy cannot reach a GPU: {str(e).splitlines()[0]}"
    return None


class GpuBackend(Backend):
    name = "gpu"
    peak_how = GpuInterpreter.peak_how
    # CuPy's array functions allocate as NumPy's do (results and the same transients).
    temporaries = staticmethod(workspace_bytes)
    loop_body = staticmethod(body_peak)  # a map-reduce body is one kernel (gpu/mapreduce.py)

    def unavailable_reason(self) -> str | None:
        return unavailable_reason()

    def compile(self, graph: Graph, options: CompileOptions) -> GpuProgram:
        _cp()  # fail here, with CuPy's own message, when it is missing
        return GpuProgram(graph, memory_limit=options.memory_limit)


register(GpuBackend())
