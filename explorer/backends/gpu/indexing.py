"""Gathers and scatters as generated CUDA (routines.py): embedding lookups, take_along_axis,
`x.at[i].set/add/mul/min/max`, segment_sum (a scatter-add), any dimension numbers the rows
take (ir/ops/indexing.py), with JAX's index modes exactly.

A gather is one thread per result element: it finds its index vector, works out the window's
start in every operand dimension (index components on `start_index_map`, the position along
the indices' batching dims on the operand's batching dims), clips each start into
[0, dim - slice size] ("clip" and "promise_in_bounds"), or, in "fill" mode, writes the fill
value when any index component is outside that range; then reads the operand.

A scatter copies the operand (the result) and runs one thread per update element: its
window's start, clipped in "clip" mode; in "fill" and "promise_in_bounds" a window that does
not fit whole is dropped (every thread of it sees the same start, so all drop). The update is
combined into the result:
- with `unique_indices`, by a plain read-modify-write (no two threads meet);
- scatter-add, by atomicAdd (f32, f64, 32- and 64-bit integers): duplicates accumulate, in
  the order the threads arrive (float sums may round differently from the reference's
  in-order sum, as on XLA:GPU);
- scatter-mul/-min/-max, by a compare-and-swap loop over the element's bits (4- and 8-byte
  types; min/max propagate NaN as np.minimum/np.maximum);
- scatter (replace), in two kernels: each result element first records the largest index
  batch position that writes it (atomicMax), then only that update writes: the last update
  in index order wins, as on XLA:CPU and in the reference, whatever the thread order.
Other element types (8- and 16-bit types, bool) keep the reference, with a note.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.graph import Attrs, TensorType
from ...ir.ops.indexing import default_fill
from .cuda_dialect import CUDA, c_type
from .routines import Call, Routine, blocks, c_takes, flat, loop, module, unflatten

# combining by a compare-and-swap loop over a 4- or 8-byte element's bits
ATOMIC_FOLD = """template <int N> struct _word;
template <> struct _word<4> { typedef unsigned int T; };
template <> struct _word<8> { typedef unsigned long long T; };
template <typename T, typename Op> __device__ void atomic_fold(T* at, T v, Op op) {
  typedef typename _word<sizeof(T)>::T W;
  union { W w; T t; } cur, next;
  W* word = (W*)at;
  W old = *word, seen;
  do {
    seen = old;
    cur.w = seen;
    next.t = op(cur.t, v);
    old = atomicCAS(word, seen, next.w);
  } while (old != seen);
}
struct _mul { template <typename T> __device__ T operator()(T a, T b) const { return a * b; } };
struct _min { template <typename T> __device__ T operator()(T a, T b) const { return minimum(a, b); } };
struct _max { template <typename T> __device__ T operator()(T a, T b) const { return maximum(a, b); } };
"""
_FOLDS = {"scatter-mul": "_mul()", "scatter-min": "_min()", "scatter-max": "_max()"}
# element types atomicAdd takes (a signed 64-bit sum goes through its unsigned twin)
_ATOMIC_ADD = {"f32", "f64", "i32", "u32", "i64", "u64"}


def _dims(a: Attrs, key: str) -> tuple[int, ...]:
    return tuple(a.get(key) or ())


def _index(idx: TensorType, batch: str, k: int) -> str:
    """Component k of the index vector at flat batch position `batch`, as a long."""
    return f"(long)idx[{batch} * {idx.shape[-1]}L + {k}]" if idx.shape[-1] != 1 \
        else f"(long)idx[{batch}]"


def _repeats(index_map: Sequence[int], batching: Sequence[int]) -> bool:
    """Whether an operand dimension takes its start from two places (the references let the
    last win; the kernels here take one)."""
    return len(set(index_map) | set(batching)) != len(index_map) + len(batching)


def _clip(v: str, upper: int) -> str:
    return f"({v} < 0 ? 0L : {v} > {upper}L ? {upper}L : {v})"


# ---------------------------------------------------------------- gather


def prepare_gather(op: str, ins: Sequence[TensorType], out: TensorType, a: Attrs) -> Routine | str:
    x, idx = ins
    why = c_takes(x.dtype, idx.dtype)
    if why:
        return why
    if x.dtype == "pred":
        return "a gather of bools keeps the reference"
    offset, collapsed, start_map, obatch, ibatch = (_dims(a, k) for k in (
        "offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
        "start_indices_batching_dims"))
    if _repeats(start_map, obatch):
        return "a start_index_map naming an operand dimension twice"
    sizes, mode = tuple(a["slice_sizes"]), a.get("mode", "promise_in_bounds")
    batch_shape = idx.shape[:-1]
    batch_pos = [d for d in range(out.rank) if d not in offset]  # result dims of the batch
    kept = [d for d in range(x.rank) if d not in collapsed + obatch]
    lines = [f'extern "C" __global__ void gather(const {c_type(x.dtype)}* __restrict__ x, '
             f"const {c_type(idx.dtype)}* __restrict__ idx, {c_type(out.dtype)}* __restrict__ out) {{",
             loop(out.size), *("    " + s for s in unflatten("t", out.shape, "o"))]
    lines.append(f"    const long b = {flat([f'o{d}' for d in batch_pos], batch_shape)};")
    lines.append("    bool ok = true;")
    where = []
    for d in range(x.rank):
        upper = x.shape[d] - sizes[d]
        if d in start_map:
            raw = _index(idx, "b", start_map.index(d))
            lines.append(f"    const long r{d} = {raw};")
            if mode == "fill":
                lines.append(f"    ok = ok && r{d} >= 0 && r{d} <= {upper}L;")
            start = _clip(f"r{d}", upper)
        elif d in obatch:
            start = f"o{batch_pos[ibatch[obatch.index(d)]]}"
        else:
            start = "0"
        inner = f"o{offset[kept.index(d)]}" if d in kept else "0"
        where.append(start if inner == "0" else inner if start == "0" else f"{start} + {inner}")
    fill = a.get("fill_value")
    fill = default_fill(dtypes.to_numpy(x.dtype)) if fill is None else fill
    value = f"x[{flat(where, x.shape)}]"
    if mode == "fill":
        fill_v = CUDA.literal(float(fill) if dtypes.is_float(x.dtype) else int(fill), x.dtype)
        value = f"ok ? {value} : ({c_type(x.dtype)}){fill_v}"
    lines += [f"    out[t] = {value};", "  }", "}"]
    source = module("\n".join(lines) + "\n")

    def run(vals: Sequence[Any], xp: Any, call: Call) -> Any:
        result = xp.empty(out.shape, dtypes.to_numpy(out.dtype))
        if out.size:
            call("gather", blocks(out.size), [vals[0], vals[1], result])
        return result

    return Routine(op, f"generated CUDA gather ({mode} mode), one thread per result element",
                   source, run)


# ---------------------------------------------------------------- scatter


def prepare_scatter(op: str, ins: Sequence[TensorType], out: TensorType, a: Attrs) -> Routine | str:
    x, idx, upd = ins
    why = c_takes(x.dtype, idx.dtype)
    if why:
        return why
    unique = bool(a.get("unique_indices"))
    if not unique and op == "scatter-add" and x.dtype not in _ATOMIC_ADD:
        return f"no atomic add of {x.dtype} here"
    if not unique and op in _FOLDS and dtypes.itemsize(x.dtype) not in (4, 8):
        return f"no atomic {op[8:]} of {x.dtype} here"
    if x.dtype == "pred":
        return "a scatter of bools keeps the reference"
    batches = math.prod(idx.shape[:-1])
    if op == "scatter" and not unique and batches >= 2**31:
        return "more than 2^31 index vectors"
    window, inserted, to_operand, obatch, ibatch = (_dims(a, k) for k in (
        "update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
        "operand_batching_dims", "scatter_indices_batching_dims"))
    if _repeats(to_operand, obatch):
        return "scatter_dims_to_operand_dims naming an operand dimension twice"
    mode = a.get("mode", "fill")
    kept = [d for d in range(x.rank) if d not in inserted + obatch]
    sizes = [1] * x.rank
    for w, d in zip(window, kept):
        sizes[d] = upd.shape[w]
    scatter_dims = [d for d in range(upd.rank) if d not in window]
    t = c_type(x.dtype)
    head = [*("    " + s for s in unflatten("t", upd.shape, "u")),
            f"    const long b = {flat([f'u{d}' for d in scatter_dims], idx.shape[:-1])};",
            "    bool fits = true;"]
    where = []
    for d in range(x.rank):
        upper = x.shape[d] - sizes[d]
        if d in to_operand:
            raw = _index(idx, "b", to_operand.index(d))
        elif d in obatch:
            raw = f"u{scatter_dims[ibatch[obatch.index(d)]]}"
        else:
            raw = "0L"
        head.append(f"    const long s{d} = {_clip(raw, upper) if mode == 'clip' else raw};")
        if mode != "clip":
            head.append(f"    fits = fits && s{d} >= 0 && s{d} <= {upper}L;")
        inner = f"u{window[kept.index(d)]}" if d in kept else "0"
        where.append(f"s{d}" if inner == "0" else f"s{d} + {inner}")
    head += ["    if (!fits) continue;", f"    const long p = {flat(where, x.shape)};"]
    params = (f"const {c_type(idx.dtype)}* __restrict__ idx, const {t}* __restrict__ upd, "
              f"{t}* __restrict__ out")
    kernels, helpers = [], ""
    if op == "scatter" and not unique:
        kernels.append("\n".join([
            f'extern "C" __global__ void winners({params}, int* __restrict__ win) {{',
            loop(upd.size), *head, "    atomicMax(win + p, (int)b);", "  }", "}"]))
        kernels.append("\n".join([
            f'extern "C" __global__ void scatter({params}, int* __restrict__ win) {{',
            loop(upd.size), *head, "    if (win[p] == (int)b) out[p] = upd[t];", "  }", "}"]))
        how = "the last update in index order wins (atomicMax of its position, then a write)"
    else:
        if unique:
            step = {"scatter": "out[p] = upd[t];", "scatter-add": "out[p] = out[p] + upd[t];",
                    "scatter-mul": "out[p] = out[p] * upd[t];",
                    "scatter-min": "out[p] = minimum(out[p], upd[t]);",
                    "scatter-max": "out[p] = maximum(out[p], upd[t]);"}[op]
            how = "unique indices: a plain read-modify-write"
        elif op == "scatter-add":
            wide = "unsigned long long" if x.dtype == "i64" else None
            step = (f"atomicAdd(({wide}*)(out + p), ({wide})upd[t]);" if wide
                    else "atomicAdd(out + p, upd[t]);")
            how = "duplicates accumulate by atomicAdd"
        else:
            helpers = ATOMIC_FOLD
            step = f"atomic_fold(out + p, upd[t], {_FOLDS[op]});"
            how = "duplicates combine by a compare-and-swap loop"
        kernels.append("\n".join([f'extern "C" __global__ void scatter({params}) {{',
                                  loop(upd.size), *head, f"    {step}", "  }", "}"]))
    source = module(*kernels, helpers=helpers) + "\n"

    def run(vals: Sequence[Any], xp: Any, call: Call) -> Any:
        result = xp.array(vals[0], dtype=dtypes.to_numpy(x.dtype), copy=True, order="C")
        if upd.size == 0 or result.size == 0:
            return result
        args = [vals[1], vals[2], result]
        if op == "scatter" and not unique:
            win = xp.full(x.shape, -1, np.int32)
            call("winners", blocks(upd.size), [*args, win])
            args.append(win)
        call("scatter", blocks(upd.size), args)
        return result

    return Routine(op, f"generated CUDA {op} ({mode} mode), one thread per update element: "
                   f"{how}", source, run)


PREPARERS = {"gather": prepare_gather,
             **{op: prepare_scatter for op in ("scatter", "scatter-add", "scatter-mul",
                                               "scatter-min", "scatter-max")}}
