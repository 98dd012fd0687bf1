"""The differential fuzz: random JAX programs through every stage of the default pipeline and
every available backend, compared with JAX eager; plus mutated HLO dumps through the pipeline
and every backend, compared with the reference interpreter on the imported graph.

A program is Python source (`Program.source`), generated from one seed: elementwise ops,
broadcasting, reductions, dots, distances (self-distances too), softmax, logsumexp, argmax,
top_k and conversions over f32 and i32, its inputs salted with special values (nan, +-inf,
-0.0, 100.0, the i32 extremes), and sometimes a memory limit. With `x64=True` the same
program is written over f64 and i64 (the i64 extremes for the i32 ones) and checked under
`jax.enable_x64(True)`, where JAX's promotion rules, index types and literals differ. For each
program:

  - `gx.explore(fn, *args, memory_limit=...)` runs; an infeasible limit must raise
    InfeasibleMemoryLimit, and the limit it names must then explore and run within it;
  - every stage prints, parses back (`gx.parse(str(graph))`) to an equal graph and verifies;
  - the parsed graph of every distinct stage runs on the reference interpreter, and the traced
    and final stages (every distinct stage with `every_stage=True`) on every available
    backend (`registry.sweep()`: not dask, which starts a cluster); outputs are compared with
    `fn(*args)` under JAX eager: same shapes and dtypes, NaN and +-inf at the same places,
    finite values within measure.TOLERANCE relative to the output's magnitude, integers exact.

A mismatch or crash is a `Finding` whose `report()` is a self-contained reproducer. `fuzz()`
runs a batch and returns a `Summary`, whose line says programs, mismatches by backend, crashes
and peak RSS (at the start and the end). tests/test_differential.py runs a few hundred
programs in each mode; `make fuzz` (GAMBIT_FUZZ=full) 10,000 in each. By hand:
`python -m tests.corpora.fuzz_programs 10000 [first_seed] [--x64]`.
"""

from __future__ import annotations

import ctypes
import gc
import random
import resource
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.backends import registry
from explorer.backends.reference import NumpyInterpreter
from explorer.ir import OpError, dtypes
from explorer.ir.graph import Attrs, Node, TensorType
from explorer.measure.closeness import TOLERANCE
from explorer.passes.pipeline import resolve, run_pipeline
from explorer.passes.split import InfeasibleMemoryLimit
from tests.corpora.hlo_mutations import mutated_dumps

I32 = np.iinfo(np.int32)
I64 = np.iinfo(np.int64)
FLOAT_SPECIALS = (np.nan, np.inf, -np.inf, -0.0, 0.0, 100.0)
INT_SPECIALS = (I32.min, I32.max, 0, -1)
LIMITS = (None, None, None, 24 * 1024, 48 * 1024, 96 * 1024, 256 * 1024)
DIMS = (1, 2, 3, 5, 8, 17, 32, 64)


# ---------------------------------------------------------------- programs


@dataclass
class Program:
    seed: int
    source: str  # `def prog(x0, ...)`, using jnp, jax and lax
    args: tuple[np.ndarray, ...]
    memory_limit: int | None = None
    shape_seed: int | None = None  # make_program's: sizes and values from their own seed
    x64: bool = False  # written over f64 and i64, checked under jax.enable_x64(True)

    def fn(self) -> Callable[..., Any]:
        namespace: dict[str, Any] = {"jnp": jnp, "jax": jax, "lax": jax.lax}
        exec(compile(self.source, f"<fuzz program {self.seed}>", "exec"), namespace)
        return namespace["prog"]

    def __str__(self) -> str:
        """A reproducer: the source, then the arguments (small ones written out, larger ones
        as `make_program(seed).args` with their special values listed)."""
        call = f"{self.seed}" + (f", {self.shape_seed}" if self.shape_seed is not None else "") \
            + (", x64=True" if self.x64 else "")
        lines = [f"# make_program({call}), memory_limit={self.memory_limit}"
                 + (", under jax.enable_x64(True)" if self.x64 else ""), self.source.rstrip()]
        for k, a in enumerate(self.args):
            if a.size <= 8:
                lines.append(f"x{k} = np.array({a.tolist()!r}, np.{a.dtype})")
                continue
            ints = I64 if a.dtype == np.int64 else I32
            special = ~np.isfinite(a) | (a == 100) | (np.signbit(a) & (a == 0)) \
                if a.dtype.kind == "f" else (a == ints.min) | (a == ints.max)
            at = {tuple(int(i) for i in ix): a[tuple(ix)].item() for ix in np.argwhere(special)[:6]}
            lines.append(f"x{k} = make_program({call}).args[{k}]  # {a.dtype}{list(a.shape)}"
                         + (f", special values {at}" if at else ""))
        return "\n".join(lines) + "\n"


# An upstream divergence the generator steers clear of: XLA on CPU (JAX eager and jit alike)
# drops NaN from a max or min reduction of a float array of 4096 or more elements, over any
# axis, where NumPy and our backends keep it (tests/test_differential.py pins it, so the test
# says when XLA fixes it). Programs reduce such arrays with a sum instead.
XLA_NAN_DROPPING_SIZE = 4096


