"""Window reductions (pooling: reduce_window_sum/max/min) and the max-pooling gradients
(select_and_scatter_add, select_and_gather_add) as generated CUDA (routines.py), any rank,
with padding, base (lhs) dilation, window dilation and strides as the rows have them
(ir/ops/windows.py).

Pooling is one thread per result element folding its window, offset by offset in window
order; a position that padding or base dilation opens holds the reduction's identity, so it
is skipped. Float sums accumulate in double, integer sums in 64 bits, as every generated
kernel's (codegen/kernel_plan.accumulation).

The gradients select, per window, its first maximum ("ge") or minimum ("le") as XLA:CPU and
the reference do: a later offset wins only where it is strictly better, or NaN where the best
so far is not; padding holds the fill identity and can be selected like any element.
select_and_gather_add is one thread per window: the tangent at its selected element (0 in a
hole). select_and_scatter_add is one thread per operand element, with no atomics: it visits
the windows that hold it, offset by offset in window order (the reference's order of
addition), re-selects each window, and adds the window's source value where the window chose
this element: deterministic, and the same sum as the reference's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...ir import dtypes
from ...ir.graph import Attrs, TensorType
from ..codegen.dialect import COMBINE
from .cuda_dialect import CUDA, c_type
from .routines import Call, Routine, blocks, c_takes, flat, loop, module, unflatten

_MONOID = {"reduce_window_sum": "add", "reduce_window_max": "max", "reduce_window_min": "min"}


def _geometry(x: TensorType, a: Attrs) -> tuple[list[int], ...]:
    n = x.rank
    return (list(a["window_dimensions"]), list(a["window_strides"]),
            [lo for lo, _ in a["padding"]], list(a.get("base_dilation") or (1,) * n),
            list(a.get("window_dilation") or (1,) * n))


def _reads(x: TensorType, a: Attrs, pos: str, off: str) -> tuple[list[str], str, str]:
    """Per dimension, the lines that place window offset `off`<d> of position `pos`<d> in
    the operand (`y<d>`, its index); whether that is a real element (not padding or a hole
    of base dilation); and the element's flat offset."""
    window, strides, low, base, dil = _geometry(x, a)
    lines, real = [], []
    for d, size in enumerate(x.shape):
        s = f"{pos}{d}" if strides[d] == 1 else f"{pos}{d} * {strides[d]}L"
        w = f"{off}{d}" if dil[d] == 1 else f"{off}{d} * {dil[d]}L"
        lines.append(f"const long z{d} = {s} + {w} - {low[d]}L;")
        real.append(f"z{d} >= 0 && z{d} <= {(size - 1) * base[d]}L")
        if base[d] != 1:
            real.append(f"z{d} % {base[d]}L == 0")
            lines.append(f"const long y{d} = z{d} / {base[d]}L;")
        else:
            lines.append(f"const long y{d} = z{d};")
    return lines, " && ".join(real) or "true", flat([f"y{d}" for d in range(x.rank)], x.shape)


def prepare_reduce_window(op: str, ins: Sequence[TensorType], out: TensorType,
                          a: Attrs) -> Routine | str:
    (x,) = ins
    why = c_takes(x.dtype)
    if why or x.dtype == "pred":
        return why or "a window reduction of bools keeps the reference"
    kind = _MONOID[op]
    acc_t = "f64" if kind == "add" and dtypes.is_float(x.dtype) else \
        ("u64" if x.dtype.startswith("u") else "i64") if kind == "add" else x.dtype
    window = list(a["window_dimensions"])
    reads, real, at = _reads(x, a, "o", "w")
    ident = CUDA.identity(kind, acc_t)
    fold = COMBINE[kind].format("acc", f"({c_type(acc_t)})x[{at}]")
    lines = [f'extern "C" __global__ void pool(const {c_type(x.dtype)}* __restrict__ x, '
             f"{c_type(out.dtype)}* __restrict__ out) {{", loop(out.size),
             *("    " + s for s in unflatten("t", out.shape, "o")),
             f"    {c_type(acc_t)} acc = {ident};",
             f"    for (long k = 0; k < {math.prod(window)}L; ++k) {{",
             *("      " + s for s in unflatten("k", window, "w")),
             *("      " + s for s in reads),
             f"      if ({real}) acc = {fold};", "    }",
             f"    out[t] = ({c_type(out.dtype)})acc;", "  }", "}"]
    source = module("\n".join(lines) + "\n")

    def run(vals: Sequence[Any], xp: Any, call: Call) -> Any:
        result = xp.empty(out.shape, dtypes.to_numpy(out.dtype))
        if out.size:
            call("pool", blocks(out.size), [vals[0], result])
        return result

    return Routine(op, f"generated CUDA {kind} pooling, one thread per result element "
                   f"folding its {math.prod(window)}-element window", source, run)


