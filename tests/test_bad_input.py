"""Inputs at the edges: special float values through conversions and fast-math-prone
expressions, arguments that do not fit the traced graph, complex constants in HLO text, and
byte sizes and stage indices that cannot be used, and a sample of the user's mistakes whose
error names the cause and the user's line (an element type the IR lacks, shapes JAX refuses,
a branch on a traced value, a memory limit no split meets). Each either computes what JAX
computes or fails with an error naming the cause, before anything is compiled or cached."""

from __future__ import annotations

import inspect
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference, registry
from explorer.ir import Graph, GraphBuilder, ParseError, TensorType, dtypes, parse
from explorer.ir.ops import OPS
from explorer.passes.fuse import Fuse
from explorer.units import parse_bytes

KERNEL_BACKENDS = [b for b in ("cpu", "gpu") if b in registry.available()]


@pytest.fixture
def x64() -> Iterator[None]:
    """JAX computes 64-bit types in 64 bits for the test, as the reference does."""
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


def _assert_generated(kernels: tuple[Any, ...]) -> None:
    """Every kernel ran as generated code, none fell back to the interpreter."""
    assert kernels and all("runs on the reference interpreter" not in k.source
                           for k in kernels), [k.source for k in kernels]


# ---------------------------------------------------------------- float -> int conversion

SPECIAL = [np.nan, np.inf, -np.inf, 1e30, -1e30, 3e9, -3e9, 2.0**31, -2.0**31, 2.0**32,
           2.0**63, -2.0**63, 2.0**64, 300.7, -300.7, 255.9, 256.0, -0.9, -1.5, 0.5, -0.0,
           70000.5, -70000.5]
INTS = [300, -300, 70000, -1, 2**31 - 1, -2**31, 2**40 + 5, 0, 255, 256]
TARGETS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "pred")


def _convert_graph(src: str, dst: str, n: int) -> Graph:
    """convert, then an op that keeps its value, so that fusion puts both in one kernel."""
    b = GraphBuilder("convert")
    x = b.param(TensorType((n,), src))
    y = b.add("convert_element_type", [x], {"new_dtype": dst})
    return b.build([b.add("and" if dst == "pred" else "max", [y, y])])


def _jax_convert(x: np.ndarray, dst: str) -> np.ndarray:
    return np.asarray(jax.jit(lambda a: a.astype(dtypes.to_numpy(dst)))(x))


@pytest.mark.parametrize("src", ["f32", "f64", "i64"])
@pytest.mark.parametrize("dst", TARGETS)
def test_conversion_saturates_and_wraps_as_jax_does(x64: None, src: str, dst: str) -> None:
    """float -> int: NaN -> 0, too large (inf included) -> max, too small -> min; int ->
    narrower int wraps; anything -> pred is `!= 0` (NaN -> True). Reference and kernels."""
    x = np.array(INTS if src == "i64" else SPECIAL, dtypes.to_numpy(src))
    want = _jax_convert(x, dst)
    g = _convert_graph(src, dst, x.size)
    np.testing.assert_array_equal(reference.evaluate(g, [x])[0], want, err_msg="reference")
    fused, _ = Fuse()(g)
    for backend in KERNEL_BACKENDS:
        r = registry.executable(fused, backend).run([x])
        _assert_generated(r.kernels)
        assert r.outputs[0].dtype == want.dtype
        np.testing.assert_array_equal(r.outputs[0], want, err_msg=backend)


