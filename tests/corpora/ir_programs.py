"""A hypothesis strategy for random programs, built straight in the IR (no JAX tracing).

Programs mix elementwise ops, broadcasts, reductions, reshapes, transposes, conversions and
dot products over f32, f64 and i32 values of small shapes, size-1 and empty dimensions
included; and they plant the motifs our passes look for (identities, x**2, double negation,
constant expressions, duplicate ops, matrix chains, broadcast-multiply-reduce, the naive
Euclidean distance), so every pass gets something to do. `programs()` draws a Graph: the
property tests (test_properties.py), the fuse pass's and the backends' random-program tests.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from explorer.ir import Graph, GraphBuilder, TensorType
from explorer.ir.ops import OpError

DTYPES = ("f32", "f32", "f64", "i32")
DIMS = st.sampled_from((1, 2, 3, 0, 4, 1, 2))
SCALARS = (0.0, -0.0, 1.0, -1.0, 2.0, 0.5)

Draw = Callable[..., object]


class _Program:
    """A builder plus the pool of values the next op may read."""

    def __init__(self, draw: Draw) -> None:
        self.draw = draw
        self.b = GraphBuilder("prog")
        self.pool: list[int] = []

    def t(self, i: int) -> TensorType:
        t = self.b.type_of(i)
        assert isinstance(t, TensorType)
        return t

    def param(self, shape: tuple[int, ...], dtype: str) -> int:
        return self.b.param(TensorType(shape, dtype))

    def add(self, op: str, inputs: list[int], attrs: dict | None = None) -> int:
        return self.b.add(op, inputs, attrs or {})

    def pick(self, where: Callable[[TensorType], bool] = lambda t: True) -> int | None:
        options = [i for i in self.pool if where(self.t(i))]
        return self.draw(st.sampled_from(options)) if options else None

    def scalar(self, dtype: str) -> int:
        v = self.draw(st.sampled_from(SCALARS))
        return self.b.constant(int(v) if dtype == "i32" else v, dtype)

    def shape(self, rank: int | None = None) -> tuple[int, ...]:
        r = self.draw(st.integers(0, 3)) if rank is None else rank
        return tuple(self.draw(DIMS) for _ in range(r))


def _float(t: TensorType) -> bool:
    return t.dtype[0] == "f"


def _unary(p: _Program, x: int) -> int:
    t = p.t(x)
    ops = ["neg", "abs", "sign", "square"] + (["tanh", "floor"] if _float(t) else [])
    op = p.draw(st.sampled_from(ops + ["integer_pow"]))
    if op == "integer_pow":
        return p.add(op, [x], {"y": p.draw(st.sampled_from((1, 2, 3)))})
    return p.add(op, [x])


def _neg_neg(p: _Program, x: int) -> int:
    return p.add("neg", [p.add("neg", [x])])


def _binary(p: _Program, x: int) -> int:
    t = p.t(x)
    y = p.pick(lambda u: u == t) if p.draw(st.booleans()) else None
    if y is None:
        y = p.scalar(t.dtype)
        if p.draw(st.booleans()) and t.rank:
            y = p.add("broadcast_in_dim", [y], {"shape": t.shape, "broadcast_dimensions": ()})
    a, b = (x, y) if p.draw(st.booleans()) else (y, x)
    return p.add(p.draw(st.sampled_from(("add", "sub", "mul", "max", "min"))), [a, b])


def _broadcast(p: _Program, x: int) -> int:
    t = p.t(x)
    pos = p.draw(st.integers(0, t.rank))
    shape = list(d if d != 1 or not p.draw(st.booleans()) else p.draw(DIMS) for d in t.shape)
    shape.insert(pos, p.draw(DIMS))
    dims = tuple(k if k < pos else k + 1 for k in range(t.rank))
    return p.add("broadcast_in_dim", [x], {"shape": tuple(shape), "broadcast_dimensions": dims})


def _reduce(p: _Program, x: int) -> int | None:
    t = p.t(x)
    if t.rank == 0:
        return None
    axes = tuple(sorted(p.draw(st.sets(st.integers(0, t.rank - 1), min_size=1))))
    empty = any(t.shape[a] == 0 for a in axes)
    op = "reduce_sum" if empty else p.draw(st.sampled_from(("reduce_sum", "reduce_max")))
    return p.add(op, [x], {"axes": axes})


def _reshape(p: _Program, x: int) -> int:
    t = p.t(x)
    kind = p.draw(st.sampled_from(("flat", "lead1", "twice", "same")))
    if kind == "flat":
        return p.add("reshape", [x], {"new_sizes": (t.size,)})
    if kind == "lead1":
        return p.add("reshape", [x], {"new_sizes": (1, *t.shape)})
    if kind == "twice":
        mid = p.add("reshape", [x], {"new_sizes": (t.size,)})
        return p.add("reshape", [mid], {"new_sizes": (*t.shape, 1)})
    return p.add("reshape", [x], {"new_sizes": t.shape})


def _transpose(p: _Program, x: int) -> int | None:
    t = p.t(x)
    perm = tuple(p.draw(st.permutations(range(t.rank))))
    return p.add("transpose", [x], {"permutation": perm})


def _convert(p: _Program, x: int) -> int:
    return p.add("convert_element_type", [x],
                 {"new_dtype": p.draw(st.sampled_from(("f32", "f64", "i32")))})


def _dot(p: _Program, x: int) -> int | None:
    """x (rank 1 or 2) times a new matrix or vector, sometimes through transposes."""
    t = p.t(x)
    if t.rank not in (1, 2):
        return None
    k = t.shape[-1]
    rhs_shape = (k, p.draw(DIMS)) if p.draw(st.booleans()) else (k,)
    if len(rhs_shape) == 2 and p.draw(st.booleans()):  # read y through a transpose
        y = p.add("transpose", [p.param(rhs_shape[::-1], t.dtype)], {"permutation": (1, 0)})
    else:
        y = p.param(rhs_shape, t.dtype)
    dims = (((t.rank - 1,), (0,)), ((), ()))
    return p.add("dot_general", [x, y], {"dimension_numbers": dims})


def _chain(p: _Program, x: int) -> int:
    """(A @ B) @ v with fresh parameters: seed 000's matrix chain."""
    dt = p.t(x).dtype
    n, m, d = (p.draw(DIMS) for _ in range(3))
    dims = (((1,), (0,)), ((), ()))
    a, b = p.param((n, m), dt), p.param((m, d), dt)
    ab = p.add("dot_general", [a, b], {"dimension_numbers": dims})
    return p.add("dot_general", [ab, p.param((d,), dt)], {"dimension_numbers": dims})