def _select(x: TensorType, a: Attrs, prim: str) -> list[str]:
    """Lines that leave in `best_k` window position `q`'s selected offset (flat, in window
    order), comparing as the reference does."""
    window = list(a["window_dimensions"])
    reads, real, at = _reads(x, a, "q", "j")
    t = c_type(x.dtype)
    fill = CUDA.identity("max" if prim == "ge" else "min", x.dtype)
    better = "v > best" if prim == "ge" else "v < best"
    if dtypes.is_float(x.dtype):
        better = f"({better} || (v != v && best == best))"
    return [f"{t} best = {fill};", "long best_k = 0;",
            f"for (long j = 0; j < {math.prod(window)}L; ++j) {{",
            *("  " + s for s in unflatten("j", window, "j")),
            *("  " + s for s in reads),
            f"  const {t} v = ({real}) ? x[{at}] : ({t}){fill};",
            f"  if (j == 0 || {better}) {{ best = v; best_k = j; }}", "}"]


def _check_select(x: TensorType, a: Attrs) -> str | None:
    why = c_takes(x.dtype)
    if why or x.dtype == "pred":
        return why or "a selection among bools keeps the reference"
    if a["select_prim"] not in ("ge", "le"):
        return f"select_prim {a['select_prim']!r}"
    return None


def prepare_select_and_gather_add(op: str, ins: Sequence[TensorType], out: TensorType,
                                  a: Attrs) -> Routine | str:
    tangents, x = ins
    why = _check_select(x, a)
    if why:
        return why
    t = c_type(x.dtype)
    reads, real, at = _reads(x, a, "q", "s")
    window = list(a["window_dimensions"])
    lines = [f'extern "C" __global__ void select_gather(const {t}* __restrict__ tan, '
             f"const {t}* __restrict__ x, {t}* __restrict__ out) {{", loop(out.size),
             *("    " + s for s in unflatten("t", out.shape, "q")),
             *("    " + s for s in _select(x, a, a["select_prim"])),
             *("    " + s for s in unflatten("best_k", window, "s")),
             *("    " + s for s in reads),
             f"    out[t] = ({real}) ? tan[{at}] : ({t})0;", "  }", "}"]
    source = module("\n".join(lines) + "\n")

    def run(vals: Sequence[Any], xp: Any, call: Call) -> Any:
        result = xp.empty(out.shape, dtypes.to_numpy(out.dtype))
        if out.size:
            call("select_gather", blocks(out.size), [vals[0], vals[1], result])
        return result

    return Routine(op, "generated CUDA, one thread per window: its first "
                   f"{'maximum' if a['select_prim'] == 'ge' else 'minimum'}'s tangent",
                   source, run)


def prepare_select_and_scatter_add(op: str, ins: Sequence[TensorType], out: TensorType,
                                   a: Attrs) -> Routine | str:
    source_t, x = ins
    why = _check_select(x, a)
    if why:
        return why
    t = c_type(x.dtype)
    window, strides = list(a["window_dimensions"]), list(a["window_strides"])
    low = [lo for lo, _ in a["padding"]]
    positions = list(source_t.shape)
    # the window q holding element e at offset k: q * s + k = e + low, along every dimension
    place = []
    for d in range(x.rank):
        place.append(f"const long r{d} = e{d} + {low[d]}L - k{d};")
        place.append(f"if (r{d} < 0 || r{d} % {strides[d]}L != 0 || r{d} / {strides[d]}L >= "
                     f"{positions[d]}L) continue;")
        place.append(f"const long q{d} = r{d} / {strides[d]}L;")
    lines = [f'extern "C" __global__ void select_scatter(const {t}* __restrict__ src, '
             f"const {t}* __restrict__ x, {t}* __restrict__ out) {{", loop(out.size),
             *("    " + s for s in unflatten("t", out.shape, "e")),
             f"    {t} acc = ({t})0;",
             f"    for (long k = 0; k < {math.prod(window)}L; ++k) {{",
             *("      " + s for s in unflatten("k", window, "k")),
             *("      " + s for s in place),
             *("      " + s for s in _select(x, a, a["select_prim"])),
             f"      if (best_k == k) acc = acc + src[{flat([f'q{d}' for d in range(x.rank)], positions)}];",
             "    }", "    out[t] = acc;", "  }", "}"]
    source = module("\n".join(lines) + "\n")

    def run(vals: Sequence[Any], xp: Any, call: Call) -> Any:
        result = xp.zeros(out.shape, dtypes.to_numpy(out.dtype))
        if out.size and source_t.size:
            call("select_scatter", blocks(out.size), [vals[0], vals[1], result])
        return result

    return Routine(op, "generated CUDA, one thread per operand element, no atomics: the "
                   "windows holding it re-select, in window order", source, run)


PREPARERS = {**{op: prepare_reduce_window for op in _MONOID},
             "select_and_gather_add": prepare_select_and_gather_add,
             "select_and_scatter_add": prepare_select_and_scatter_add}
