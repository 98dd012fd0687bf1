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
    if n.op in ("rsqrt", "clamp", "round") or (n.op == "integer_pow" and n.attrs["y"] < 0):
        return 2 * n.type.nbytes  # type: ignore[union-attr]
    return 0


def workspace_bytes(g: Graph, n: Node, contiguous: Mapping[int, bool]) -> int:
    op = n.op
    ins = [g[i].type for i in n.inputs]
    if op == "loop":
        return _loop_merge(g, n)
    if op == "top_k":  # a float64 negated copy and an int64 argsort of the whole input, and
        return 19 * _size(ins[0]) + 8 * _size(n.type)  # three boolean masks for NaN and inf
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
    if op in ("rsqrt", "clamp", "round") or (op == "integer_pow" and n.attrs["y"] < 0):
        return 2 * n.type.nbytes  # type: ignore[union-attr]
    if op == "convert_element_type":
        src = ins[0]
        assert isinstance(src, TensorType)
        return 2 * src.size * 8 if dtypes.is_float(src.dtype) else 0
    if op in ("div", "rem") and isinstance(n.type, TensorType) and dtypes.is_int(n.type.dtype):
        return 4 * n.type.size * 8
    if op == "select_n" and len(ins) > 3:
        return 8 * _size(n.type)
    return 0


# Reductions whose NumPy result may be wider than ours (np.sum of i32 is int64).
WIDENING_REDUCTIONS = frozenset(n for n, r in OPS.items() if r.kind == OpKind.REDUCE
                                and r.monoid is not None and r.monoid.name in ("add", "mul"))