def _gemm2(p: _Program, x: int) -> int:
    """reduce_sum(broadcast(A) * broadcast(B), k): seed 002's matrix product in disguise."""
    dt = p.t(x).dtype
    m, k, n = (p.draw(DIMS) for _ in range(3))
    a = p.add("broadcast_in_dim", [p.param((m, k), dt)],
              {"shape": (m, k, n), "broadcast_dimensions": (0, 1)})
    b = p.add("broadcast_in_dim", [p.param((k, n), dt)],
              {"shape": (m, k, n), "broadcast_dimensions": (1, 2)})
    return p.add("reduce_sum", [p.add("mul", [a, b])], {"axes": (1,)})


def _euclid(p: _Program, x: int) -> int:
    """sum((a[:, None, :] - b[None, :, :]) ** 2, -1): seed 000's naive distance."""
    dt = p.t(x).dtype
    m, n, d = (p.draw(DIMS) for _ in range(3))
    a = p.add("broadcast_in_dim", [p.param((m, d), dt)],
              {"shape": (m, 1, d), "broadcast_dimensions": (0, 2)})
    b = p.add("broadcast_in_dim", [p.param((n, d), dt)],
              {"shape": (1, n, d), "broadcast_dimensions": (1, 2)})
    sq = p.add("integer_pow", [p.add("sub", [a, b])], {"y": 2})
    return p.add("reduce_sum", [sq], {"axes": (2,)})


def _constants(p: _Program, x: int) -> int:
    dt = p.t(x).dtype
    c = p.add(p.draw(st.sampled_from(("add", "mul", "sub"))), [p.scalar(dt), p.scalar(dt)])
    return p.add("mul", [x, c])


def _duplicate(p: _Program, x: int) -> int:
    return p.add("add", [p.add("neg", [x]), p.add("neg", [x])])


STEPS = {"unary": _unary, "neg_neg": _neg_neg, "binary": _binary, "broadcast": _broadcast,
         "reduce": _reduce, "reshape": _reshape, "transpose": _transpose, "convert": _convert,
         "dot": _dot, "chain": _chain, "gemm2": _gemm2, "euclid": _euclid,
         "constants": _constants, "duplicate": _duplicate}


@st.composite
def programs(draw: Draw, max_steps: int = 8, max_size: int = 256) -> Graph:
    p = _Program(draw)
    for _ in range(draw(st.integers(1, 2))):
        p.pool.append(p.param(p.shape(), draw(st.sampled_from(DTYPES))))
    for _ in range(draw(st.integers(1, max_steps))):
        step = STEPS[draw(st.sampled_from(sorted(STEPS)))]
        x = draw(st.sampled_from(p.pool))
        try:
            out = step(p, x)
        except OpError:  # a combination the op table rejects: skip this step
            continue
        if out is not None and p.t(out).size <= max_size:
            p.pool.append(out)
    outs = list(dict.fromkeys([p.pool[-1], draw(st.sampled_from(p.pool))]))
    return p.b.build(outs)
