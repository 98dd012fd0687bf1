"""Scans and whiles compiled whole: a `scan` or `while` whose body (and condition) the
generator can take runs as one numba function over all its iterations, as XLA runs one, with
no Python per step (the program writer's per-iteration drivers, control_flow.py, are the
fall-back).

The function is one generated module: the body's fused kernels (their generated source,
renamed), then a loop over the iterations that calls them, BLAS dots through numba's np.dot,
and the few array ops bodies hold besides (broadcasts, reshapes, transposes, one-axis
reductions, unfused elementwise ops as loops over their scalar forms, with operands broadcast
along unit axes; slices, pads, concatenations, stacks, split and unstack elements, and dots
with batch dimensions as scan_body_ops.py writes them: an LSTM's split gates and their
gradient's concatenation, a scan-stacked transformer's rotary and attention). Carries pass from one
iteration to the next as local arrays; each stacked result is written row by row into an
array allocated once. What it takes: tensors of rank >= 1 everywhere in the body (numba's
0-d arrays are a poor fit), kernels that run serially, and 2-D or 1-D dots without batch
dimensions. Any other body runs as a generated Python function per iteration (program.py),
and a body numba then fails to type falls back to that too, once, with the reason kept.

A dot of the step's row of a scanned input by a constant (an RNN's input projection,
`x @ W`) depends on no carry: it runs once before the loop, as one product over every
step's rows (`hoisted`; cuDNN's RNNs do the same), and the loop reads its row. The product
is a temporary of the scan (HOIST_MAX_BYTES at most; the memory planner counts it,
`hoisted_bytes`). Measured on the AMD VM, 2 cores, an RNN of 256 steps (batch 32, 64
features, 128 units), the same program with and without, alternating in one process: the
scan 12.4 -> 10.0 and 13.2 -> 10.7 ms in two runs (jax.jit 9.4 ms then), its gradient
30.7 -> 27.9 and 31.1 -> 27.2 ms (jax.jit 25.7-25.9 ms).

The reverse case, a gradient's weight sums: a carry that only adds a product of the step's
row of a scanned input and a step value, contracted over the batch axis (dW += h_prev^T @
delta), and that nothing else reads, is the sum over the steps of those products, one
product of every step's rows and every step's value. The loop stores the value (one buffer
per value however many carries read it: an RNN's delta feeds dW_h and dW_x) and the product
runs once after the loop (`deferred`; the buffer is a temporary of the scan, counted with
the hoisted products). Same RNN's gradient, with and without, alternating in one process
(session 15): 21.7-24.0 against 29.7-34.3 ms, and 24.3-28.0 against 30.6-36.5 ms in a
second run (jax.jit 22-29 ms in both). The sum's order changes: float32 results move by
roundoff (1.7e-5 absolute on that gradient).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...analysis.cost import node_flops
from ...ir import dtypes
from ...ir.graph import Attrs, Graph, Node, TensorType, TupleType
from ...ir.ops import OPS
from ...ir.traits import OpKind
from ..codegen.kernel_plan import KernelPlan, PlanError, plan_any
from ..control_flow import one_or_tuple
from .kernel_codegen import KERNEL, accumulator
from .kernels import CpuKernelCode, code_of, load, threads
from .numba_dialect import NUMBA, np_type
from .scan_body_ops import (
    batched_dot_lines,
    broadcast_index,
    concatenate_expr,
    pad_lines,
    pieces_expr,
    slice_expr,
    stack_expr,
)

PIECES = ("split", "unstack")  # tuple-valued ops the body takes (their elements by index)
REDUCE = {"reduce_sum": "{acc} + {x}", "reduce_max": "maximum({acc}, {x})",
          "reduce_min": "minimum({acc}, {x})"}
FLOATS = ("f32", "f64")
# the most a product hoisted out of a scan may hold (it is a temporary the size of the
# scanned input's rows times the product's width; a memory-limited program splits first)
HOIST_MAX_BYTES = 64 << 20


class Unsupported(Exception):
    """A body the scan generator does not take (the reason says which node)."""


def _tensor(t: Any) -> TensorType:
    if not isinstance(t, TensorType) or t.dtype not in FLOATS + ("i32", "i64", "pred"):
        raise Unsupported(f"value of type {t}")
    return t


def _all(rank: int) -> str:
    return ", ".join(f"i{d}" for d in range(rank))


def _alone(n: Node, g: Graph) -> Node:
    """`n` as a kernel of its own (a body of one node), for the kernel generator."""
    params = [Node(k, "parameter", (), Attrs({"index": k, "name": f"in{k}"}), g[i].type)
              for k, i in enumerate(n.inputs)]
    op = Node(len(params), n.op, tuple(range(len(params))), n.attrs, n.type, n.source)
    body = Graph([*params, op], range(len(params)), (op.id,), f"reduce_{n.id}")
    return Node(n.id, "kernel", n.inputs, Attrs({"body": body, "kind": "input"}), n.type,
                n.source)


def _dot(n: Node, a: str, b: str, g: Graph) -> str:
    (lc, rc), (lb, rb) = n.attrs["dimension_numbers"]
    lhs, rhs = g[n.inputs[0]].type, g[n.inputs[1]].type
    if not (lc or rc or lb or rb) and lhs.rank == rhs.rank == 1 and lhs.dtype in FLOATS:
        return f"np.outer({a}, {b})"  # the outer product of two vectors
    if lb or rb or len(lc) != 1 or len(rc) != 1 or lhs.rank > 2 or rhs.rank > 2 \
            or n.attrs.get("preferred_element_type") or lhs.dtype not in FLOATS:
        raise Unsupported(f"{n.describe()}: a dot numba's np.dot does not take")
    left = a if lhs.rank == 1 or lc[0] == 1 else f"{a}.T"
    right = b if rhs.rank == 1 or rc[0] == 0 else f"{b}.T"
    return f"np.dot({left}, {right})"


def hoisted(n: Node) -> dict[int, tuple[int, int]]:
    """The dots of scan `n`'s body that read a scanned input's row (as the left operand, its
    last axis contracted) and a constant (a matrix), so that one product over every step's
    rows gives them all: {dot's id in the body: (scanned input's index, constant's index)}."""
    a, body = n.attrs, n.attrs["body"]
    nc, nk = a["num_consts"], a["num_carry"]
    role = {p: k for k, p in enumerate(body.params)}
    found = {}
    for d in body.nodes:
        if d.op != "dot_general" or d.attrs.get("preferred_element_type"):
            continue
        (lc, rc), (lb, rb) = d.attrs["dimension_numbers"]
        x, w = body[d.inputs[0]], body[d.inputs[1]]
        k, j = role.get(x.id, -1), role.get(w.id, -1)
        if not (k >= nc + nk and 0 <= j < nc) or lb or rb or x.type.rank not in (1, 2) \
                or w.type.rank != 2 or tuple(lc) != (x.type.rank - 1,) or len(rc) != 1 \
                or x.type.dtype not in FLOATS or w.type.dtype != x.type.dtype:
            continue
        if a["length"] * d.type.size * dtypes.itemsize(d.type.dtype) <= HOIST_MAX_BYTES:
            found[d.id] = (k - nc - nk, j)
    return found


def deferred(n: Node) -> dict[int, tuple[int, int, int, int, bool]]:
    """The carries of scan `n` that only accumulate a product of the step's row of a scanned
    input and a step value, contracted over the row's first (batch) axis: an RNN gradient's
    dW += h_prev^T @ delta. Their sum over the steps is one product of every step's rows
    and every step's value, so the loop stacks the value and the product runs once after it:
    {carry index: (the add's id, the dot's id, the step value's id, the scanned input's index,
    whether the row is the dot's left operand)}."""
    a, body = n.attrs, n.attrs["body"]
    nc, nk = a["num_consts"], a["num_carry"]
    role = {p: k for k, p in enumerate(body.params)}
    users: dict[int, int] = {}
    for m in body.nodes:
        for i in m.inputs:
            users[i] = users.get(i, 0) + 1
    for o in body.outputs:
        users[o] = users.get(o, 0) + 1
    found: dict[int, tuple[int, int, int, int, bool]] = {}
    for k in range(nk):
        o, carry = body[body.outputs[k]], body.params[nc + k]
        if o.op not in ("add", "add_any") or carry not in o.inputs or users.get(carry) != 1 \
                or users.get(o.id) != 1 or o.inputs[0] == o.inputs[1]:
            continue
        d = body[o.inputs[1] if o.inputs[0] == carry else o.inputs[0]]
        if d.op != "dot_general" or users.get(d.id) != 1 or d.attrs.get("preferred_element_type"):
            continue
        (lc, rc), (lb, rb) = d.attrs["dimension_numbers"]
        lhs, rhs = body[d.inputs[0]], body[d.inputs[1]]
        left = role.get(lhs.id, -1) >= nc + nk
        row, value = (lhs, rhs) if left else (rhs, lhs)
        if role.get(row.id, -1) < nc + nk or lb or rb or tuple(lc) != (0,) or tuple(rc) != (0,) \
                or lhs.type.rank != 2 or rhs.type.rank != 2 or d.type.dtype not in FLOATS \
                or len({lhs.type.dtype, rhs.type.dtype, o.type.dtype}) != 1:
            continue
        if a["length"] * value.type.nbytes <= HOIST_MAX_BYTES:
            found[k] = (o.id, d.id, value.id, role[row.id] - nc - nk, left)
    return found


def hoisted_bytes(n: Node) -> int:
    """What scan `n`'s products before the loop and its values stacked for after it hold
    (the memory planner's workspace)."""
    body = n.attrs["body"]
    return (sum(n.attrs["length"] * body[d].type.nbytes for d in hoisted(n))
            + sum(n.attrs["length"] * body[v].type.nbytes
                  for v in {v for _, _, v, _, _ in deferred(n).values()}))


class _Body:
    def __init__(self, g: Graph, prefix: str, hoist: dict[int, str] | None = None,
                 skip: dict[int, str] | None = None) -> None:
        self.g, self.prefix = g, prefix
        self.hoist = hoist or {}  # dots computed before the loop: id -> the array's name
        self.skip = skip or {}  # nodes not computed in the loop: id -> what stands for them
        self.lines: list[str] = []
        self.kernels: list[str] = []  # kernel sources, renamed
        self.globals: dict[str, Any] = {}  # scalars, written into the module exactly
        self.arrays: dict[str, np.ndarray] = {}  # array constants, passed as arguments

    def emit(self, var: dict[int, str]) -> None:
        for n in self.g.nodes:
            if n.op == "parameter":
                continue
            if n.id in self.skip:
                var[n.id] = self.skip[n.id]
                continue
            if not (n.op in PIECES and isinstance(n.type, TupleType)):
                _tensor(n.type)  # (a 0-d value is a numba scalar throughout)
            target = f"v{self.prefix}{n.id}"
            ins = [var[i] for i in n.inputs]
            self.node(n, target, ins)
            var[n.id] = target

    def node(self, n: Node, target: str, ins: list[str]) -> None:
        w, t = self.lines.append, n.type
        row = OPS[n.op]
        if n.op == "kernel":
            self.kernel(n, target, ins)
        elif n.id in self.hoist:
            w(f"{target} = {self.hoist[n.id]}[i]  # its row of the product before the loop")
        elif n.op == "dot_general":
            try:
                w(f"{target} = {_dot(n, ins[0], ins[1], self.g)}")
            except Unsupported:
                lines = batched_dot_lines(n, target, ins[0], ins[1], self.g)
                if lines is None:
                    raise
                self.lines += lines
        elif n.op in PIECES:
            w(f"{target} = {pieces_expr(n, ins[0])}  # views; each taken contiguous")
        elif n.op == "get_tuple_element":
            if self.g[n.inputs[0]].op not in PIECES:
                raise Unsupported(f"{n.describe()}: an element of a {self.g[n.inputs[0]].op}")
            element = f"{ins[0]}[{n.attrs['index']}]"  # (a 0-d element is a numba scalar)
            w(f"{target} = {f'np.ascontiguousarray({element})' if t.rank else element}")
        elif n.op == "slice":
            w(f"{target} = {slice_expr(n, ins[0], self.g[n.inputs[0]].type)}")
        elif n.op == "pad" and t.rank:
            self.lines += pad_lines(n, target, ins[0], ins[1], self.g[n.inputs[0]].type)
        elif n.op == "concatenate" and t.rank:
            w(f"{target} = {concatenate_expr(n, ins)}")
        elif n.op == "stack" and all(self.g[i].type.rank for i in n.inputs):
            w(f"{target} = {stack_expr(n, ins)}")
        elif n.op == "constant" and t.rank == 0:
            name = f"s_{self.prefix}{n.id}_value"
            self.globals[name] = dtypes.to_numpy(t.dtype).type(n.attrs["value"].array.item())
            w(f"{target} = {name}")
        elif n.op == "constant":
            name = f"const_{self.prefix}{n.id}"
            self.arrays[name] = np.ascontiguousarray(n.attrs["value"].array,
                                                     dtypes.to_numpy(t.dtype))
            w(f"{target} = {name}")
        elif t.rank == 0 and n.op in ("reshape", "broadcast_in_dim"):  # a one-element array
            w(f"{target} = {ins[0]}.ravel()[0]")
        elif n.op in ("reshape", "broadcast_in_dim") and self.g[n.inputs[0]].type.rank == 0:
            w(f"{target} = np.full({t.shape}, {ins[0]}, {np_type(t.dtype)})")
        elif n.op == "broadcast_in_dim":
            # contiguous, so that the kernels reading it vectorize (a broadcast view's 'A'
            # layout cost a scan's tanh kernel 8x); one that only adds unit axes is a reshape
            src = self.g[n.inputs[0]].type
            if src.size == t.size:
                w(f"{target} = np.ascontiguousarray({ins[0]}).reshape({t.shape})")
            else:
                expr = row.program(ins, [src], t, n.attrs)
                w(f"{target} = np.ascontiguousarray({expr})")
        elif n.op in ("reshape", "transpose"):  # contiguous: numba reshapes only those
            expr = row.program(ins, [self.g[i].type for i in n.inputs], t, n.attrs)
            w(f"{target} = {f'np.ascontiguousarray({expr})' if n.op == 'transpose' else expr}")
        elif n.op in REDUCE and code_of((alone := _alone(n, self.g)).attrs["body"]) is not None:
            # as the kernel generator writes a reduction (vectorized, a wide accumulator):
            # a plain fold into the result ran one dependent add at a time (an RNN's row
            # sums took 40% of its scan)
            self.kernel(alone, target, ins)
        elif n.op in REDUCE:  # a loop over the input (numba's np.sum(axis=) is 5x slower)
            src = self.g[n.inputs[0]].type
            axes = set(n.attrs["axes"])
            kept = [d for d in range(src.rank) if d not in axes]
            monoid = row.monoid
            assert monoid is not None
            ident = f"s_{self.prefix}{n.id}_identity"
            self.globals[ident] = dtypes.to_numpy(t.dtype).type(monoid.identity_value(t.dtype))
            acc = f"{target}[{', '.join(f'i{d}' for d in kept)}]" if kept else target
            fold = REDUCE[n.op].format(acc=acc, x=f"{ins[0]}[{_all(src.rank)}]")
            w(f"{target} = np.full({t.shape}, {ident}, {np_type(t.dtype)})" if kept
              else f"{target} = {ident}")
            self.nest(src.shape, f"{acc} = {np_type(t.dtype)}({fold})")
        elif row.kind == OpKind.ELEMENTWISE:
            index = [broadcast_index(self.g[i].type.shape, t.shape) for i in n.inputs]
            if any(ix is None and self.g[i].type.rank for ix, i in zip(index, n.inputs)):
                raise Unsupported(f"{n.describe()}: an elementwise op on broadcast shapes")
            ix = _all(t.rank)
            expr = NUMBA.scalar_form(self.g, n)([f"{x}[{j}]" if self.g[i].type.rank else x
                                                 for x, i, j in zip(ins, n.inputs, index)], n)
            if t.rank == 0:
                w(f"{target} = {np_type(t.dtype)}({expr})")
            else:
                w(f"{target} = np.empty({t.shape}, {np_type(t.dtype)})")
                self.nest(t.shape, f"{target}[{ix}] = {np_type(t.dtype)}({expr})")
        else:
            raise Unsupported(f"{n.describe()}: {n.op} inside a compiled scan")

    def nest(self, shape: Sequence[int], statement: str) -> None:
        """A loop nest over `shape` (indices i0, i1, ...) around one statement."""
        for d, size in enumerate(shape):
            self.lines.append("    " * d + f"for i{d} in range({size}):")
        self.lines.append("    " * len(shape) + statement)

    def kernel(self, n: Node, target: str, ins: list[str]) -> None:
        body = n.attrs["body"]
        code = code_of(body)  # (the same cached code the program's kernels run)
        if code is None:
            raise Unsupported(f"{n.describe()}: a kernel the generator cannot write")
        plan = plan_any(body)
        if code.parallel or code.chunks:
            raise Unsupported(f"{n.describe()}: a parallel kernel")
        fn = f"kernel_{self.prefix}{n.id}"
        self.kernels.append(code.source.replace(f"def {KERNEL}(", f"def {fn}(")
                            .replace("cache=True", "cache=False"))
        w = self.lines.append
        out_t = plan.output.type
        ins = [f"np.full(1, {x})" if self.g[i].type.rank == 0 else x
               for x, i in zip(ins, n.inputs)]
        scalar_out = out_t.rank == 0
        buffer = f"{target}_out" if scalar_out else target
        w(f"{buffer} = np.empty({out_t.shape or (1,)}, {np_type(out_t.dtype)})")
        extra = []
        if code.red is not None:
            assert isinstance(plan, KernelPlan) and plan.reduce is not None
            _, acc, identity = accumulator(plan.reduce)
            ident = f"s_{self.prefix}{n.id}_identity"
            self.globals[ident] = dtypes.to_numpy(acc).type(identity)
            if code.red == "out":
                w(f"{buffer}[...] = {ident}")
            else:
                extra.append(f"np.full({plan.out_shape or (1,)}, {ident}, {np_type(acc)})")
        scalars = []
        for name, value in code.scalars:
            g = f"s_{self.prefix}{n.id}_{name}"
            self.globals[g] = value
            scalars.append(g)
        w(f"{fn}({', '.join([*ins, *extra, buffer, *scalars])})")
        if scalar_out:
            w(f"{target} = {buffer}[0]")


def generate_scan(n: Node, prefix: str) -> tuple[str, dict[str, Any], dict[str, np.ndarray]]:
    """The module source of scan `n`'s loop function `kernel`, the scalars it defines, and
    the array constants it takes as its last arguments."""
    a, body = n.attrs, n.attrs["body"]
    nc, nk = a["num_consts"], a["num_carry"]
    params = body.param_nodes
    for p in params:
        _tensor(p.type)
    nx = len(params) - nc - nk
    outs = [body[o] for o in body.outputs]
    for o in outs:
        _tensor(o.type)
    consts = [f"c{k}" for k in range(nc)]
    inits = [f"h{k}" for k in range(nk)]
    xs = [f"x{k}" for k in range(nx)]
    ys = [f"y{k}" for k in range(len(outs) - nk)]
    lifted, later = hoisted(n), deferred(n)
    skip = {i: f"carry{k}" for k, (o, d, _, _, _) in later.items() for i in (o, d)}
    b = _Body(body, prefix, {d: f"hoisted{prefix}{d}" for d in lifted}, skip)
    inner = [f"{c}_value" if p.type.rank == 0 else c for c, p in zip(consts, params)]
    var = {p.id: name for p, name in zip(params, [*inner, *(f"carry{k}" for k in range(nk)),
                                                  *(f"row{k}" for k in range(nx))])}
    b.emit(var)
    lines = ["@njit(error_model='numpy', cache=False)",
             f"def {KERNEL}({', '.join([*consts, *inits, *xs, *ys, 'length', 'reverse', *b.arrays])}):"]
    carried = [body[p].type for p in body.params[nc:nc + nk]]
    lines += _state_in(inits, carried, "carry")
    const_types = [body[p].type for p in body.params[:nc]]
    lines += [f"    c{k}_value = c{k}[()]" for k, t in enumerate(const_types) if t.rank == 0]
    for d, (k, j) in lifted.items():  # x @ W for every step at once
        dot, row = body[d], body[body.params[nc + nk + k]].type
        flat = f"np.ascontiguousarray(x{k}).reshape((length * {row.size // row.shape[-1]}, "\
               f"{row.shape[-1]}))"
        shape = ", ".join(map(str, dot.type.shape))
        lines += [f"    # %{d}, {dot.op} of the step's row of x{k} and c{j}, reads no carry: "
                  "one product over all steps",
                  f"    hoisted{prefix}{d} = {_dot(dot, flat, f'c{j}', body)}"
                  f".reshape((length, {shape}))"]
    stacked = sorted({v for _, _, v, _, _ in later.values()})  # (one buffer per value)
    for k, (_, d, v, r, _) in later.items():
        lines.append(f"    # carry {k} only adds %{d}, a product of the step's row of x{r} and "
                     f"%{v}: %{v} is stacked, and one product after the loop sums them")
    for v in stacked:  # each step's value, kept for after the loop
        t = body[v].type
        lines.append(f"    stacked{prefix}{v} = np.empty((length, {', '.join(map(str, t.shape))}), "
                     f"{np_type(t.dtype)})")
    lines += ["    for step in range(length):",
              "        i = length - 1 - step if reverse else step"]
    lines += [f"        row{k} = x{k}[i]" for k in range(nx)]
    lines += [f"        {x}" for x in b.lines]
    lines += [f"        stacked{prefix}{v}[i] = {var[v]}" for v in stacked]
    new = [var[o] for o in body.outputs]
    lines += [f"        y{k}[i] = {v}" for k, v in enumerate(new[nk:])]
    lines += _state_next(new[:nk], carried, "carry", "        ")
    for k, (_, _, v, r, left) in later.items():
        rows = body[body.params[nc + nk + r]].type
        xf = f"np.ascontiguousarray(x{r}).reshape((length * {rows.shape[0]}, {rows.shape[1]}))"
        vt = body[v].type
        vf = f"stacked{prefix}{v}.reshape((length * {vt.shape[0]}, {vt.shape[1]}))"
        product = f"np.dot({xf}.T, {vf})" if left else f"np.dot({vf}.T, {xf})"
        lines.append(f"    carry{k} = np.ascontiguousarray(carry{k} + {product})")
    lines += [f"    return ({''.join(f'carry{k}, ' for k in range(nk))})"]
    source = "\n\n".join([*b.kernels, "\n".join(lines)]) + "\n"
    return source, b.globals, b.arrays


def _state_in(names: Sequence[str], types: Sequence[Any], into: str) -> list[str]:
    """Loop state from the arguments: 0-d arrays as scalars, arrays contiguous."""
    return [f"    {into}{k} = {x}[()]" if t.rank == 0 else f"    {into}{k} = np.ascontiguousarray({x})"
            for k, (x, t) in enumerate(zip(names, types))]


def _state_next(values: Sequence[str], types: Sequence[Any], into: str, indent: str) -> list[str]:
    return [f"{indent}{into}{k} = {np_type(t.dtype)}({v})" if t.rank == 0
            else f"{indent}{into}{k} = np.ascontiguousarray({v})"
            for k, (v, t) in enumerate(zip(values, types))]


def generate_while(n: Node, prefix: str) -> tuple[str, dict[str, Any], dict[str, np.ndarray]]:
    """A `while` as one numba function: its condition and body written inline, the loop
    state as local arrays and scalars (as generate_scan)."""
    cond, body = n.attrs["cond"], n.attrs["body"]
    types = [p.type for p in body.param_nodes]
    for t in types:
        _tensor(t)
    c, b = _Body(cond, "c_"), _Body(body, "b_")
    state = [f"state{k}" for k in range(len(types))]
    cvar = {p.id: s for p, s in zip(cond.param_nodes, state)}
    bvar = {p.id: s for p, s in zip(body.param_nodes, state)}
    c.emit(cvar)
    b.emit(bvar)
    (test,) = [cvar[o] for o in cond.outputs]
    if cond[cond.outputs[0]].type.rank != 0:
        raise Unsupported("a while condition that is not a scalar")
    arrays = {**c.arrays, **b.arrays}
    ins = [f"s{k}" for k in range(len(types))]
    lines = ["@njit(error_model='numpy', cache=False)",
             f"def {KERNEL}({', '.join([*ins, *arrays])}):"]
    lines += _state_in(ins, types, "state")
    lines += ["    while True:"]
    lines += [f"        {x}" for x in c.lines]
    lines += [f"        if not {test}:", "            break"]
    lines += [f"        {x}" for x in b.lines]
    lines += _state_next([bvar[o] for o in body.outputs], types, "state", "        ")
    lines += [f"    return ({''.join(f'{s}, ' for s in state)})"]
    source = "\n\n".join([*c.kernels, *b.kernels, "\n".join(lines)]) + "\n"
    return source, {**c.globals, **b.globals}, arrays


# A body doing this many FLOPs a step runs per iteration where numba has threads: the
# program's lines then call threaded BLAS and parallel kernels, and a step's Python (tens of
# microseconds) is small beside its work. Quiet 2-core EPYC, bench.models: the LSTM gradient
# (128 steps of 32x64 @ 64x1024 and 32x256 @ 256x1024 forward, ~21 MFLOP; more backward) took
# 1.91x jax.jit compiled whole against 1.23x per iteration, the scan-stacked LLaMA gradient
# (4 steps of ~0.8 GFLOP) 1.83x against 0.84x; the RNN gradient (~1.6 MFLOP a step) runs
# better compiled (0.74x).
STEP_FLOPS = 8_000_000


class CompiledControlFlow:
    """A scan or while node compiled whole, called as the program's driver is:
    (vals) -> results; `fallback` (the per-iteration Python driver) where numba fails."""

    def __init__(self, n: Node, name: str) -> None:
        self.node, self.name = n, name
        self.reason = ""
        self.fn: Callable[..., Any] | None = None
        self.fallback: Callable[[Sequence[Any]], Any] | None = None  # the per-iteration body
        self.seconds = 0.0
        self.arrays: dict[str, np.ndarray] = {}
        generator = generate_scan if n.op == "scan" else generate_while
        step = sum(node_flops(n.attrs["body"], m) for m in n.attrs["body"].nodes)
        if step >= STEP_FLOPS and threads() > 1:
            self.reason, self.code = (
                f"each step does {step / 1e6:,.0f} MFLOP, enough for BLAS's threads and the "
                f"parallel kernels, which one compiled body (on one thread) would give up"), None
            return
        try:
            source, scalars, self.arrays = generator(n, "")
        except Unsupported as e:
            self.reason, self.code = str(e), None
            return
        self.code = CpuKernelCode(name, _globals_source(scalars) + source, False, None, None,
                                  0, ())
        try:
            self.fn = load(self.code)
        except (PlanError, ImportError) as e:
            self.reason = str(e)

    @property
    def ok(self) -> bool:
        return self.fn is not None

    @property
    def source(self) -> str:
        if self.code is None:
            return f"# the {self.node.op}'s body runs per iteration: {self.reason}\n"
        return f"# {self.name}: the whole {self.node.op}, one numba function\n{self.code.source}"

    def __call__(self, vals: Sequence[np.ndarray]) -> Any:
        t0 = time.perf_counter()
        try:
            if self.fn is None:
                assert self.fallback is not None
                return self.fallback(vals)
            return self._launch(vals)
        finally:
            self.seconds += time.perf_counter() - t0

    def _launch(self, vals: Sequence[np.ndarray]) -> Any:
        a, n = self.node.attrs, self.node
        types = n.type.elements if isinstance(n.type, TupleType) else (n.type,)
        nk = a["num_carry"] if n.op == "scan" else len(types)
        ys = [np.empty(t.shape, dtypes.to_numpy(t.dtype)) for t in types[nk:]]
        loop = (a["length"], a["reverse"]) if n.op == "scan" else ()
        try:
            carries = self.fn(*vals, *ys, *loop, *self.arrays.values())  # type: ignore[misc]
        except Exception as e:  # numba could not type it: per iteration from now on, and why
            if not type(e).__module__.startswith("numba") or self.fallback is None:
                raise
            lines = [x for x in str(e).splitlines() if x.strip()]
            self.fn = None
            self.reason = f"numba: {' / '.join(lines[:3])} (compiling {self.node.describe()})"
            return self.fallback(vals)
        carries = [np.asarray(c, dtypes.to_numpy(t.dtype)) for c, t in zip(carries, types)]
        return one_or_tuple([*carries, *ys])


def _globals_source(values: dict[str, Any]) -> str:
    """Module-level definitions of the loop's constants, exact (floats through their hex)."""
    lines = []
    for name, v in values.items():
        if isinstance(v, np.ndarray):
            flat = ", ".join(_scalar(x, v.dtype) for x in v.ravel())
            lines.append(f"{name} = np.array([{flat}], np.{v.dtype.name}).reshape({v.shape})")
        else:
            lines.append(f"{name} = {_scalar(v, np.asarray(v).dtype)}")
    return "\n".join(lines) + "\n\n"


def _scalar(x: Any, dtype: np.dtype) -> str:
    if np.issubdtype(dtype, np.floating):
        return f"np.{dtype.name}(float.fromhex({float(x).hex()!r}))"
    if dtype == np.bool_:
        return repr(bool(x))
    return f"np.{dtype.name}({int(x)})"
