"""Convolutions as generated CUDA (routines.py): every `conv_general_dilated` the row takes of
f32 or f64, any rank and layout, forward and transposed (lhs dilation), with kernel dilation,
negative padding, and feature or batch groups (the gradients JAX emits), by one of two
methods chosen by shape when the program is made (`method`), which the listing names:

- "im2col + cuBLAS": a generated kernel copies each window into a row of a matrix
  (group, batch x output positions, kernel positions x input channels), reading the operand
  in its own layout (no transposed copy), with 0 where padding or lhs dilation opens a hole;
  then one batched product by cuBLAS through `xp.matmul` with the kernel as a (group,
  kernel positions x input channels, output channels) matrix; the product's rows are the
  result, moved to its layout.
- "direct": one thread per result element, looping over its window and input channels,
  reading both operands in place: where the contraction is short and the outputs few (a
  network's first layer: 3x3 RGB windows, 27 terms), which cuBLAS runs far below its speed,
  or where the window matrix would not fit DIRECT_ABOVE bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...ir import dtypes
from ...ir.graph import Attrs, TensorType
from .cuda_dialect import c_type
from .routines import Call, Routine, blocks, flat, loop, module, unflatten

# "direct" below this many terms per result and outputs per position
DIRECT_TERMS, DIRECT_OUTPUTS = 64, 64
DIRECT_ABOVE = 1 << 30  # bytes of window matrix beyond which "direct" runs instead


def method(terms: int, outputs: int, cols_bytes: int) -> str:
    """"direct" for a short contraction into few outputs, or a window matrix too large to
    hold; else "im2col + cuBLAS"."""
    if terms <= DIRECT_TERMS and outputs <= DIRECT_OUTPUTS or cols_bytes > DIRECT_ABOVE:
        return "direct"
    return "im2col + cuBLAS"


def _place(k: int, a: Attrs, x_spatial: Sequence[int], pos: str, off: str) -> tuple[list[str], str]:
    """Lines placing kernel offset `off`<d> of output position `pos`<d> in the lhs (`y<d>`),
    and whether that is a real element (not padding or a hole of lhs dilation)."""
    strides = a["window_strides"]
    low = [lo for lo, _ in a["padding"]]
    lhs_dil = a.get("lhs_dilation") or (1,) * k
    rhs_dil = a.get("rhs_dilation") or (1,) * k
    lines, real = [], []
    for d in range(k):
        s = f"{pos}{d}" if strides[d] == 1 else f"{pos}{d} * {strides[d]}L"
        w = f"{off}{d}" if rhs_dil[d] == 1 else f"{off}{d} * {rhs_dil[d]}L"
        lines.append(f"const long z{d} = {s} + {w} - {low[d]}L;")
        real.append(f"z{d} >= 0 && z{d} <= {(x_spatial[d] - 1) * lhs_dil[d]}L")
        if lhs_dil[d] != 1:
            real.append(f"z{d} % {lhs_dil[d]}L == 0")
            lines.append(f"const long y{d} = z{d} / {lhs_dil[d]}L;")
        else:
            lines.append(f"const long y{d} = z{d};")
    return lines, " && ".join(real) or "true"


def _at(spec: Sequence[int], shape: Sequence[int], canonical: Sequence[str]) -> str:
    """The flat offset of the element at canonical indices `canonical` (batch or out
    feature, feature, spatial...) in an operand of layout `spec` and `shape`."""
    index = ["0"] * len(shape)
    for c, dim in enumerate(spec):
        index[dim] = canonical[c]
    return flat(index, shape)


def prepare_conv(op: str, ins: Sequence[TensorType], out: TensorType, a: Attrs) -> Routine | str:
    lhs, rhs = ins
    if lhs.dtype not in ("f32", "f64") or rhs.dtype != lhs.dtype or out.dtype != lhs.dtype:
        return f"a convolution of {lhs.dtype} into {out.dtype} keeps the reference"
    ls, rs, os_ = (tuple(s) for s in a["dimension_numbers"])
    k = lhs.rank - 2
    fg, bg = a.get("feature_group_count", 1), a.get("batch_group_count", 1)
    groups = fg * bg
    o, i = rhs.shape[rs[0]], rhs.shape[rs[1]]
    x_sp = [lhs.shape[d] for d in ls[2:]]
    kern = [rhs.shape[d] for d in rs[2:]]
    pos = [out.shape[d] for d in os_[2:]]
    n_out, og = out.shape[os_[0]], o // groups
    terms, window = i * math.prod(kern), math.prod(kern)
    t = c_type(lhs.dtype)
    cols_shape = (groups, n_out * math.prod(pos), terms)
    how = method(terms, og, math.prod(cols_shape) * dtypes.itemsize(lhs.dtype))
    place, real = _place(k, a, x_sp, "p", "k")
    # the lhs batch and channel of group `g`, batch `b`, channel `ci` of the group
    src_n = f"g * {n_out}L + b" if bg > 1 else "b"
    src_c = f"g * {i}L + ci" if fg > 1 else "ci"
    lhs_at = _at(ls, lhs.shape, [src_n, src_c, *(f"y{d}" for d in range(k))])
    if how == "direct":
        rhs_at = _at(rs, rhs.shape, ["f", "ci", *(f"k{d}" for d in range(k))])
        canon = [f"o{os_[j]}" for j in range(k + 2)]
        lines = [f'extern "C" __global__ void conv(const {t}* __restrict__ x, '
                 f"const {t}* __restrict__ w, {t}* __restrict__ out) {{", loop(out.size),
                 *("    " + s for s in unflatten("t", out.shape, "o")),
                 f"    const long b = {canon[0]}, f = {canon[1]}, g = f / {og}L;",
                 *(f"    const long p{d} = {canon[2 + d]};" for d in range(k)),
                 f"    {t} acc = 0;",
                 f"    for (long kk = 0; kk < {window}L; ++kk) {{",
                 *("      " + s for s in unflatten("kk", kern, "k")),
                 *("      " + s for s in place),
                 f"      if (!({real})) continue;",
                 f"      for (long ci = 0; ci < {i}L; ++ci) acc += x[{lhs_at}] * w[{rhs_at}];",
                 "    }", "    out[t] = acc;", "  }", "}"]
        source = module("\n".join(lines) + "\n")

        def run(vals: Sequence[Any], xp: Any, call: Call) -> Any:
            result = xp.zeros(out.shape, dtypes.to_numpy(out.dtype))
            if out.size and terms:
                call("conv", blocks(out.size), [vals[0], vals[1], result])
            return result

        return Routine(op, f"direct: generated CUDA, one thread per result element summing "
                       f"{terms} terms", source, run)
    # im2col: cols[g, (b, p...), (k..., ci)]
    lines = [f'extern "C" __global__ void im2col(const {t}* __restrict__ x, '
             f"{t}* __restrict__ cols) {{", loop(math.prod(cols_shape)),
             *("    " + s for s in unflatten("t", (groups, n_out, *pos, *kern, i), "e")),
             "    const long g = e0, b = e1;",
             *(f"    const long p{d} = e{2 + d}, k{d} = e{2 + k + d};" for d in range(k)),
             f"    const long ci = e{2 + 2 * k};",
             *("    " + s for s in place),
             f"    cols[t] = ({real}) ? x[{lhs_at}] : ({t})0;", "  }", "}"]
    source = module("\n".join(lines) + "\n")
    out_spec = tuple(int(j) for j in sorted(range(k + 2), key=lambda j: os_[j]))

    def run(vals: Sequence[Any], xp: Any, call: Call) -> Any:
        dtype = dtypes.to_numpy(out.dtype)
        if out.size == 0 or terms == 0:
            return xp.zeros(out.shape, dtype)
        cols = xp.empty(cols_shape, dtype)
        call("im2col", blocks(cols.size), [vals[0], cols])
        w = xp.transpose(vals[1], rs).reshape(groups, og, i, *kern)
        w = xp.transpose(w, (0, *range(3, 3 + k), 2, 1)).reshape(groups, terms, og)
        prod = xp.matmul(cols, w)  # (groups, n_out * positions, og): cuBLAS
        del cols
        canon = xp.transpose(prod.reshape(groups, n_out, *pos, og),
                             (1, 0, 2 + k, *range(2, 2 + k))).reshape(n_out, o, *pos)
        return xp.ascontiguousarray(xp.transpose(canon, out_spec))

    return Routine(op, f"im2col + cuBLAS: a generated CUDA kernel copies the windows into a "
                   f"{cols_shape} matrix, xp.matmul (cuBLAS) multiplies it by the kernel",
                   source, run)


PREPARERS = {"conv_general_dilated": prepare_conv}
