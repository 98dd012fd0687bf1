"""Generated CUDA kernels: a fused kernel's plan (codegen/kernel_plan.py) -> CuPy kernel
definitions, in the CUDA dialect (cuda_dialect.py).

A kernel without a reduction becomes a `cupy.ElementwiseKernel`: one thread per output
element computes the whole chain in registers. A kernel with a reduction becomes a
`cupy.ReductionKernel` whose map expression calls a generated `__device__` function holding
the prologue; an epilogue that reads only the reduced value (and constants), like mean's
division, becomes its post-map expression, and any other epilogue a second, small
ElementwiseKernel over the reduced result. Each way a kernel reads an input (an `Access`)
is its own argument, passed as a broadcast view, so CuPy's indexing does the broadcasting.

This module only writes text (no CuPy needed): tests check the text, backend.py compiles it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ir.graph import Node
from ..codegen.dialect import COMBINE, Block
from ..codegen.kernel_emitter import emit_chain
from ..codegen.kernel_plan import (
    Access,
    KernelPlan,
    broadcast_access,
    combine_of,
    param_access,
    read_access,
    readable,
)
from .cuda_dialect import CUDA, PREAMBLE, c_type, cupy_type


@dataclass
class GpuKernelCode:
    """One CuPy kernel definition; `accesses` are its input arguments in order."""

    kind: str  # "elementwise" | "reduction"
    name: str
    in_params: str
    out_params: str
    operation: str = ""  # elementwise: the per-element statements
    map_expr: str = ""  # reduction
    reduce_expr: str = ""
    post_map_expr: str = ""
    identity: str = ""
    reduce_type: str = ""
    axes: tuple[int, ...] = ()
    preamble: str = PREAMBLE
    accesses: list[Access] = field(default_factory=list)
    shape: tuple[int, ...] = ()  # the shape its arguments are broadcast to
    then: GpuKernelCode | None = None  # a separate epilogue kernel, reading this one's result

    @property
    def source(self) -> str:
        if self.kind == "elementwise":
            text = (f"cupy.ElementwiseKernel(\n  in_params={self.in_params!r},\n  out_params="
                    f"{self.out_params!r},\n  name={self.name!r},\n  operation='''\n"
                    f"{self.operation}''')")
        else:
            text = (f"cupy.ReductionKernel(\n  in_params={self.in_params!r},\n  out_params="
                    f"{self.out_params!r},\n  map_expr={self.map_expr!r},\n  reduce_expr="
                    f"{self.reduce_expr!r},\n  post_map_expr={self.post_map_expr!r},\n  identity="
                    f"{self.identity!r},\n  reduce_type={self.reduce_type!r},\n  name="
                    f"{self.name!r})  # called with axis={self.axes}")
        text = "// preamble\n" + self.preamble + "\n" + text
        return text + ("\n\n// then\n" + self.then.source if self.then else "")


class _Values:
    """Names the C expression of each body value at a point of one phase's shape."""

    def __init__(self, plan: KernelPlan, shape: tuple[int, ...]) -> None:
        self.plan, self.shape = plan, shape
        self.accesses: list[Access] = []
        self.lines: list[str] = []

    def arg(self, a: Access) -> str:
        if a not in self.accesses:
            self.accesses.append(a)
        return f"a{self.accesses.index(a)}"

    def of(self, i: int) -> str:
        n = self.plan.body[i]
        if n.op == "parameter":
            return self.arg(param_access(self.plan, n, self.shape))
        if n.op == "broadcast_in_dim" and self.plan.body[n.inputs[0]].op == "parameter":
            return self.arg(broadcast_access(self.plan, n))
        if readable(self.plan.body, n):  # a slice or pad of an input: its view (backend.view)
            return self.arg(read_access(self.plan, n, self.shape))
        if n.op == "broadcast_in_dim":
            return self.of(n.inputs[0])
        return f"v{i}"

    def emit(self, nodes: tuple[Node, ...]) -> None:
        emit_chain(CUDA, Block(CUDA, 0, self.lines), self.plan.body, nodes, self.of)

    def params(self) -> str:
        body = self.plan.body
        return ", ".join(f"{cupy_type(body[body.params[a.param]].dtype)} a{k}"
                         for k, a in enumerate(self.accesses))


