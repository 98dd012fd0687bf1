"""The temporaries of the NumPy-based backends (reference, cpu): transient bytes an op's NumPy
reference allocates beyond its result, while it runs. The backends declare this to the memory
planner (analysis/memory.py), which adds it to the live bytes at the op's step, so that the
planned peak bounds what tracemalloc measures when they run the graph.

The figures were measured op by op (tracemalloc around the reference of each op on large
inputs) and are rounded up; ops not listed allocate only their result. For a `loop` node this
is what merging one chunk into the running results allocates (the planner adds the body's
peak itself).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..ir import dtypes
from ..ir.graph import Graph, Node, TensorType, TupleType
from ..ir.ops import OPS, dot_dims
from ..ir.traits import OpKind, Split


def _size(t: object) -> int:
    return t.size if isinstance(t, TensorType) else sum(e.size for e in t.elements)  # type: ignore[attr-defined]


def _dot_copies(g: Graph, n: Node, contiguous: Mapping[int, bool]) -> int:
    """`_dot_ref` reshapes each operand, transposed to (batch, free, contracting), to 3-D; that
    copies when the operand is not laid out in that order and a group merges real dims."""
    lc, rc, lb, rb = dot_dims(n.attrs)
    total = 0
    for x, c, b in ((g[n.inputs[0]], lc, lb), (g[n.inputs[1]], rc, rb)):
        t = x.type
        assert isinstance(t, TensorType)
        free = [i for i in range(t.rank) if i not in (*c, *b)]
        order = [*b, *free, *c] if x is g[n.inputs[0]] else [*b, *c, *free]
        groups = (b, free, c)
        merges = any(sum(t.shape[i] > 1 for i in grp) > 1 for grp in groups)
        in_order = order == sorted(order) and contiguous.get(x.id, True)
        if merges and not in_order:
            total += t.nbytes
        pet = n.attrs.get("preferred_element_type")
        if pet and pet != t.dtype:
            total += t.size * dtypes.itemsize(pet)
    return total


def _loop_merge(g: Graph, n: Node) -> int:
    """What merging one chunk's results allocates."""
    a = n.attrs
    outs = n.type.elements if isinstance(n.type, TupleType) else (n.type,)
    merge = 0
    for spec, t in zip(a["combine"], outs):
        if spec[0] == "top_k":  # concatenate, float64 key, int64 order, gathered result
            merge += 4 * t.nbytes + 2 * t.size * 16
        elif spec[0] == "index":  # offset copy, gathered indices, where-masks
            merge += 3 * t.nbytes + 4 * t.size
    return merge


# NumPy's ufunc iterator buffers up to this many elements (its default bufsize) for each
# broadcast or strided operand and for the result; measured up to 2 x 8192 x 8 bytes for a
# binary f64 op on two broadcast views, never more than the result's size per buffer.
UFUNC_BUFFER = 8192


def _ufunc_buffers(g: Graph, n: Node, contiguous: Mapping[int, bool]) -> int:
    t = n.type
    assert isinstance(t, TensorType)
    strided = [i for i in n.inputs if isinstance(g[i].type, TensorType) and g[i].type.rank > 0
               and (g[i].type.shape != t.shape or not contiguous.get(i, True))]
    if not strided:
        return 0
    item = max(dtypes.itemsize(g[i].type.dtype) for i in n.inputs)  # type: ignore[union-attr]
    return min(t.size, UFUNC_BUFFER) * max(item, dtypes.itemsize(t.dtype)) * (len(strided) + 1)


def _elementwise_extra(g: Graph, n: Node) -> int:
    """The transient results of elementwise references that take more than one NumPy call."""
    t = n.type
    assert isinstance(t, TensorType)
    if n.op in ("rsqrt", "clamp", "round") or (n.op == "integer_pow" and n.attrs["y"] < 0):
        return 2 * t.nbytes
    if n.op in ("shift_left", "shift_right_logical", "shift_right_arithmetic"):
        return 2 * t.nbytes  # masks and clamped shift amounts
    if n.op in ("population_count", "bitcast_convert_type"):
        return t.nbytes  # an unsigned view's count / a contiguous copy
    if n.op == "reduce_precision":  # the exponent's bits and three masks (bf16: in float32)
        return 16 * t.size if t.dtype == "bf16" else t.nbytes + 4 * t.size
    if n.op == "pow" and dtypes.is_int(g[n.inputs[1]].type.dtype):  # type: ignore[union-attr]
        return 16 * t.size  # float64 exponent and result
    src = g[n.inputs[0]].type if n.inputs else None
    if n.op == "convert_element_type" and dtypes.is_int(t.dtype) and isinstance(src, TensorType) \
            and dtypes.is_float(src.dtype):  # saturating: boolean masks, and a contiguous
        return 4 * t.size + src.nbytes  # copy of a strided input for np.copyto
    return 0


def _window_bytes(x: TensorType, a: Mapping, axes: range | None = None) -> int:
    """The padded, base-dilated copy of `x` that ir/ops/windows.windows makes."""
    axes = axes if axes is not None else range(x.rank)
    base = a.get("base_dilation") or a.get("lhs_dilation") or (1,) * len(axes)
    size = x.size
    for k, d in enumerate(axes):
        lo, hi = a["padding"][k]
        grown = (x.shape[d] - 1) * base[k] + 1 + max(lo, 0) + max(hi, 0) if x.shape[d] else 0
        size = size // max(x.shape[d], 1) * grown
    return size * dtypes.itemsize(x.dtype)