def test_astype_int32_of_a_huge_float_is_int_max() -> None:
    def f(x: Any) -> Any:
        return (x * 2).astype(jnp.int32) - 1

    x = np.array([1e30, np.nan, 2.5, -3.5], np.float32)
    want = np.asarray(jax.jit(f)(x))
    assert want.tolist() == [2**31 - 2, -1, 4, -8]
    t = gx.explore(f, x)
    for backend in ("reference", *KERNEL_BACKENDS):
        np.testing.assert_array_equal(t.run(backend=backend).value, want, err_msg=backend)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_cuda_to_int_helper_converts_as_the_reference(tmp_path: Path) -> None:
    """The CUDA preamble's to_int, compiled as host C++ (no GPU needed), on every pair of
    float or integer source and integer target the CUDA generator writes."""
    from explorer.backends.gpu.cuda_dialect import PREAMBLE

    def lit(v: float) -> str:
        return "NAN" if v != v else "INFINITY" if v == np.inf else "-INFINITY" if v == -np.inf \
            else repr(float(v))

    sources = [(np.array(SPECIAL, np.float32), "float", [lit(v) for v in SPECIAL]),
               (np.array(SPECIAL, np.float64), "double", [lit(v) for v in SPECIAL]),
               (np.array(INTS, np.int64), "long long", [f"{v}LL" for v in INTS]),
               (np.array([True, False]), "bool", ["true", "false"])]
    lines, want = [], []
    for x, ctype, literals in sources:
        for dst in TARGETS[:-1]:
            c = dtypes.C_TYPES[dst]
            lines += [f'printf("%lld\\n", (long long)to_int<{c}>(({ctype}){v}));' for v in literals]
            want += [int(v) for v in OPS["convert_element_type"].ref(x, new_dtype=dst).tolist()]
    prelude = PREAMBLE.split("__device__ inline double _inf")[0].replace("__device__", "")
    source = tmp_path / "to_int.cpp"
    source.write_text("#include <cstdio>\n#include <cmath>\n" + prelude
                      + "int main() {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    subprocess.run(["g++", "-O1", "-o", str(tmp_path / "to_int"), str(source)], check=True)
    got = subprocess.run([str(tmp_path / "to_int")], capture_output=True, text=True,
                         check=True).stdout.split()
    want = [v - 2**64 if v >= 2**63 else v for v in want]  # as printed through long long
    assert [int(v) for v in got] == want


# ---------------------------------------------------------------- fast-math

VALUES = np.array([0.0, -0.0, 1.0, -1.0, 0.1, 3.0, 89.0, 100.0, 1e30, 3e38, -3e38, np.inf,
                   -np.inf, np.nan, 1e-45], np.float32)
XS, YS = (np.ascontiguousarray(a.ravel()) for a in np.meshgrid(VALUES, VALUES))


def _as_f32(b: Any) -> Any:
    return b.astype(jnp.float32)


FMA = "x*x-y (an fma would give -inf for inf-inf)"

# Each program's result goes through `* 1.0`, which changes no value, so that every program
# is at least two ops and runs as a generated kernel.
SPECIAL_PROGRAMS: dict[str, Callable[[Any, Any], Any]] = {
    "log(exp(x))": lambda x, y: jnp.log(jnp.exp(x)),
    "exp(log(x))": lambda x, y: jnp.exp(jnp.log(x)),
    "x*0": lambda x, y: x * 0.0,
    "x-x": lambda x, y: x - x,
    "x-y (inf-inf)": lambda x, y: x - y,
    "(x+y)-y": lambda x, y: (x + y) - y,
    "x*y+y": lambda x, y: x * y + y,
    FMA: lambda x, y: x * x - y,
    "x/x": lambda x, y: x / x,
    "x<y": lambda x, y: _as_f32(x < y),
    "x==y": lambda x, y: _as_f32(x == y),
    "x!=x": lambda x, y: _as_f32(x != x),
    "max(x,y)": lambda x, y: jnp.maximum(x, y),
    "min(x,y)": lambda x, y: jnp.minimum(x, y),
    "x+0": lambda x, y: x + 0.0,
    "0-x": lambda x, y: 0.0 - x,
    "x*-0": lambda x, y: x * -0.0,
    "sqrt(x*x)": lambda x, y: jnp.sqrt(x * x),
}


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: the same kind of value (NaN, +-inf, +0.0, -0.0, finite nonzero) and, when
    finite, close (libm, NumPy and XLA round exp and log differently, and exp(log(x)) makes
    an ulp of log a few hundred of the result)."""
    def kind(v: np.ndarray) -> np.ndarray:
        sign = np.signbit(v) & ~np.isnan(v)  # a NaN's sign bit varies with how it was made
        return np.select([np.isnan(v), np.isinf(v), v == 0], [0, 1, 2], 3) * 2 + sign

    return (kind(a) == kind(b)) & (~np.isfinite(a) | np.isclose(a, b, rtol=2e-5, atol=0))


# CuPy compiles every kernel with -ftz=true (options cannot undo it): the GPU is checked on
# normal values. gpu/backend.py builds with --fmad=false, so the fma case holds there too.
@pytest.mark.parametrize("backend, name", [
    (b, n) for b in KERNEL_BACKENDS for n in SPECIAL_PROGRAMS])
def test_kernels_agree_where_reference_and_jax_agree(backend: str, name: str) -> None:
    f = SPECIAL_PROGRAMS[name]
    fn = lambda x, y: f(x, y) * 1.0  # noqa: E731
    t = gx.explore(fn, XS, YS, pipeline="fuse")
    want = t.run(backend="reference", stage=0).value
    eager = np.asarray(fn(jnp.asarray(XS), jnp.asarray(YS)))
    agree = _same(want, eager)
    assert agree.mean() > 0.9, f"{name}: reference and JAX disagree on most values"
    if backend == "gpu":
        tiny = np.finfo(np.float32).tiny
        agree &= (np.abs(XS) >= tiny) | (XS == 0) | ~np.isfinite(XS)
        agree &= (np.abs(YS) >= tiny) | (YS == 0) | ~np.isfinite(YS)
    r = t.run(backend=backend)
    _assert_generated(r.kernels)
    bad = agree & ~_same(r.value, want)
    assert not bad.any(), (f"{name} on {backend}: x={XS[bad][:4]}, y={YS[bad][:4]}: "
                           f"{r.value[bad][:4]}, reference and JAX {want[bad][:4]}")


@pytest.mark.parametrize("backend", KERNEL_BACKENDS)
def test_log_exp_overflows_in_a_kernel_as_in_the_reference(backend: str) -> None:
    x = np.array([100.0, 3.0, -5.0, 1e30], np.float32)
    t = gx.explore(lambda x: jnp.log(jnp.exp(x)), x, pipeline="fuse")
    assert t.run(backend=backend).value.tolist()[:1] == [np.inf]
    t = gx.explore(lambda x: jnp.sum(jnp.log(jnp.exp(x))), x, pipeline="fuse")
    assert t.run(backend=backend).value == np.inf


def test_generated_cpu_kernels_carry_no_fast_math_flags() -> None:
    pytest.importorskip("numba")
    x = np.ones((64, 48), np.float32)
    t = gx.explore(lambda x, y: jnp.mean(jnp.log(jnp.exp(x)) * 3 + y), x, x)
    (k,) = t.run(backend="cpu").kernels
    head = k.source.split("def ", 1)[0]
    assert "fastmath" not in head.split("@njit", 1)[1], head
    assert "radd(" in k.source  # only the accumulator may reassociate


# ---------------------------------------------------------------- arguments

def _sin2(a: Any) -> Any:
    return jnp.sin(a) * 2


BAD_ARGUMENTS = [
    (np.ones((5, 3), np.float32),
     r"argument a has shape \(5, 3\), but the graph was traced with shape \(4, 3\)"),
    (np.full((4, 3), "abc"),
     r"argument a has element type <U3, but the graph was traced with float32"),
]


@pytest.mark.parametrize("bad, message", BAD_ARGUMENTS)
@pytest.mark.parametrize("backend", ["reference", *KERNEL_BACKENDS, "jax"])
def test_an_argument_that_does_not_fit_is_refused_and_leaves_nothing_stale(
        backend: str, bad: np.ndarray, message: str) -> None:
    t = gx.explore(_sin2, np.ones((4, 3), np.float32))
    with pytest.raises(reference.ArgumentError, match=message):
        t.run(bad, backend=backend)
    assert t.run(backend=backend).value.shape == (4, 3)
    fresh = gx.explore(_sin2, np.ones((4, 3), np.float32))
    assert fresh.run(backend=backend).value.shape == (4, 3)
    with pytest.raises(reference.ArgumentError, match=message):
        fresh.run(bad, backend=backend)


def test_a_first_run_with_a_wrong_shape_does_not_poison_the_jax_backend() -> None:
    t = gx.explore(lambda a: jnp.cos(a) + 1, np.ones((4, 3), np.float32))
    with pytest.raises(reference.ArgumentError):
        t.run(np.ones((5, 3), np.float32), backend="jax")
    np.testing.assert_allclose(t.run(backend="jax").value, np.cos(1.0) + 1, rtol=1e-6)


# ---------------------------------------------------------------- complex constants

def _module(root: str) -> str:
    return f"HloModule m\n\nENTRY main {{\n  ROOT {root}\n}}\n"


@pytest.mark.parametrize("constant, value", [
    ("c64[] constant(0)", 0j),
    ("c64[] constant((1.5, -0.5))", 1.5 - 0.5j),
    ("c128[2] constant({(1, 2), (3, -4)})", [1 + 2j, 3 - 4j]),
    ("c64[2] constant({(inf, -0), (nan, 1e-3)})", [complex(np.inf, -0.0), complex(np.nan, 1e-3)]),
])
def test_complex_constants_print_and_parse_back(constant: str, value: Any) -> None:
    g = gx.from_hlo(_module(f"c = {constant}"))
    (node,) = g.nodes
    assert node.op == "constant"
    want = np.asarray(value, dtype=dtypes.to_numpy(node.dtype))
    np.testing.assert_array_equal(node.attrs["value"].array, want)
    text = str(g)
    again = parse(text)
    assert str(again) == text
    assert again.nodes[0].attrs["value"] == node.attrs["value"]


def test_complex_constants_from_jax_run_as_jax_does() -> None:
    def f(x: Any) -> Any:
        return x * np.array([1 + 2j, 3 - 4j], np.complex64) + np.complex64(1.5 - 0.5j)

    x = np.array([1 + 1j, 2 - 3j], np.complex64)
    g = gx.from_hlo(jax.jit(f).lower(x).as_text(dialect="hlo"))
    assert [n.op for n in g.nodes].count("constant") == 2
    g = parse(str(g))
    np.testing.assert_allclose(reference.evaluate(g, [x])[0], f(x), rtol=1e-6)


@pytest.mark.parametrize("body, message", [
    ("(1.0)", "expected ','"),
    ("(1.0, 2.0, 3.0)", "expected ')'"),
    ("(1.0, x)", "the imaginary part of a complex number"),
])
def test_a_malformed_complex_literal_is_a_parse_error(body: str, message: str) -> None:
    text = f"graph @g {{\n  %0 = c64[] constant() {{value=dense<c64[] {body}>}}\n  return %0\n}}"
    with pytest.raises(ParseError, match=re.escape(message)):
        parse(text)


# ---------------------------------------------------------------- byte sizes and stages

@pytest.mark.parametrize("value, message", [
    (float("inf"), "must be finite, got inf"),
    (float("-inf"), "must be finite, got -inf"),
    (float("nan"), "must be finite, got nan"),
    (1.5, "whole number of bytes, got 1.5"),
    (0.5, "whole number of bytes, got 0.5"),
    ("1.5", "whole number of bytes, got '1.5'"),
    ("1.5B", "whole number of bytes, got '1.5B'"),
    ("0.0001KB", "at least 1 byte, got '0.0001KB'"),
    ("inf", "not a byte size: 'inf'"),
    (0, "must be positive, got 0"),
    (-4.0, "must be positive, got -4.0"),
    (True, "not a byte size: True"),
    (None, "not a byte size: None"),
])
def test_unusable_byte_sizes_are_refused(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_bytes(value)


@pytest.mark.parametrize("value, want", [
    (1024, 1024), (1024.0, 1024), (1e9, 10**9), (np.int64(4096), 4096), (np.float64(8.0), 8),
    ("1.5GB", 1_500_000_000), ("256MiB", 256 * 2**20), (" 7 mib ", 7 * 2**20),
    ("1.1KiB", 1126), ("0.5KB", 500), ("12", 12),
])
def test_usable_byte_sizes(value: Any, want: int) -> None:
    assert parse_bytes(value) == want


@pytest.mark.parametrize("limit", [float("inf"), 1.5, 0.5, "1.5", "inf"])
def test_explore_and_compile_refuse_an_unusable_limit_before_tracing(limit: Any) -> None:
    traced: list[bool] = []

    def f(x: Any) -> Any:
        traced.append(True)
        return x * 2

    with pytest.raises(ValueError, match=repr(limit)):
        gx.explore(f, np.ones(3, np.float32), memory_limit=limit)
    with pytest.raises(ValueError, match=repr(limit)):
        gx.compile(f, memory_limit=limit)
    with pytest.raises(ValueError, match=repr(limit)):
        gx.compile(memory_limit=limit)(f)
    assert not traced


MAGIC_SCRIPT = """
from IPython.core.error import UsageError
from IPython.testing.globalipapp import start_ipython
from explorer import magic

shell = start_ipython()
shell.run_line_magic("load_ext", "explorer")
shell.run_cell("import numpy as np; import jax.numpy as jnp; x = np.ones(3, np.float32)")
shown = []
magic.display = shown.append
for limit in ("inf", "1.5", "0.5"):
    r = shell.run_cell(f"%%gambit --memory-limit {limit}\\njnp.sin(x)\\n")
    assert isinstance(r.error_in_exec, UsageError), r.error_in_exec
    print(r.error_in_exec)
assert not shown
"""


def test_magic_refuses_an_unusable_limit() -> None:
    """In a fresh interpreter: the test IPython shell is a singleton of test_magic.py's."""
    out = subprocess.run([sys.executable, "-c", MAGIC_SCRIPT], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["%%gambit: not a byte size: 'inf' (write e.g. 1048576, '256MiB' or '1.5GB')",
                   "%%gambit: a byte size must be a whole number of bytes, got '1.5'",
                   "%%gambit: a byte size must be a whole number of bytes, got '0.5'"]


@pytest.fixture(scope="module")
def trace() -> gx.Trace:
    return gx.explore(_sin2, np.ones((4, 3), np.float32))


@pytest.mark.parametrize("stage", [99, -99])
def test_a_stage_out_of_range_names_the_range_and_the_stages(trace: gx.Trace, stage: int) -> None:
    n = len(trace.stages)
    with pytest.raises(IndexError) as e:
        trace.run(stage=stage)
    text = str(e.value)
    assert f"no stage {stage}" in text and f"0..{n - 1}" in text and f"-{n}..-1" in text
    assert all(s.name in text for s in trace.stages)


def test_stages_in_range_by_index_or_name(trace: gx.Trace) -> None:
    n = len(trace.stages)
    assert trace.stage(-n) is trace.stages[0] and trace.stage(-1) is trace.final
    assert trace.stage(np.int64(0)) is trace.stages[0]
    assert trace.stage("traced") is trace.stages[0]
    np.testing.assert_allclose(trace.run(stage=-n).value, np.sin(1.0) * 2, rtol=1e-6)
    with pytest.raises(KeyError, match="no stage named 'nope'; stages: 0 traced"):
        trace.stage("nope")


# ---------------------------------------------------------------- the user's mistakes, named

def _float8(x):
    return x.astype(jnp.float8_e4m3fn) * 2


def _mismatched_product(x, y):
    return x @ y


def _python_branch(x):
    if x.sum() > 0:
        return x
    return -x


def _pairwise(x, y):
    return jnp.sum((x[:, None] - y[None]) ** 2, -1).max()


A, B = np.ones((64, 8), np.float32), np.ones((3, 4), np.float32)
USER_LINE_ERRORS = {  # name -> (what the user runs, what the error must say besides the line)
    "element type": (lambda: gx.explore(_float8, A), _float8,
                     ["element type float8_e4m3fn", "not supported", "supported: pred"]),
    "shapes": (lambda: gx.explore(_mismatched_product, B, B), _mismatched_product,
               ["tracing _mismatched_product failed", "contracting dimensions"]),
    "python branch": (lambda: gx.explore(_python_branch, A), _python_branch,
                      ["TracerBoolConversionError", "lax.cond"]),
    "memory limit": (lambda: gx.explore(_pairwise, A, A, memory_limit=16), _pairwise,
                     ["memory_limit=16 B", "cannot be met", "smallest feasible limit is"]),
}


@pytest.mark.parametrize("name", USER_LINE_ERRORS)
def test_a_mistake_names_its_cause_and_the_users_line(name: str) -> None:
    run, fn, says = USER_LINE_ERRORS[name]
    lines, first = inspect.getsourcelines(fn)
    number, text = first + 1, lines[1].strip()  # the function's first line: where it fails
    with pytest.raises(ValueError) as e:  # TraceError, InfeasibleMemoryLimit: ValueErrors
        run()
    msg = str(e.value)
    assert f"test_bad_input.py:{number}" in msg and text in msg, msg
    for part in says:
        assert part in msg, (part, msg)


def test_a_missing_argument_names_the_parameter() -> None:
    """No line of the user's ran (the call itself failed): the cause names the parameter."""
    with pytest.raises(gx.TraceError, match="missing 1 required positional argument: 'y'"):
        gx.explore(lambda x, y: x + y, A)
    t = gx.explore(lambda x, y: x + y, A, A, pipeline=[])
    with pytest.raises(ValueError, match="traced with arguments shaped like"):
        t.run(A)


# ---------------------------------------------------------------- distances at zero

# issue 17's reports: a point's distance to itself was about 1e-5 after euclidean-distance
# (the quadratic form's rounding), so sqrt gave 0.00195, `> 0` True and floor(exp(-d/2)) 0.
# tests/passes/test_euclidean_distance.py covers more shapes, shared points and the tolerance.
AT_ZERO = {
    "sqrt": (lambda a: jnp.sqrt(jnp.sum((a[:, None] - a[None]) ** 2, -1)), 0.0),
    "positive": (lambda a: (jnp.sum((a[:, None] - a[None]) ** 2, -1)) > 0.0, False),
    "floor-exp": (lambda a: jnp.floor(jnp.exp(-0.5 * jnp.sum((a[:, None] - a[None]) ** 2, -1))),
                  1.0),
}


@pytest.mark.parametrize("backend", ["reference", *KERNEL_BACKENDS, "jax"])
@pytest.mark.parametrize("name", AT_ZERO)
def test_a_distance_to_itself_is_exactly_zero(name: str, backend: str) -> None:
    fn, diagonal = AT_ZERO[name]
    a = np.random.default_rng(5).standard_normal((30, 16)).astype(np.float32) * 10
    t = gx.explore(fn, a)
    assert "sub" not in t.final.graph.ops()  # the rewrite fired
    got = np.asarray(t.run(backend=backend).value)
    assert (np.diag(got) == diagonal).all() and (np.diag(np.asarray(fn(a))) == diagonal).all()


# ---------------------------------------------------------------- top_k and the sign of NaN

def test_top_k_ranks_nan_by_its_sign_as_lax_top_k_does() -> None:
    """XLA's total order: +NaN above +inf, -NaN (sqrt or log of a negative number on x86)
    below -inf. Found by the differential fuzz (top_k of a sqrt)."""
    with np.errstate(invalid="ignore"):
        neg_nan = np.sqrt(np.float32(-1.0))
    pos_nan = np.abs(neg_nan)
    assert np.signbit(neg_nan) and not np.signbit(pos_nan)
    x = np.array([1.0, neg_nan, -np.inf, pos_nan, np.inf, -2.0, neg_nan, pos_nan], np.float32)
    want = [np.asarray(v) for v in jax.lax.top_k(jnp.asarray(x), 8)]
    t = gx.explore(lambda x: jax.lax.top_k(x, 8), x)
    for backend in ("reference", *KERNEL_BACKENDS, "jax"):
        got = [np.asarray(v) for v in t.run(backend=backend).value]
        np.testing.assert_array_equal(got[1], want[1], err_msg=backend)
    # split along the top_k axis: chunks' top 3 merged (backends/combine.py)
    def body(cols: int) -> Graph:
        b = GraphBuilder("body")
        top = b.add("top_k", [b.param(TensorType((2, cols), "f32"), "x")], {"k": 3, "axis": 1})
        return b.build([b.add("get_tuple_element", [top], {"index": i}) for i in (0, 1)])

    b = GraphBuilder("main")
    p = b.param(TensorType((2, 16), "f32"), "x")
    loop = b.add("loop", [p], {"size": 16, "chunk": 4, "split_inputs": ((0, 1),),
                               "combine": (("top_k", 1), ("index", 0)), "body": body(4)})
    g = b.build([b.add("get_tuple_element", [loop], {"index": k}) for k in (0, 1)])
    xs = np.stack([np.tile(x, 2), np.roll(np.tile(x, 2), 5)])
    want3 = np.asarray(jax.lax.top_k(jnp.asarray(xs), 3)[1])
    for backend in ("reference", *KERNEL_BACKENDS, "jax"):
        got = registry.run_graph(g, [xs], backend).outputs[1]
        np.testing.assert_array_equal(np.asarray(got), want3, err_msg=backend)