def map_function(plan: KernelPlan, name: str) -> tuple[str, _Values]:
    """The prologue of a reduction as `__device__ RT name_map(a0, a1, ...)`, one argument per
    way an input is read (its `accesses`): the value the reduction folds at one point."""
    red = plan.reduce
    assert red is not None
    pro = _Values(plan, plan.loop_shape)
    pro.emit(plan.prologue)
    value = pro.of(red.inputs[0])  # (first: it may be an input, read as an argument)
    signature = ", ".join(f"{c_type(plan.body[plan.body.params[a.param]].dtype)} a{k}"
                          for k, a in enumerate(pro.accesses))
    func = (f"__device__ {c_type(red.dtype)} {name}_map({signature}) {{\n  "
            + "\n  ".join(pro.lines) + f"\n  return {value};\n}}\n")
    return func, pro


def _epilogue(plan: KernelPlan, vals: _Values) -> None:
    """The epilogue's lines after the reduced value `v<id> = r`: first the prologue's 0-d
    values it reads (a constant both phases use is computed once in the prologue, which is
    another function on the device), then the epilogue itself."""
    red = plan.reduce
    assert red is not None
    prologue = {n.id: n for n in plan.prologue}
    need: set[int] = set()
    stack = [i for n in plan.epilogue for i in n.inputs]
    while stack:
        i = stack.pop()
        if i in prologue and i not in need:
            need.add(i)
            stack.extend(prologue[i].inputs)
    vals.emit(tuple(n for n in plan.prologue if n.id in need))
    vals.lines.append(f"const {c_type(red.dtype)} v{red.id} = r;")
    vals.emit(plan.epilogue)


def post_function(plan: KernelPlan, name: str) -> str | None:
    """The epilogue as `__device__ OT name_post(RT r)` when it reads only the reduced value
    and constants (mean's division); None when it reads an input (then `then_kernel`)."""
    red = plan.reduce
    assert red is not None
    rt, epi = c_type(red.dtype), _Values(plan, plan.out_shape)
    _epilogue(plan, epi)
    if epi.accesses:
        return None
    return (f"__device__ {c_type(plan.output.dtype)} {name}_post({rt} r) {{\n  "
            + "\n  ".join(epi.lines) + f"\n  return {epi.of(plan.output.id)};\n}}\n")


def then_kernel(plan: KernelPlan, name: str) -> GpuKernelCode:
    """An epilogue that reads inputs: a second elementwise kernel over the reduced result
    (its first argument `r`) and those inputs."""
    red = plan.reduce
    assert red is not None
    then = _Values(plan, plan.out_shape)
    _epilogue(plan, then)
    then.lines.append(f"out0 = {then.of(plan.output.id)};")
    return GpuKernelCode("elementwise", f"{name}_epilogue",
                         f"{cupy_type(red.dtype)} r" + (", " + then.params() if then.params() else ""),
                         f"{cupy_type(plan.output.dtype)} out0",
                         operation="\n".join(then.lines) + "\n", accesses=then.accesses,
                         shape=plan.out_shape)


def generate(plan: KernelPlan, name: str) -> GpuKernelCode:
    out_t = plan.output.dtype
    if plan.reduce is None:
        vals = _Values(plan, plan.out_shape)
        vals.emit(plan.prologue + plan.epilogue)
        vals.lines.append(f"out0 = {vals.of(plan.output.id)};")
        return GpuKernelCode("elementwise", name, vals.params(), f"{cupy_type(out_t)} out0",
                             operation="\n".join(vals.lines) + "\n", accesses=vals.accesses,
                             shape=plan.out_shape)
    red = plan.reduce
    kind = combine_of(red)
    func, pro = map_function(plan, name)
    args = [f"a{k}" for k in range(len(pro.accesses))]
    rt = c_type(red.dtype)
    code = GpuKernelCode("reduction", name, pro.params(), f"{cupy_type(out_t)} out0",
                         map_expr=f"{name}_map({', '.join(args)})",
                         reduce_expr=COMBINE[kind].format("a", "b"),
                         identity=CUDA.identity(kind, red.dtype), reduce_type=rt,
                         axes=plan.reduced_axes, preamble=PREAMBLE + func,
                         accesses=pro.accesses, shape=plan.loop_shape)
    post = post_function(plan, name)
    if post is not None:
        code.preamble += post
        code.post_map_expr = f"out0 = {name}_post(a)"
        return code
    code.out_params = f"{cupy_type(red.dtype)} out0"
    code.post_map_expr = "out0 = a"
    code.then = then_kernel(plan, name)
    return code
