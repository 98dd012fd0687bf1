"""Output-fusion kernels on the CPU (a `kernel` of kind "output": passes/fuse.py): a dot and
the elementwise epilogue that alone reads it (a bias, an activation, a scale, a residual add).

The dot runs as the program's other dots do (its op row's program form, through the
program's `matmul`: BLAS), and the epilogue is a generated elementwise kernel over its result
(kernel_plan.plan_output): the dot's result is the epilogue's last input, and as nothing
else holds it the epilogue writes over it in place (CompiledKernel's in-place variant). So
the product is made once, read once and written once, with no second result buffer to fault
in. The kernel's listed source says so and shows the epilogue's loop nest.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.graph import Attrs, Node
from ...ir.ops import OPS
from ..kernel_plan import describe_output, plan_output
from . import dots
from .kernels import CompiledKernel, compile_kernel


class DotKernel:
    """The dot, then the epilogue in place over its result."""

    in_place: frozenset[int] = frozenset()  # (its own dot's result, inside)

    def __init__(self, node: Node, name: str) -> None:
        plan = plan_output(node.attrs["body"])
        self.name, self.body, self.plan = name, node.attrs["body"], plan
        self.epilogue: CompiledKernel = compile_kernel(
            Node(node.id, "kernel", (), Attrs({"body": plan.epilogue, "kind": "loop"}),
                 node.type), f"{name}_epilogue")
        self.dot_seconds = 0.0
        # the dot as the program writes one (the op row's form for these shapes: no generic
        # transposes and reshapes per call), with the program's matmul (dots.matmul_for)
        dot, body = plan.dot, node.attrs["body"]
        expr = OPS["dot_general"].program(["a", "b"], [body[i].type for i in dot.inputs],
                                          dot.type, dot.attrs)
        self.product = eval(f"lambda a, b, matmul: {expr}", {"np": np})  # noqa: S307
        self.matmul: Any = np.matmul  # (the program sets its own)
        self.dtype = dtypes.to_numpy(dot.type.dtype)  # type: ignore[union-attr]

    @property
    def seconds(self) -> float:
        return self.epilogue.seconds + self.dot_seconds

    @seconds.setter
    def seconds(self, value: float) -> None:
        self.epilogue.seconds, self.dot_seconds = value, 0.0

    @property
    def source(self) -> str:
        head = describe_output(self.name, self.plan, f"BLAS ({dots.what(self.matmul)})")
        return "".join(f"# {x}\n" for x in head.splitlines()) + self.epilogue.source

    def __call__(self, vals: Sequence[np.ndarray]) -> np.ndarray:
        t0 = time.perf_counter()
        a, b = self.plan.operands
        # (an array of the dot's type: a vector product gives NumPy a scalar)
        product = np.asarray(self.product(vals[a], vals[b], self.matmul), self.dtype)
        self.dot_seconds += time.perf_counter() - t0
        args: list[Any] = [vals[k] for k in self.plan.kept]
        args.append(product)
        del product  # the epilogue may write over it: only `args` holds it now
        return self.epilogue(args)