def _xla_drops_nan(shape: tuple[int, ...]) -> bool:
    return int(np.prod(shape)) >= XLA_NAN_DROPPING_SIZE


@dataclass(frozen=True)
class _Value:
    name: str
    shape: tuple[int, ...]
    dtype: str  # "f32" or "i32"


class _Gen:
    """Writes one program: a pool of values, each step reading some and adding one."""

    def __init__(self, seed: int, shape_seed: int | None = None) -> None:
        self.shape_seed = shape_seed
        self.r = random.Random(seed)
        # sizes and argument values: from the same stream as the structure, or from their own
        self.s = self.r if shape_seed is None else random.Random(shape_seed)
        self.np = np.random.default_rng(seed if shape_seed is None else shape_seed)
        self.lines: list[str] = []
        self.params: list[_Value] = []
        self.args: list[np.ndarray] = []
        self.pool: list[_Value] = []

    def param(self, shape: tuple[int, ...], dtype: str) -> _Value:
        v = _Value(f"x{len(self.params)}", shape, dtype)
        self.params.append(v)
        self.args.append(self.sample(shape, dtype))
        return v

    def sample(self, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        if dtype == "i32":
            a = self.np.integers(-5, 6, size=shape).astype(np.int32)
            specials: Sequence[Any] = INT_SPECIALS
        else:
            a = (self.np.standard_normal(shape) * self.s.choice((1.0, 1.0, 4.0))).astype(np.float32)
            specials = FLOAT_SPECIALS
        if a.size and self.s.random() < 0.4:
            flat = a.reshape(-1)
            for _ in range(self.s.randint(1, max(1, flat.size // 8))):
                flat[self.s.randrange(flat.size)] = self.s.choice(specials)
        return a

    def emit(self, expr: str, shape: tuple[int, ...], dtype: str) -> _Value:
        v = _Value(f"v{len(self.lines)}", shape, dtype)
        self.lines.append(f"    {v.name} = {expr}")
        self.pool.append(v)
        return v

    def pick(self, where: Callable[[_Value], bool] = lambda v: True) -> _Value | None:
        options = [v for v in self.pool if where(v)]
        return self.r.choice(options) if options else None

    def dim(self) -> int:
        return self.s.choice(DIMS)

    # ------------------------------------------------------------ steps

    def unary(self, x: _Value) -> _Value:
        if x.dtype == "i32":
            f = self.r.choice(("-{}", "jnp.abs({})", "{} * {}", "{} + 7", "jnp.maximum({}, 0)"))
            return self.emit(f.format(x.name, x.name), x.shape, "i32")
        f = self.r.choice(("jnp.exp({})", "jnp.log({})", "jnp.tanh({})", "jnp.sqrt({})",
                           "jnp.abs({})", "-{}", "{} * {}", "jax.nn.sigmoid({})",
                           "jnp.log(jnp.exp({}))", "jnp.floor({})", "jnp.sin({})",
                           "jnp.expm1({})", "jnp.log1p({})", "jax.nn.relu({})"))
        return self.emit(f.format(x.name, x.name), x.shape, "f32")

    def binary(self, x: _Value) -> _Value:
        ops = ("+", "-", "*", "max", "min") + (("/", "where") if x.dtype == "f32" else ())
        op = self.r.choice(ops)
        kind = self.r.choice(("same", "scalar", "row", "col", "keepdims"))
        y = self.pick(lambda v: v.shape == x.shape and v.dtype == x.dtype and v != x)
        if kind == "scalar" or (kind == "same" and y is None):
            c = self.r.choice((0.0, -0.0, 1.0, 2.0, -3.0, 0.5) if x.dtype == "f32" else
                              (0, 1, -1, 3, int(I32.max)))
            rhs = f"jnp.{'float32' if x.dtype == 'f32' else 'int32'}({c!r})"
        elif kind in ("row", "col") and len(x.shape) == 2:
            axis = 1 if kind == "row" else 0
            p = self.param((x.shape[axis],), x.dtype)
            rhs = p.name if kind == "row" else f"{p.name}[:, None]"
        elif kind == "keepdims" and x.shape:
            axis = self.r.randrange(len(x.shape))
            red = "sum" if x.dtype == "f32" and _xla_drops_nan(x.shape) else "max"
            rhs = f"jnp.{red}({x.name}, axis={axis}, keepdims=True)"
        else:
            rhs = y.name if y is not None else self.param(x.shape, x.dtype).name
        a, b = (x.name, rhs) if self.r.random() < 0.7 else (rhs, x.name)
        if op in ("max", "min"):
            expr = f"jnp.{op}imum({a}, {b})"
        elif op == "where":
            expr = f"jnp.where({a} > {b}, {a}, {b})"
        else:
            expr = f"{a} {op} {b}"
        return self.emit(expr, x.shape, x.dtype)

    def reduce(self, x: _Value) -> _Value | None:
        if not x.shape:
            return None
        axis = self.r.randrange(len(x.shape))
        op = self.r.choice(("sum", "max", "min", "mean") if x.dtype == "f32" else ("sum", "max"))
        if op in ("max", "min") and x.dtype == "f32" and _xla_drops_nan(x.shape):
            op = "sum"
        keep = self.r.random() < 0.3
        shape = tuple(1 if k == axis else d for k, d in enumerate(x.shape)) if keep else \
            x.shape[:axis] + x.shape[axis + 1:]
        return self.emit(f"jnp.{op}({x.name}, axis={axis}{', keepdims=True' if keep else ''})",
                         shape, x.dtype)

    def dot(self, x: _Value) -> _Value | None:
        if x.dtype != "f32" or len(x.shape) not in (1, 2):
            return None
        k = x.shape[-1]
        if self.r.random() < 0.5:
            y = self.param((k,), "f32")
            return self.emit(f"{x.name} @ {y.name}", x.shape[:-1], "f32")
        m = self.dim()
        if self.r.random() < 0.5:
            y = self.param((m, k), "f32")
            return self.emit(f"{x.name} @ {y.name}.T", (*x.shape[:-1], m), "f32")
        y = self.param((k, m), "f32")
        return self.emit(f"{x.name} @ {y.name}", (*x.shape[:-1], m), "f32")

    def distance(self, x: _Value) -> _Value | None:
        if x.dtype != "f32" or len(x.shape) != 2:
            return None
        y = x if self.r.random() < 0.3 else self.param((self.dim(), x.shape[1]), "f32")
        d = f"jnp.sum(({x.name}[:, None, :] - {y.name}[None, :, :]) ** 2, -1)"
        if self.r.random() < 0.4:
            d = f"jnp.sqrt({d})"
        return self.emit(d, (x.shape[0], y.shape[0]), "f32")

    def softmax(self, x: _Value) -> _Value | None:
        if x.dtype != "f32" or not x.shape:
            return None
        axis = self.r.randrange(len(x.shape))
        if self.r.random() < 0.5:
            return self.emit(f"jax.nn.softmax({x.name}, axis={axis})", x.shape, "f32")
        return self.emit(f"jax.nn.logsumexp({x.name}, axis={axis})",
                         x.shape[:axis] + x.shape[axis + 1:], "f32")

    def argmax(self, x: _Value) -> _Value | None:
        if not x.shape:
            return None
        axis = self.r.randrange(len(x.shape))
        op = self.r.choice(("argmax", "argmin"))
        return self.emit(f"jnp.{op}({x.name}, axis={axis})", x.shape[:axis] + x.shape[axis + 1:],
                         "i32")

    def top_k(self, x: _Value) -> _Value | None:
        if not x.shape:
            return None
        k = self.s.randint(1, min(4, x.shape[-1]))
        which = self.r.randrange(2)
        return self.emit(f"lax.top_k({x.name}, {k})[{which}]", (*x.shape[:-1], k),
                         "f32" if which == 0 and x.dtype == "f32" else "i32"
                         if which == 1 else x.dtype)

    def convert(self, x: _Value) -> _Value:
        if x.dtype == "f32":
            return self.emit(f"{x.name}.astype(jnp.int32)", x.shape, "i32")
        return self.emit(f"{x.name}.astype(jnp.float32)", x.shape, "f32")

    STEPS = ("unary", "unary", "binary", "binary", "reduce", "dot", "distance", "softmax",
             "argmax", "top_k", "convert")

    def program(self, seed: int) -> Program:
        for _ in range(self.r.randint(1, 2)):
            rank = self.r.choice((0, 1, 2, 2, 2))
            dtype = "i32" if self.r.random() < 0.15 else "f32"
            v = self.param(tuple(self.dim() for _ in range(rank)), dtype)
            self.pool.append(v)
        for _ in range(self.r.randint(1, 6)):
            x = self.r.choice(self.pool)
            getattr(self, self.r.choice(self.STEPS))(x)
        made = [v for v in self.pool if v not in self.params] or self.pool
        outs = [made[-1]] + ([self.r.choice(made[:-1])] if len(made) > 1 and
                             self.r.random() < 0.3 else [])
        ret = ", ".join(v.name for v in outs) + ("," if len(outs) == 1 else "")
        lines = [f"def prog({', '.join(p.name for p in self.params)}):", *self.lines,
                 f"    return ({ret})"]
        source = "\n".join(lines) + "\n"
        return Program(seed, source, tuple(self.args), self.r.choice(LIMITS), self.shape_seed)


def make_program(seed: int, shape_seed: int | None = None, x64: bool = False) -> Program:
    """The random program of `seed` (the same on every machine). With `shape_seed`, the sizes
    and argument values come from that seed instead: one structure (mostly: a size can steer
    a choice) in many shapes. With `x64`, the same program over f64 and i64."""
    prog = _Gen(seed, shape_seed).program(seed)
    return _wide(prog) if x64 else prog


def _wide(prog: Program) -> Program:
    """`prog` over 64-bit types: its dtype names and arguments widened, the i32 extremes
    moved to the i64 ones (so that overflow still wraps)."""
    source = prog.source.replace("jnp.float32", "jnp.float64").replace("jnp.int32", "jnp.int64")
    source = source.replace(repr(int(I32.max)), repr(int(I64.max)))

    def widen(a: np.ndarray) -> np.ndarray:
        if a.dtype.kind == "f":
            return a.astype(np.float64)
        w = a.astype(np.int64)
        w[a == I32.min], w[a == I32.max] = I64.min, I64.max
        return w

    return Program(prog.seed, source, tuple(widen(a) for a in prog.args), prog.memory_limit,
                   prog.shape_seed, x64=True)


# ---------------------------------------------------------------- comparing


def mismatch(got: Sequence[Any], want: Sequence[Any], nan_for_inf: bool = False,
             any_nonfinite: bool = False) -> str:
    """Why `got` differs from `want` (JAX eager), or "" when it agrees: shapes and dtypes
    equal, NaN and +-inf at the same places, finite floats within measure.TOLERANCE of the
    output's magnitude, everything else exact. `nan_for_inf` also accepts NaN where `want`
    is +-inf (the euclidean-distance rewrite's documented divergence); `any_nonfinite` any
    non-finite value where `want` has one (dot-order's, through an infinity)."""
    if len(got) != len(want):
        return f"{len(got)} outputs, want {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {k}: {g.dtype}{list(g.shape)}, want {w.dtype}{list(w.shape)}"
        tol = TOLERANCE.get(dtypes.from_numpy(w.dtype))
        if tol is None:
            bad = g != w
        else:
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            finite = np.isfinite(w64)
            scale = max(1.0, float(np.max(np.abs(w64[finite]), initial=0.0)))
            close = np.abs(g64 - w64) <= tol * scale
            bad = ~np.where(finite, close & np.isfinite(g64),
                            (np.isnan(g64) & (np.isnan(w64) | nan_for_inf)) | (g64 == w64)
                            | (any_nonfinite & ~np.isfinite(g64)))
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            return (f"output {k}: {int(bad.sum())} of {w.size} differ; at {list(at)} got "
                    f"{g[at]!r}, want {w[at]!r}")
    return ""


# ---------------------------------------------------------------- checking


@dataclass(frozen=True)
class Finding:
    kind: str  # "mismatch", "crash", or "documented" (a divergence README documents)
    backend: str  # a backend name, or "explore", "roundtrip", "jax-eager", "hlo"
    stage: str
    message: str
    program: str  # the reproducer

    def report(self) -> str:
        return (f"{self.kind} on {self.backend} at stage {self.stage}: {self.message}\n"
                f"{self.program}")


# Defects the fuzz finds that are known and open: reported in the summary and by `make fuzz`,
# but they do not fail `make test`; any other finding does. Remove an entry once it is fixed.
KNOWN_OPEN: dict[str, Callable[[Finding], bool]] = {}

# Divergences from JAX eager that README ("Numerics and bad input") documents, each pinned by
# a test: counted apart, never mismatches. Checked by `check_program` where they can apply.
EUCLIDEAN_INF = ("euclidean-distance: NaN where the naive form gives inf (infinite inputs; "
                 "README, test_infinite_inputs_give_nan_where_the_naive_form_gives_inf)")
EUCLIDEAN_TOL = ("euclidean-distance: within its documented bound, (c + 2K + 1) units of "
                 "roundoff times |a|^2 + |b|^2 at every rewritten distance, or |a|^2 + |b|^2 "
                 "past the float type's largest value (README, Numerics)")
NEAR_TIE = ("an argmin/argmax picks another of values equal within float tolerance: NumPy's "
            "and XLA's transcendental functions round differently (README, Numerics)")
NAN_SIGN = ("top_k ranks NaN by its sign bit, which XLA's implementation of an op may set "
            "where NumPy's keeps the input's (README, Numerics: log1p of +NaN), and which "
            "differs by device: x86's sqrt or 0 * inf gives -NaN, CUDA's (the gpu backend) +NaN")
AMPLIFIED = ("an ill-conditioned step (a conversion to an integer, floor, log near 0, sin of a "
             "large argument, top_k of NaN) magnifies a difference within float tolerance at a "
             "value it reads (last-bit roundoff, XLA's float32 division, XLA flushing subnormals "
             "to zero, a NaN's sign): given XLA's value there, our reference gives JAX's result "
             "(README, Numerics)")
DOT_ORDER_INF = ("dot-order: a reassociated dot chain meets an infinite input in another order "
                 "(inf * 0 or inf - inf), so a value that is +-inf one way is NaN the other, or "
                 "+inf is -inf (README, Numerics; tests/passes/test_dot_order.py)")
JIT_NOT_EAGER = ("the jax backend is XLA under jit, and gives what jax.jit of the program gives, "
                 "which here differs from JAX eager (README; test_xla_jit_folds_log_exp)")


def _replacement(after: gx.Graph, root: Any, ids: Sequence[int]) -> int | None:
    """Which of a firing's new node ids took the root's place: of its type, read by none of
    the others."""
    read = {i for k in ids if k in after for i in after[k].inputs}
    fit = [k for k in ids if k in after and after[k].type == root.type and k not in read]
    return fit[-1] if fit else None


def _values(g: gx.Graph, ids: Sequence[int], args: Sequence[np.ndarray]) -> list[np.ndarray]:
    sub = gx.Graph(g.nodes, g.params, tuple(ids), g.name)
    return registry.run_graph(sub, list(args), "reference").outputs


def euclidean_within_bound(before: gx.Graph, stage: gx.Stage, args: Sequence[np.ndarray]) -> bool:
    """Every distance the euclidean-distance rewrite made in `stage` (from `before`) is within
    README's bound of the naive distance on `args`: |rewritten - naive| <= (c + 2K + 1) u
    (|a|^2 + |b|^2), u the unit roundoff, c = min(2(K+2), 128) units, K the features."""
    for rw in stage.report.rewrites:
        root = before[rw.before[0]]
        new = _replacement(stage.graph, root, rw.after)
        sub = root  # down the naive form to the difference of the two broadcast operands
        for _ in range(4):
            if sub.op == "sub":
                break
            sub = before[sub.inputs[0]]
        if new is None or sub.op != "sub" or rw.region:
            return False
        (naive,) = _values(before, [root.id], args)
        (ours,) = _values(stage.graph, [new], args)
        a, b = (x.astype(np.float64) for x in _values(before, list(sub.inputs), args))
        axes = tuple(root.attrs["axes"])
        k = int(np.prod([a.shape[d] for d in axes]))
        norms = np.sum(a * a, axis=axes) + np.sum(b * b, axis=axes)
        u = float(np.finfo(naive.dtype).eps) / 2
        bound = (min(2 * (k + 2), 128) + 2 * k + 1) * u * norms
        err = np.abs(ours.astype(np.float64) - naive.astype(np.float64))
        overflows = norms > float(np.finfo(naive.dtype).max)  # the expanded form's inf - inf
        if not np.all((err <= bound) | ~np.isfinite(naive) | overflows):
            return False
    return True


def nan_reaches_top_k(traced: gx.Graph, args: Sequence[np.ndarray]) -> bool:
    """Whether a NaN is among the values a top_k of the traced graph ranks (on the reference
    interpreter): made inside the program (a sqrt of a negative number), it is in no output
    or argument, yet its sign, which devices set differently, orders the result."""
    ranked = {n.inputs[0] for n in traced.nodes if n.op == "top_k"}
    if not ranked:
        return False
    seen: list[bool] = []

    def look(n: Any, value: Any) -> None:
        if n.id in ranked:
            v = np.asarray(value)
            seen.append(v.dtype.kind == "f" and bool(np.isnan(v.astype(np.float64)).any()))

    interpreter = NumpyInterpreter(traced)
    with np.errstate(all="ignore"):
        interpreter.evaluate(interpreter.prepare(args), look)
    return any(seen)


def near_ties(traced: gx.Graph, got: Sequence[Any], want: Sequence[Any],
              args: Sequence[np.ndarray]) -> bool:
    """Every differing integer output is an argmin/argmax whose two picks hold values equal
    within float tolerance in our reference evaluation of its operand (a near-tie that a last-
    bit difference in, say, tanh breaks the other way). False when anything else differs."""
    differs = False
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return False
        if np.array_equal(g, w):
            continue
        n = traced[traced.outputs[k]]
        if n.op not in ("argmin", "argmax") or len(n.attrs["axes"]) != 1:
            return False
        (x,) = _values(traced, [n.inputs[0]], args)
        axis = n.attrs["axes"][0]
        a, b = (np.take_along_axis(x, np.expand_dims(idx.astype(np.int64), axis), axis)
                .squeeze(axis).astype(np.float64) for idx in (g, w))
        scale = max(1.0, float(np.nanmax(np.abs(x), initial=0)))
        tol = TOLERANCE.get(dtypes.from_numpy(x.dtype), 0.0) * scale
        if not np.all((np.abs(a - b) <= tol) | (g == w)):
            return False
        differs = True
    return differs


# How many intermediates, nearest the outputs first, `amplified` tries as the cut.
AMPLIFIED_CUTS = 12


def amplified(traced: gx.Graph, got: Sequence[Any], want: Sequence[Any],
              args: Sequence[np.ndarray]) -> bool:
    """`got` differs from JAX's `want` only through an intermediate on which our reference and
    XLA agree within float tolerance: `got` is what our reference gives on `traced`, and for
    some node (nearest the outputs first) whose value XLA (the jax backend) computes within
    tolerance of ours but not bit for bit, the reference run of `traced` with that node's value
    replaced by XLA's gives `want`. What follows the node is then the same computation, ill-
    conditioned there; a defect after the node (a wrong conversion, say) still differs."""
    if mismatch(got, _values(traced, traced.outputs, args)):
        return False  # the backend or stage differs from our own reference: not explained here
    return _cut_explains(traced, want, args)


def _cut_explains(traced: gx.Graph, want: Sequence[Any], args: Sequence[np.ndarray]) -> bool:
    """`amplified`'s search for the node, apart from the backend's outputs. A search that
    fails (a graph the jax backend cannot run whole) explains nothing: the finding stays."""
    try:
        return _search_cut(traced, want, args)
    except Exception:  # noqa: BLE001 - an explanation that cannot be checked is none
        return False


def _search_cut(traced: gx.Graph, want: Sequence[Any], args: Sequence[np.ndarray]) -> bool:
    nodes = [n for n in traced.nodes
             if isinstance(n.type, TensorType) and n.op not in ("parameter", "constant")]
    ids = [n.id for n in nodes]
    ours = _values(traced, ids, args)
    xla = registry.run_graph(gx.Graph(traced.nodes, traced.params, tuple(ids), traced.name),
                             list(args), "jax").outputs
    tried = 0
    for n, o, x in reversed(list(zip(nodes, ours, xla))):
        o, x = np.asarray(o), np.asarray(x)
        if o.tobytes() == x.tobytes() or mismatch([o], [x]):
            continue  # the same bits, or not within tolerance: not the cut
        cut = gx.Graph([Node(n.id, "parameter", (), Attrs({"index": len(traced.params),
                                                           "name": f"cut{n.id}"}), n.type)
                        if m.id == n.id else m for m in traced.nodes],
                       (*traced.params, n.id), traced.outputs, traced.name)
        if not mismatch(registry.run_graph(cut, [*args, x], "reference").outputs, want):
            return True
        tried += 1
        if tried == AMPLIFIED_CUTS:
            break
    return False


def known_open(f: Finding) -> str | None:
    return next((name for name, match in KNOWN_OPEN.items() if match(f)), None)


def _leaves(x: Any) -> list[np.ndarray]:
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(x)]


def _distinct_stages(tr: gx.Trace) -> list[gx.Stage]:
    out: list[gx.Stage] = []
    for s in tr.stages:
        if not out or s.graph != out[-1].graph:
            out.append(s)
    return out


def _roundtrip(g: gx.Graph) -> gx.Graph:
    back = gx.parse(str(g))
    gx.verify(back)
    if back != g:
        raise AssertionError("parse(str(graph)) differs from the graph")
    return back


def _explore(fn: Callable[..., Any], args: Sequence[np.ndarray],
             limit: int | None) -> tuple[gx.Trace, int | None]:
    try:
        return gx.explore(fn, *args, memory_limit=limit), limit
    except InfeasibleMemoryLimit as e:
        if limit is None or e.needed <= limit:
            raise AssertionError(f"infeasible limit {limit} names {e.needed}, not more") from e
        return gx.explore(fn, *args, memory_limit=e.needed), e.needed


def check_program(prog: Program, backends: Sequence[str] | None = None,
                  every_stage: bool = False) -> list[Finding]:
    """Every finding of one program (an empty list when all agree); an x64 program under
    jax.enable_x64(True)."""
    with jax.enable_x64(prog.x64):
        return _check_program(prog, backends, every_stage)


def _check_program(prog: Program, backends: Sequence[str] | None,
                   every_stage: bool) -> list[Finding]:
    backends = registry.sweep() if backends is None else backends
    text = str(prog)
    found: list[Finding] = []

    def note(kind: str, backend: str, stage: str, message: str) -> None:
        found.append(Finding(kind, backend, stage, message, text))

    fn = prog.fn()
    try:
        # on jax arrays, so methods such as `.astype` are JAX's, not NumPy's
        want = _leaves(fn(*(jnp.asarray(a) for a in prog.args)))
    except Exception as e:  # the generator wrote something JAX rejects: a fuzz bug
        note("crash", "jax-eager", "-", f"{type(e).__name__}: {e}")
        return found
    try:
        tr, limit = _explore(fn, prog.args, prog.memory_limit)
    except Exception as e:
        note("crash", "explore", "-", f"{type(e).__name__}: {e}")
        return found
    stages = _distinct_stages(tr)
    ends = {id(stages[0]), id(stages[-1])}
    jit_want: list[np.ndarray] = []

    def jitted() -> list[np.ndarray]:  # jax.jit of the program, computed on first need
        if not jit_want:
            jit_want.extend(_leaves(jax.jit(fn)(*prog.args)))
        return jit_want

    ours_want: list[np.ndarray] = []

    def ours() -> list[np.ndarray]:  # our reference on the traced graph, on first need
        if not ours_want:
            ours_want.extend(_values(stages[0].graph, stages[0].graph.outputs, prog.args))
        return ours_want

    euclidean = False  # has the euclidean-distance rewrite fired by this stage?
    reassociated = False  # has dot-order reassociated a chain by this stage?
    within = None  # and are its distances within the documented bound? (found when needed)
    cut = None  # does the difference come through a value XLA gives within tolerance? (same)
    # an infinite input: then the rewrite's NaN (for the naive inf) may reach any consumer
    infinite = any(np.isinf(np.asarray(a, np.float64)).any() for a in prog.args
                   if np.asarray(a).dtype.kind == "f")
    for k, s in enumerate(stages):
        if s.name == "dot-order" and s.report and s.report.rewrites:
            reassociated = True
        if s.name == "euclidean-distance" and s.report and s.report.rewrites:
            euclidean, at = True, k
        try:
            g = _roundtrip(s.graph)
        except Exception as e:
            note("crash", "roundtrip", s.name, f"{type(e).__name__}: {e}")
            continue
        for b in backends:
            if b != "reference" and not every_stage and id(s) not in ends:
                continue
            try:
                r = registry.run_graph(g, list(prog.args), b, tr.options)
            except Exception as e:
                note("crash", b, s.name, f"{type(e).__name__}: {str(e)[:400]}")
                continue
            why = mismatch(r.outputs, want)
            if why and b == "jax" and not mismatch(r.outputs, jitted()):
                if not any(f.backend == b and f.kind == "documented" for f in found):
                    note("documented", b, s.name, f"{JIT_NOT_EAGER}: {why}")
            elif why and euclidean and (infinite or not mismatch(r.outputs, want,
                                                                 nan_for_inf=True)):
                if not any(f.backend == b and f.kind == "documented" for f in found):
                    note("documented", b, s.name, f"{EUCLIDEAN_INF}: {why}")
            elif why and euclidean and (within if within is not None else (within := (
                    euclidean_within_bound(stages[at - 1].graph, stages[at], prog.args)))):
                if not any(f.backend == b and f.kind == "documented" for f in found):
                    note("documented", b, s.name, f"{EUCLIDEAN_TOL}: {why}")
            elif why and reassociated and infinite and not mismatch(r.outputs, want,
                                                                     any_nonfinite=True):
                if not any(f.backend == b and f.kind == "documented" for f in found):
                    note("documented", b, s.name, f"{DOT_ORDER_INF}: {why}")
            elif why and near_ties(stages[0].graph, r.outputs, want, prog.args):
                if not any(f.backend == b and f.kind == "documented" for f in found):
                    note("documented", b, s.name, f"{NEAR_TIE}: {why}")
            elif why and "top_k" in prog.source and (any(  # a NaN reached top_k, or may have
                    np.isnan(np.asarray(v, np.float64)).any()
                    for v in (*r.outputs, *want, *prog.args) if np.asarray(v).dtype.kind == "f")
                    or nan_reaches_top_k(stages[0].graph, prog.args)):
                if not any(f.backend == b and f.kind == "documented" for f in found):
                    note("documented", b, s.name, f"{NAN_SIGN}: {why}")
            elif why and not mismatch(r.outputs, ours()) and (
                    cut if cut is not None else (cut := _cut_explains(stages[0].graph, want,
                                                                      prog.args))):
                if not any(f.backend == b and f.kind == "documented" for f in found):
                    note("documented", b, s.name, f"{AMPLIFIED}: {why}")
            elif why and not any(f.backend == b and f.kind == "mismatch" for f in found):
                note("mismatch", b, s.name, why)  # the first stage it shows at
            elif limit is not None and b == "reference" and s is stages[-1] \
                    and r.peak_bytes > limit:
                note("mismatch", b, s.name, f"measured peak {r.peak_bytes} > limit {limit}")
    return found


def check_hlo(text: str, backends: Sequence[str] | None = None, seed: int = 0,
              name: str = "") -> list[Finding]:
    """A (mutated) HLO dump: it imports or raises ParseError; what imports runs through the
    default pipeline, and its final stage agrees with the traced graph on every backend
    where the reference interpreter can run the imported graph."""
    from tests.passes.semantic import random_args

    backends = registry.sweep() if backends is None else backends
    found: list[Finding] = []
    program = f"# HLO {name}\n{text[:1500]}\n"

    def note(kind: str, backend: str, stage: str, message: str) -> None:
        found.append(Finding(kind, backend, stage, message, program))

    try:
        g = gx.from_hlo(text)
    except gx.ParseError:
        return found
    except Exception as e:
        note("crash", "hlo", "import", f"{type(e).__name__}: {e}")
        return found
    try:
        _roundtrip(g)
        args = random_args(g, np.random.default_rng(seed))
        want = registry.run_graph(g, args, "reference").outputs
    except Exception:  # opaque ops, tuple parameters: nothing to compare against
        return found
    try:
        final = run_pipeline(g, resolve(gx.passes.DEFAULT_PIPELINE), check=True)
        final = _roundtrip(final)
    except Exception as e:
        note("crash", "hlo", "pipeline", f"{type(e).__name__}: {e}")
        return found
    for b in backends:
        for name, graph in (("imported", g), ("final", final)):
            try:
                got = registry.run_graph(graph, args, b).outputs
            except OpError:  # an op this backend documents it cannot run (tuple on jax)
                continue
            except Exception as e:
                note("crash", b, f"hlo {name}", f"{type(e).__name__}: {str(e)[:400]}")
                continue
            why = mismatch(got, want)
            if why:
                note("mismatch", b, f"hlo {name}", why)
    return found


# ---------------------------------------------------------------- batches


def rss_bytes() -> int:
    """Resident memory now (Linux /proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def live_rss_bytes() -> int:
    """Resident memory once garbage is collected and the C heap's free pages are handed back
    (glibc's malloc_trim): what the process holds, as against what its allocator keeps for
    reuse after freed NumPy temporaries leave the heap fragmented. Plain RSS elsewhere."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    return rss_bytes()


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class Summary:
    programs: int = 0
    hlo_cases: int = 0
    findings: list[Finding] = field(default_factory=list)
    peak_rss_start: int = 0
    peak_rss_end: int = 0
    live_rss: list[tuple[int, int]] = field(default_factory=list)  # (programs, live bytes)
    seconds: float = 0.0
    x64: bool = False  # the programs were written over f64 and i64

    def unknown(self) -> list[Finding]:
        """Findings that are neither documented divergences nor known open defects
        (KNOWN_OPEN): these fail the test."""
        return [f for f in self.findings if f.kind != "documented" and known_open(f) is None]

    @property
    def documented(self) -> int:
        return sum(f.kind == "documented" for f in self.findings)

    @property
    def crashes(self) -> int:
        return sum(f.kind == "crash" for f in self.findings)

    def mismatches(self) -> Counter[str]:
        return Counter(f.backend for f in self.findings if f.kind == "mismatch")

    def line(self) -> str:
        by = self.mismatches()
        names = dict.fromkeys([*registry.sweep(), *by])
        mm = ", ".join(f"{b} {by.get(b, 0)}" for b in names)
        return (f"fuzz{' (x64)' if self.x64 else ''}: {self.programs} programs, "
                f"{self.hlo_cases} HLO mutations; "
                f"mismatches by backend: {mm}; crashes {self.crashes}; "
                f"{self.documented} documented divergences (not mismatches); "
                f"{len(self.findings) - len(self.unknown()) - self.documented} of the findings "
                f"known open; peak RSS "
                f"{self.peak_rss_start / 2**20:.0f} MiB at start, "
                f"{self.peak_rss_end / 2**20:.0f} MiB at end; "
                + (f"live (after gc and malloc_trim) {self.live_rss[0][1] / 2**20:.0f} MiB after "
                   f"{self.live_rss[0][0]} programs, {self.live_rss[-1][1] / 2**20:.0f} MiB after "
                   f"{self.live_rss[-1][0]}; " if self.live_rss else "")
                + f"{self.seconds:.0f} s")

    def report(self, limit: int = 40) -> str:
        """The summary line, then the first finding of each distinct (kind, backend, stage,
        message head), up to `limit` of them."""
        seen: dict[tuple[str, str, str, str], Finding] = {}
        counts: Counter[tuple[str, str, str, str]] = Counter()
        for f in sorted(self.findings, key=lambda f: f.kind != "crash"):  # crashes first
            key = (f.kind, f.backend, f.stage, f.message.split(";")[0][:60])
            seen.setdefault(key, f)
            counts[key] += 1
        parts = [self.line()]
        for key, f in list(seen.items())[:limit]:
            known = known_open(f)
            parts.append(f"--- {counts[key]} x" + (f" (known open: {known})" if known else "")
                         + f"\n{f.report()}")
        return "\n".join(parts)


# JAX eager keeps one executable per primitive and shape in caches of its own (3 to 7 MiB a
# random program); the harness, the only eager caller here, empties them this often.
CLEAR_JAX_EVERY = 20


def fuzz(programs: int, first_seed: int = 0, hlo: int = 0, every_stage: bool = False,
         progress: Callable[[int, Summary], None] | None = None, x64: bool = False) -> Summary:
    """`programs` random programs from `first_seed` on (over f64 and i64 with `x64`), and
    `hlo` mutated HLO dumps."""
    s = Summary(peak_rss_start=peak_rss_bytes(), x64=x64)
    t0 = time.perf_counter()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # overflow and invalid-value warnings are the point
        for k in range(programs):
            s.findings += check_program(make_program(first_seed + k, x64=x64),
                                        every_stage=every_stage)
            s.programs += 1
            if (k + 1) % CLEAR_JAX_EVERY == 0:
                jax.clear_caches()
            if progress:
                progress(k, s)
        for k, text in enumerate(mutated_dumps(hlo, seed=first_seed + 8)):
            s.findings += check_hlo(text, name=f"case {k} of mutated_dumps({hlo}, "
                                               f"seed={first_seed + 8})")
            s.hlo_cases += 1
            if (k + 1) % (5 * CLEAR_JAX_EVERY) == 0:
                jax.clear_caches()
    s.peak_rss_end, s.seconds = peak_rss_bytes(), time.perf_counter() - t0
    return s


def main(argv: Sequence[str]) -> int:
    x64 = "--x64" in argv
    argv = [a for a in argv if a != "--x64"]
    n = int(argv[0]) if argv else 10_000
    first = int(argv[1]) if len(argv) > 1 else 0

    t0 = time.perf_counter()

    def progress(k: int, s: Summary) -> None:
        if (k + 1) % 100 == 0:  # the summary so far, should the run be cut short
            s.peak_rss_end, s.seconds = peak_rss_bytes(), time.perf_counter() - t0
            now = rss_bytes()
            s.live_rss.append((k + 1, live_rss_bytes()))
            print(f"  after {k + 1}: RSS now {now / 2**20:.0f} MiB; {s.line()}", flush=True)

    s = fuzz(n, first, hlo=0 if x64 else n // 10, every_stage=True, progress=progress, x64=x64)
    print(s.report(), flush=True)
    return 1 if any(f.kind != "documented" for f in s.findings) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
