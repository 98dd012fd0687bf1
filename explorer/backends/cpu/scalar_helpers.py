"""The numba runtime: scalar helpers that generated CPU kernels (and the loops outside them)
call, compiled on first use so that importing this module does not need numba.

Generated kernels import these public names (numba_dialect.PRELUDE); the op table's numba
scalar forms name them too (`idiv({0}, {1})`, `exp32({0})`). Each is `inline="always"` or a
separate function whose one instruction keeps its flag (radd, rmul), so LLVM still vectorizes
the loops that call them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

NAMES = ('maximum', 'minimum', 'top_k_key', 'idiv', 'irem', 'radd', 'rmul', 'round_away', 'to_int',
         'tanh32', 'exp32', 'llvm_maximum', 'llvm_minimum', 'bitcast', 'erfinv')


def _compile() -> dict[str, object]:
    from numba import njit, types
    from numba.extending import intrinsic, overload

    @njit(inline="always")
    def maximum(a, b):  # np.maximum: NaN wins
        return a if (a > b or a != a) else b

    @njit(inline="always")
    def minimum(a, b):
        return a if (a < b or a != a) else b

    @njit(inline="always")
    def top_k_key(x):  # lax.top_k's total order (ir/ops.top_k_key): +NaN, +inf, ..., -inf, -NaN
        if x != x:
            return np.inf if math.copysign(1.0, x) > 0 else -np.inf
        if x == np.inf:
            return 1.7976931348623157e308
        if x == -np.inf:
            return -1.7976931348623157e308
        if x == 0 and math.copysign(1.0, x) < 0:
            return -5e-324  # -0.0 just below +0.0
        return np.float64(x)

    @njit(inline="always")
    def idiv(a, b):  # lax.div on integers: truncates toward zero; x / 0 -> -1, as XLA's
        if b == 0:  # all bits set, in a's type (`a * 0 - 1` is garbage for unsigned types)
            return ~(a ^ a)
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q

    @njit(inline="always")
    def irem(a, b):  # C's fmod on integers; x % 0 -> x, as XLA's
        if b == 0:
            return a
        r = abs(a) % abs(b)
        return -r if a < 0 else r

    # Kernels carry no fast-math flags: 'reassoc' lets LLVM fold log(exp(x)) to x (100 instead
    # of inf) and 'contract' turns x*y+z into an fma (-inf instead of inf-inf = nan), results
    # the reference and JAX agree on. Only a reduction's accumulator may reassociate, so that
    # the loop vectorizes (3x on mean(x**2*3+y)): these are separate, not numba-inlined
    # functions, so the flag stays on their one instruction when LLVM inlines them.
    @njit(fastmath={"reassoc"})
    def radd(a, b):
        return a + b

    @njit(fastmath={"reassoc"})
    def rmul(a, b):
        return a * b

    def _ieee(name: str) -> Any:  # LLVM's maximum/minimum: NaN wins, and loops vectorize
        @intrinsic
        def fn(typingctx, a, b):
            from llvmlite import ir

            if not (isinstance(a, types.Float) and a == b):
                return None

            def codegen(context, builder, sig, args):
                t = args[0].type
                f = builder.module.declare_intrinsic(name, [t], ir.FunctionType(t, [t, t]))
                return builder.call(f, args)
            return a(a, b), codegen
        return fn

    llvm_maximum, llvm_minimum = _ieee("llvm.maximum"), _ieee("llvm.minimum")

    # float32 tanh as XLA's CPU backend computes it (EmitFastTanh): x itself below 4e-4,
    # else an odd 13/6 rational minimax on x clamped to [-9, 9], where tanh rounds to +-1.
    # Only multiplies, adds and one divide, so the loop vectorizes; libm's tanhf does not
    # (a GPT block's gelu: 19 ns an element through tanhf).
    @njit(inline="always")
    def tanh32(x):
        c = min(max(x, np.float32(-9.0)), np.float32(9.0))
        c2 = c * c
        p = c2 * np.float32(-2.76076847742355e-16) + np.float32(2.00018790482477e-13)
        p = c2 * p + np.float32(-8.60467152213735e-11)
        p = c2 * p + np.float32(5.12229709037114e-08)
        p = c2 * p + np.float32(1.48572235717979e-05)
        p = c2 * p + np.float32(6.37261928875436e-04)
        p = c2 * p + np.float32(4.89352455891786e-03)
        q = c2 * np.float32(1.19825839466702e-06) + np.float32(1.18534705686654e-04)
        q = c2 * q + np.float32(2.26843463243900e-03)
        q = c2 * q + np.float32(4.89352518554385e-03)
        r = c * p / q
        return x if abs(x) < np.float32(0.0004) else r  # a select, so the loop vectorizes

    @intrinsic
    def _bits_as_f32(typingctx, bits):  # an int32's bits as a float32 (C's memcpy idiom)
        from llvmlite import ir

        if bits != types.int32:
            return None
        return types.float32(types.int32), \
            lambda context, builder, sig, args: builder.bitcast(args[0], ir.FloatType())

    # float32 exp without libm, so the loop vectorizes (libm's expf does not: a softmax's
    # exp ran at 2.8 ns an element): x = n ln2 + r with n = round(x log2 e), Cephes'
    # degree-6 polynomial for e^r, and 2^n as two powers of two made from exponent bits (each
    # in the normal range, so the one rounding of the last product gives libm's subnormals
    # and overflow); NaN stays NaN. Within 3 ulp of the correctly rounded result.
    @njit(inline="always")
    def exp32(x):
        # far below the subnormal range the result is 0: compute on 0 there instead, as
        # arithmetic on subnormals is 100x slower (a causal mask's exp(-1e9) at every other
        # element of an attention row)
        c = min(x if x > np.float32(-104.0) else np.float32(0.0), np.float32(89.0))
        n = np.floor(c * np.float32(1.44269504) + np.float32(0.5))
        r = c - n * np.float32(0.693359375) - n * np.float32(-2.12194440e-4)
        z = r * r
        p = np.float32(1.9875691500e-4) * r + np.float32(1.3981999507e-3)
        p = p * r + np.float32(8.3334519073e-3)
        p = p * r + np.float32(4.1665795894e-2)
        p = p * r + np.float32(1.6666665459e-1)
        p = p * r + np.float32(5.0000001201e-1)
        k = np.int32(n)  # in int32 throughout (as int64, 30% slower: AVX2 has no
        half = np.int32(k >> np.int32(1))  # vector float -> int64 conversion)
        y = (p * z + r + np.float32(1.0)) * _bits_as_f32(np.int32((half + np.int32(127)) << np.int32(23)))
        y = y * _bits_as_f32(np.int32((k - half + np.int32(127)) << np.int32(23)))
        y = np.float32(np.inf) if x > np.float32(89.0) else y
        y = np.float32(0.0) if x <= np.float32(-104.0) else y
        return x if x != x else y

    @intrinsic
    def bitcast(typingctx, x, to):  # x's bits as number type `to` of the same width
        target = getattr(to, "instance_type", None)
        if not (isinstance(x, types.Number) and isinstance(target, types.Number)
                and x.bitwidth == target.bitwidth):
            return None

        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], context.get_value_type(target))
        return target(x, to), codegen

    # lax.erf_inv: Giles' single-precision polynomial (XLA's own for float32), then two
    # Newton steps on erf in float64, so float64 results are as good as SciPy's too
    @njit(inline="always")
    def erfinv(x):
        y = np.float64(x)
        if not abs(y) < 1.0:  # +-1 -> +-inf; NaN and |x| > 1 -> NaN
            return math.copysign(np.inf, y) if abs(y) == 1.0 else np.nan
        w = -math.log1p(-y * y)
        if w < 5.0:
            w = w - 2.5
            p = 2.81022636e-08
            p = 3.43273939e-07 + p * w
            p = -3.5233877e-06 + p * w
            p = -4.39150654e-06 + p * w
            p = 0.00021858087 + p * w
            p = -0.00125372503 + p * w
            p = -0.00417768164 + p * w
            p = 0.246640727 + p * w
            p = 1.50140941 + p * w
        else:
            w = math.sqrt(w) - 3.0
            p = -0.000200214257
            p = 0.000100950558 + p * w
            p = 0.00134934322 + p * w
            p = -0.00367342844 + p * w
            p = 0.00573950773 + p * w
            p = -0.0076224613 + p * w
            p = 0.00943887047 + p * w
            p = 1.00167406 + p * w
            p = 2.83297682 + p * w
        r = p * y
        for _ in range(2):
            r = r - (math.erf(r) - y) / (1.1283791670955126 * math.exp(-r * r))
        return r

    @njit(inline="always")
    def round_away(x):
        return np.sign(x) * np.floor(np.abs(x) + 0.5)

    def to_int(x, lo, hi, t):  # x as integer type t, whose bounds are lo and hi
        raise TypeError("to_int is called from numba kernels only")

    @overload(to_int, inline="always")
    def _to_int_numba(x, lo, hi, t):
        if not isinstance(x, types.Float):
            return lambda x, lo, hi, t: t(x)  # an integer wraps, as NumPy and XLA do

        def saturate(x, lo, hi, t):  # as XLA: truncate; NaN -> 0; out of range -> lo or hi
            if x != x:
                return t(0)
            if x >= hi:  # compared in float64, where hi may round up (2**63 - 1 -> 2**63)
                return t(hi)
            if x <= lo:
                return t(lo)
            return t(x)
        return saturate

    found = locals()
    return {name: found[name] for name in NAMES}


def __getattr__(name: str) -> object:
    """The helpers compile on first use, so importing this module does not need numba."""
    helpers = _compile()
    globals().update(helpers)
    if name in helpers:
        return helpers[name]
    raise AttributeError(name)
