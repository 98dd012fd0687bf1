"""What a CPU program allocates besides its values, for the memory planner
(analysis/memory.py): the NumPy ops' temporaries, a generated kernel's accumulators and
contiguous copies, the products a compiled scan makes before its iterations; and which
kernels run their bodies node by node."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ...ir.graph import Graph, Node
from ..numpy_temporaries import workspace_bytes
from .compiled_control_flow import hoisted_bytes
from .kernels import DENSE_MIN, code_of


def cpu_workspace(g: Graph, n: Node, contiguous: Mapping[int, bool]) -> int:
    """The NumPy ops' temporaries, a generated kernel's accumulators (`red`, `partial`)
    and contiguous copies of its strided inputs (kernels.DENSE_MIN), and the products a
    compiled scan makes before its iterations (compiled_control_flow.hoisted), held until the
    scan ends."""
    if n.op == "scan":
        return workspace_bytes(g, n, contiguous) + hoisted_bytes(n)
    if n.op != "kernel":
        return workspace_bytes(g, n, contiguous)
    code = code_of(n.attrs["body"])
    if code is None:
        return 0
    copies = sum(g[i].type.nbytes for i in dict.fromkeys(n.inputs)  # type: ignore[union-attr]
                 if not contiguous.get(i, True) and g[i].type.size >= DENSE_MIN)  # type: ignore[union-attr]
    if code.red is None:
        return copies
    cells = max(1, math.prod(n.type.shape))  # type: ignore[union-attr]
    return copies + 8 * cells * ((code.red != "out") + code.chunks)


def runs_body(n: Node) -> bool:
    """Kernels the generator cannot express run their body on the reference interpreter."""
    return n.op != "kernel" or code_of(n.attrs["body"]) is None
