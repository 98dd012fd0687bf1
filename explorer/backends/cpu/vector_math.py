"""Vector math for generated CPU kernels: glibc's libmvec, called four lanes at a time.

Why: a map-reduce kernel's inner loop (cpu/mapreduce.py) is bound by its transcendental calls,
`exp` in a Gaussian kernel-vector product. LLVM vectorizes that loop, but without a vector
math library it splits `llvm.exp.v4f64` back into four scalar libm calls. Numba only maps it
to a vector library with Intel's SVML, and PyPI's llvmlite is built without SVML (and without
LLVM's `-vector-library` option). glibc ships libmvec on every x86-64 Linux, with the
vector-function ABI's names (`_ZGVdN4v_exp`: AVX2, 4 lanes, one vector argument); calling it
from the kernel through a numba intrinsic halves the kernel-vector product's time (measured:
1.29 s -> 0.67 s at N = M = 20,000 on 2 cores). glibc documents these functions to within
4 ulp of the correctly rounded result (libm's scalar ones within 1-2), which the backends'
tolerances cover.

`symbol(c_name, dtype)` is the libmvec function that computes C's `c_name` on four lanes of
`dtype`, or None where there is none (no libmvec, no AVX2, not x86-64 Linux, or a function
libmvec lacks): the generator then emits scalar code, as before. `vmath4(symbol, a, b, c, d)`
is the call generated code makes; it returns the four results as a tuple.
"""

from __future__ import annotations

import ctypes
import functools
import platform
import sys
from typing import Any

LANES = 4
# the variant per element type: AVX2 ('d') with 4 doubles; SSE4 ('b') with 4 floats
_MANGLE = {"f64": "_ZGVdN4v_{0}", "f32": "_ZGVbN4v_{0}f"}


@functools.cache
def _libmvec() -> Any:
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return None
    try:
        import llvmlite.binding as ll

        if not ll.get_host_cpu_features().get("avx2", False):
            return None
        return ctypes.CDLL("libmvec.so.1")
    except (OSError, ImportError):
        return None


@functools.cache
def symbol(c_name: str, dtype: str) -> str | None:
    """The libmvec function for C's `c_name` on 4 lanes of `dtype`, registered with LLVM so
    that kernels (also those numba loads from its disk cache) link to it; or None."""
    lib = _libmvec()
    if lib is None or dtype not in _MANGLE or not c_name.isidentifier():
        return None
    name = _MANGLE[dtype].format(c_name)
    try:
        address = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except AttributeError:  # libmvec has no such function (sqrt, or an older glibc)
        return None
    import llvmlite.binding as ll

    ll.add_symbol(name, address)
    return name


def _intrinsic() -> Any:
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic(prefer_literal=True)
    def vmath4(typingctx: Any, sym: Any, a: Any, b: Any, c: Any, d: Any) -> Any:
        if not isinstance(sym, types.StringLiteral) or len({a, b, c, d}) != 1 or \
                a not in (types.float64, types.float32):
            return None
        name = sym.literal_value
        element = ir.DoubleType() if a == types.float64 else ir.FloatType()
        sig = types.UniTuple(a, LANES)(sym, a, b, c, d)

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            vec = ir.VectorType(element, LANES)
            fn = builder.module.globals.get(name) or \
                ir.Function(builder.module, ir.FunctionType(vec, [vec]), name)
            packed = ir.Constant(vec, ir.Undefined)
            for k, x in enumerate(args[1:]):
                packed = builder.insert_element(packed, x, ir.IntType(32)(k))
            out = builder.call(fn, [packed])
            lanes = [builder.extract_element(out, ir.IntType(32)(k)) for k in range(LANES)]
            return context.make_tuple(builder, signature.return_type, lanes)

        return sig, codegen

    return vmath4


def __getattr__(name: str) -> object:
    """Generated kernels import `vmath4`, made on first use: importing this module does not
    need numba."""
    if name == "vmath4":
        value = _intrinsic()
        globals()[name] = value
        return value
    raise AttributeError(name)
