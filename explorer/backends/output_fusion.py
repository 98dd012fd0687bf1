"""Output-fusion kernels, for any target (a `kernel` of kind "output": passes/fuse.py): a dot
and the elementwise epilogue that alone reads it (a bias, an activation, a scale, a residual
add).

The dot runs through the target's matrix library (BLAS on the CPU, cuBLAS on the GPU), and
the epilogue is the target's generated elementwise kernel over its result
(kernel_plan.plan_output): the dot's result is the epilogue's last input, and as nothing else
holds it, an epilogue that can write over its input (the CPU's in-place variant) does. So the
product is made once, read once and written once, with no second result buffer to fault in.
The kernel's listed source says so and shows the epilogue's code.

A target subclasses `OutputFusion` with `product` (the dot of two operands) and `library`
(what computes it, for the listing); it passes its kernel compiler for the epilogue.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ..ir.graph import Attrs, Node
from .codegen.kernel_plan import PlanError, describe_output, plan_output


class OutputFusion:
    """The dot, then the epilogue over its result (PlanError when the body is not those)."""

    in_place: frozenset[int] = frozenset()  # (its own dot's result, inside)
    comment = "#"  # how the listing's header lines start

    def __init__(self, node: Node, name: str, compile_kernel: Callable[[Node, str], Any]) -> None:
        plan = plan_output(node.attrs["body"])
        self.name, self.body, self.plan = name, node.attrs["body"], plan
        self.epilogue = compile_kernel(
            Node(node.id, "kernel", (), Attrs({"body": plan.epilogue, "kind": "loop"}),
                 node.type), f"{name}_epilogue")
        self.dot_seconds = 0.0

    @classmethod
    def of(cls, node: Node, name: str) -> OutputFusion | None:
        """Kernel `node` as this output fusion when it is one (of kind "output", a dot and
        its epilogue), else None (the body is then compiled as it is)."""
        if node.attrs.get("kind") != "output":
            return None
        try:
            return cls(node, name)  # type: ignore[call-arg]
        except PlanError:
            return None

    # ---- what a target supplies

    def product(self, a: Any, b: Any) -> Any:
        """The dot of operands `a` and `b`, an array of the dot's type."""
        raise NotImplementedError

    @property
    def library(self) -> str:
        """What computes the dot (the listing says)."""
        raise NotImplementedError

    # ----

    @property
    def reason(self) -> str:
        """Why the epilogue does not run as generated code ("" when it does)."""
        return self.epilogue.reason

    @property
    def seconds(self) -> float:
        return self.epilogue.seconds + self.dot_seconds

    @seconds.setter
    def seconds(self, value: float) -> None:
        self.epilogue.seconds, self.dot_seconds = value, 0.0

    @property
    def timed(self) -> bool:
        """Whether each call waits for the device and is timed (a GPU's measured run): the
        epilogue's wait covers the dot's work too."""
        return bool(getattr(self.epilogue, "timed", False))

    @timed.setter
    def timed(self, value: bool) -> None:
        self.epilogue.timed = value

    @property
    def source(self) -> str:
        head = describe_output(self.name, self.plan, self.library)
        return "".join(f"{self.comment} {x}\n" for x in head.splitlines()) + self.epilogue.source

    def __call__(self, vals: Sequence[Any]) -> Any:
        t0 = time.perf_counter()
        a, b = self.plan.operands
        product = self.product(vals[a], vals[b])
        self.dot_seconds += time.perf_counter() - t0
        args: list[Any] = [vals[k] for k in self.plan.kept]
        args.append(product)
        del product  # the epilogue may write over it: only `args` holds it now
        return self.epilogue(args)