def _model_op_bytes(g: Graph, n: Node) -> int | None:
    """The rows of ir/ops/indexing, convolution, windows, random and linalg, measured
    on large inputs (bench-sized embedding lookups, convs, pools, key draws, batched
    decompositions) with headroom; None for other ops."""
    ins = [g[i].type for i in n.inputs]
    out = n.type
    op, a = n.op, n.attrs
    if op == "gather":  # int64 starts; the flat window positions (int64, result-sized, and
        # the ufunc's buffers broadcasting starts against offsets); the fill mask and select
        idx, x = ins[1], ins[0]
        return 24 * out.size + out.nbytes + 16 * idx.size * x.rank  # type: ignore[union-attr]
    if op.startswith("scatter"):  # the same flat positions over the updates; their copies
        x, idx, upd = ins
        return 24 * upd.size + 2 * upd.nbytes + 16 * idx.size * x.rank  # type: ignore[union-attr]
    if op == "conv_general_dilated":  # padded lhs, dilated kernel, im2col windows (twice)
        lhs, rhs = ins
        ls, rs, os_ = a["dimension_numbers"]
        cols = lhs.shape[ls[0]] * lhs.shape[ls[1]]  # type: ignore[union-attr]
        for d in rs[2:]:
            cols *= rhs.shape[d]  # type: ignore[union-attr]
        for d in os_[2:]:
            cols *= out.shape[d]  # type: ignore[union-attr]
        item = dtypes.itemsize(out.dtype)  # type: ignore[union-attr]
        dilation = max(1, *(a.get("rhs_dilation") or (1,)))
        return (2 * cols * item + _window_bytes(lhs, a, range(2, lhs.rank))  # type: ignore[arg-type]
                + 2 * rhs.nbytes * dilation ** (rhs.rank - 2) + 2 * out.nbytes)
    if op.startswith("reduce_window"):  # padded copy; one dimension's fold at a time (the
        # largest is the first: the others' axes still whole), two alive at once
        x, padded = ins[0], _window_bytes(ins[0], a)  # type: ignore[arg-type]
        first = out.nbytes  # type: ignore[union-attr]
        base = a.get("base_dilation") or (1,) * x.rank  # type: ignore[union-attr]
        for d, (w, s) in enumerate(zip(a["window_dimensions"], a["window_strides"])):
            lo, hi = a["padding"][d]
            grown = (x.shape[d] - 1) * base[d] + 1 + max(lo, 0) + max(hi, 0)  # type: ignore[union-attr]
            if w != 1 or s != 1 or out.shape[d] != grown:  # type: ignore[union-attr]
                first = padded // max(grown, 1) * out.shape[d]  # type: ignore[union-attr]
                break
        return padded + 2 * max(first, out.nbytes)  # type: ignore[union-attr]
    if op in ("select_and_scatter_add", "select_and_gather_add"):
        operand = ins[1]
        padded = _window_bytes(operand, a) // dtypes.itemsize(operand.dtype)  # type: ignore[arg-type, union-attr]
        windows = ins[0].size if op == "select_and_scatter_add" else out.size  # type: ignore[union-attr]
        size = 1
        for w in a["window_dimensions"]:
            size *= w
        # int64 positions, padded values and accumulator; each window's values and positions
        # copied flat; the int64 argmax and chosen positions
        return 20 * padded + windows * (12 * size + 24)
    if op in ("cholesky", "triangular_solve", "lu", "qr", "eigh", "svd"):
        return 2 * out.nbytes + ins[0].nbytes  # per-matrix copies, then the stacked results
    if op == "threefry2x32":
        return 2 * out.nbytes  # the broadcast copies and cipher state
    if op in ("random_bits", "random_split", "random_fold_in", "random_seed"):
        return 32 * _size(out)  # uint64 counters, cipher state, the per-key list, the stack
    return None


def workspace_bytes(g: Graph, n: Node, contiguous: Mapping[int, bool]) -> int:
    op = n.op
    ins = [g[i].type for i in n.inputs]
    if op == "loop":
        return _loop_merge(g, n)
    if op == "top_k":  # a float64 negated copy and an int64 argsort of the whole input, and
        return 21 * _size(ins[0]) + 8 * _size(n.type)  # boolean masks: NaN, inf, -0.0
    if op == "sort":
        return 8 * _size(ins[0])
    if OPS[op].split == Split.ARG:  # int64 result, then converted; NumPy moves the axis
        src = ins[0]  # last and copies the input to do so, unless it already is last
        assert isinstance(src, TensorType)
        moved = n.attrs["axes"][0] != src.rank - 1 or not contiguous.get(n.inputs[0], True)
        return 8 * _size(n.type) + (src.nbytes if moved else 0)
    if op in WIDENING_REDUCTIONS:
        return 8 * _size(n.type)  # int64 result, then converted
    if op == "dot_general":
        return _dot_copies(g, n, contiguous)
    if OPS[op].kind == "elementwise" and isinstance(n.type, TensorType):
        extra = _ufunc_buffers(g, n, contiguous)
        if extra:
            return extra + _elementwise_extra(g, n)
    if OPS[op].kind == "elementwise" and isinstance(n.type, TensorType) and _elementwise_extra(g, n):
        return _elementwise_extra(g, n)
    model = _model_op_bytes(g, n)
    if model is not None:
        return model
    if op in ("div", "rem") and isinstance(n.type, TensorType) and dtypes.is_int(n.type.dtype):
        return 4 * n.type.size * 8
    if op == "select_n" and len(ins) > 3:
        return 8 * _size(n.type)
    return 0


# Reductions whose NumPy result may be wider than ours (np.sum of i32 is int64).
WIDENING_REDUCTIONS = frozenset(n for n, r in OPS.items() if r.kind == OpKind.REDUCE
                                and r.monoid is not None and r.monoid.name in ("add", "mul"))
