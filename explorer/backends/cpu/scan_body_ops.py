"""The array ops of a compiled scan's body written as numba statements (compiled_control_flow.py
writes the loop; this module writes the shape ops and dots its bodies hold besides kernels).

Every shape is known when the loop is generated, so each op is literal slicing: a `slice` is a
strided view made contiguous, `pad` a filled array with the operand written into its strided
interior (negative padding crops), `concatenate` and `stack` numba's np.concatenate and
np.stack, a `split` or `unstack` a tuple of views whose `get_tuple_element` is made contiguous
(so that the kernels reading it take 'C' arrays and vectorize), and a `dot_general` with batch
dimensions, or operands of rank above 2, a loop of np.dot over the batch of operands transposed
to (batch, free, contracted) and (batch, contracted, free): an LSTM gradient's concatenated
gates and a scan-stacked transformer's attention (its einsums batch over batch and heads) run
in the compiled loop instead of from Python per step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...ir.graph import Graph, Node, TensorType
from .numba_dialect import np_type

FLOATS = ("f32", "f64")


def _slices(parts: Sequence[tuple[int, int, int]]) -> str:
    return ", ".join(f"{lo}:{hi}" + (f":{s}" if s != 1 else "") for lo, hi, s in parts)


def slice_expr(n: Node, x: str, src: TensorType) -> str:
    a = n.attrs
    strides = a.get("strides") or (1,) * src.rank
    parts = list(zip(a["start_indices"], a["limit_indices"], strides))
    return f"np.ascontiguousarray({x}[{_slices(parts)}])" if src.rank else x


def pad_lines(n: Node, target: str, x: str, value: str, src: TensorType) -> list[str]:
    """`pad` as the op table's reference does it: grow by the non-negative padding, write the
    operand into the strided interior, crop the negative padding."""
    cfg = [tuple(c) for c in n.attrs["padding_config"]]
    grown = tuple(d + max(d - 1, 0) * i + max(lo, 0) + max(hi, 0)
                  for d, (lo, hi, i) in zip(src.shape, cfg))
    inner = [(max(lo, 0), max(lo, 0) + (d - 1) * (i + 1) + 1 if d else max(lo, 0), i + 1)
             for d, (lo, hi, i) in zip(src.shape, cfg)]
    crop = [(-min(lo, 0), g + min(hi, 0), 1) for g, (lo, hi, _) in zip(grown, cfg)]
    dtype = np_type(n.type.dtype)
    lines = [f"{target} = np.full({grown}, {dtype}({value}), {dtype})",
             f"{target}[{_slices(inner)}] = {x}"]
    if any(lo < 0 or hi < 0 for lo, hi, _ in cfg):
        lines.append(f"{target} = np.ascontiguousarray({target}[{_slices(crop)}])")
    return lines


def concatenate_expr(n: Node, ins: Sequence[str]) -> str:
    return f"np.concatenate(({''.join(f'{x}, ' for x in ins)}), axis={n.attrs['dimension']})"


def stack_expr(n: Node, ins: Sequence[str]) -> str:
    return f"np.stack(({''.join(f'{x}, ' for x in ins)}), {n.attrs['axis']})"


def pieces_expr(n: Node, x: str) -> str:
    """A split's or unstack's tuple of views (its elements are taken by get_tuple_element)."""
    lead = ":, " * n.attrs["axis"]
    if n.op == "split":
        bounds, lo = [], 0
        for s in n.attrs["sizes"]:
            bounds.append(f"{x}[{lead}{lo}:{lo + s}]")
            lo += s
    else:
        bounds = [f"{x}[{lead}{k}]" for k in range(len(n.type.elements))]
    return "(" + "".join(f"{b}, " for b in bounds) + ")"


def batched_dot_lines(n: Node, target: str, a: str, b: str, g: Graph) -> list[str] | None:
    """A dot_general with batch dimensions or operands of rank above 2 as a loop of np.dot
    over its batch; None where it is not a float dot of one element type."""
    (lc, rc), (lb, rb) = n.attrs["dimension_numbers"]
    lhs, rhs = g[n.inputs[0]].type, g[n.inputs[1]].type
    if lhs.dtype not in FLOATS or rhs.dtype != lhs.dtype or n.type.dtype != lhs.dtype \
            or n.attrs.get("preferred_element_type"):
        return None
    lfree = [d for d in range(lhs.rank) if d not in lc and d not in lb]
    rfree = [d for d in range(rhs.rank) if d not in rc and d not in rb]
    nb, m, k, nn = (math.prod(t.shape[d] for d in dims)
                    for t, dims in ((lhs, lb), (lhs, lfree), (lhs, lc), (rhs, rfree)))
    lperm, rperm = (*lb, *lfree, *lc), (*rb, *rc, *rfree)
    dtype = np_type(n.type.dtype)
    return [f"{target}_l = np.ascontiguousarray({a}.transpose({lperm})).reshape(({nb}, {m}, {k}))",
            f"{target}_r = np.ascontiguousarray({b}.transpose({rperm})).reshape(({nb}, {k}, {nn}))",
            f"{target} = np.empty(({nb}, {m}, {nn}), {dtype})",
            f"for {target}_b in range({nb}):",
            f"    {target}[{target}_b] = np.dot({target}_l[{target}_b], {target}_r[{target}_b])",
            f"{target} = {target}.reshape({tuple(n.type.shape)})"]


def broadcast_index(in_shape: Sequence[int], out_shape: Sequence[int]) -> str | None:
    """The index of an elementwise operand broadcast along its unit axes (numpy's rule at
    equal rank), or None where the ranks differ."""
    if len(in_shape) != len(out_shape):
        return None
    if any(i not in (1, o) for i, o in zip(in_shape, out_shape)):
        return None
    return ", ".join(f"i{d}" if i == o else "0" for d, (i, o) in enumerate(zip(in_shape, out_shape)))
