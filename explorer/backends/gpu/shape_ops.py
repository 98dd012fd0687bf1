"""`pad` and `concatenate` as generated CUDA (routines.py): one launch, one thread per result
element, that reads its element from the input that holds it or writes the padding value.
(The references are two or more device ops each: a fill, then a strided copy per input.)
`slice`, `rev` and `transpose` need no kernel: on CuPy they are views, which the kernel that
reads them reads strided.

Padding per dimension is (low, high, interior) with negative low/high cropping, as the row
has it (ir/ops/shape.py): result index o holds input element (o - low) / (interior + 1) when
that divides and is in range.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...ir import dtypes
from ...ir.graph import Attrs, TensorType
from .cuda_dialect import c_type
from .routines import Call, Routine, blocks, c_takes, flat, loop, module, unflatten


def prepare_pad(op: str, ins: Sequence[TensorType], out: TensorType, a: Attrs) -> Routine | str:
    x, _ = ins
    why = c_takes(x.dtype)
    if why:
        return why
    t = c_type(x.dtype)
    lines, inside = [], []
    for d, (lo, _, interior) in enumerate(a["padding_config"]):
        step = interior + 1
        lines.append(f"const long z{d} = o{d} - ({lo}L);")
        inside.append(f"z{d} >= 0")
        if step != 1:
            inside.append(f"z{d} % {step}L == 0")
        inside.append(f"z{d} / {step}L < {x.shape[d]}L" if step != 1 else f"z{d} < {x.shape[d]}L")
    at = flat([f"z{d} / {i + 1}L" if i else f"z{d}"
               for d, (_, _, i) in enumerate(a["padding_config"])], x.shape)
    kernel = "\n".join([
        f'extern "C" __global__ void pad(const {t}* __restrict__ x, const {t}* __restrict__ value, '
        f"{t}* __restrict__ out) {{", loop(out.size),
        *("    " + s for s in unflatten("t", out.shape, "o")),
        *("    " + s for s in lines),
        f"    out[t] = ({' && '.join(inside) or 'true'}) ? x[{at}] : value[0];", "  }", "}"])
    source = module(kernel + "\n")

    def run(vals: Sequence[Any], xp: Any, call: Call) -> Any:
        result = xp.empty(out.shape, dtypes.to_numpy(out.dtype))
        if out.size:
            call("pad", blocks(out.size), [vals[0], vals[1].reshape(1), result])
        return result

    return Routine(op, "generated CUDA pad, one thread per result element", source, run)


def prepare_concatenate(op: str, ins: Sequence[TensorType], out: TensorType,
                        a: Attrs) -> Routine | str:
    why = c_takes(out.dtype)
    if why:
        return why
    if not ins:
        return "a concatenation of nothing"
    t, axis = c_type(out.dtype), a["dimension"]
    params = ", ".join(f"const {t}* __restrict__ in{k}" for k in range(len(ins)))
    lines, start = [], 0
    for k, x in enumerate(ins):
        if x.size == 0:
            start += x.shape[axis]
            continue
        index = [f"o{d}" if d != axis else f"o{d} - {start}L" for d in range(out.rank)]
        stop = start + x.shape[axis]
        lines.append(f"    {'if' if not lines else 'else if'} (o{axis} < {stop}L) "
                     f"out[t] = in{k}[{flat(index, x.shape)}];")
        start = stop
    kernel = "\n".join([
        f'extern "C" __global__ void concatenate({params}, {t}* __restrict__ out) {{',
        loop(out.size), *("    " + s for s in unflatten("t", out.shape, "o")), *lines, "  }", "}"])
    source = module(kernel + "\n")

    def run(vals: Sequence[Any], xp: Any, call: Call) -> Any:
        result = xp.empty(out.shape, dtypes.to_numpy(out.dtype))
        if out.size:
            call("concatenate", blocks(out.size), [*vals, result])
        return result

    return Routine(op, f"generated CUDA concatenate of {len(ins)} inputs, one thread per "
                   "result element", source, run)


PREPARERS = {"pad": prepare_pad, "concatenate": prepare_concatenate}
