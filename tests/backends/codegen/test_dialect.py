"""The dialects (backends/codegen/dialect.py, cpu/numba_dialect.py, gpu/cuda_dialect.py): the
same statements written through `Block` in each target's syntax."""

from __future__ import annotations

import numpy as np

from explorer.backends.codegen.dialect import Block, Dialect
from explorer.backends.cpu.numba_dialect import NUMBA
from explorer.backends.gpu.cuda_dialect import CUDA


def _loop(d: Dialect) -> list[str]:
    b = Block(d)
    b(d.declare("acc", "f64", d.identity("max", "f64")))
    with b.block(d.for_range("j", "0", "n")):
        with b.block(d.if_(d.or_("x > acc", "x != x"))):
            b(d.assign("acc", "x"))
            b.reopen(d.else_())
            b(d.assign("acc", d.combine("max", "acc", d.cast("x", "f64"))))
    return b.lines


def test_one_block_in_both_syntaxes() -> None:
    assert _loop(NUMBA) == ["acc = np.float64(-np.inf)",
                            "for j in range(n):",
                            "    if x > acc or x != x:",
                            "        acc = x",
                            "    else:",
                            "        acc = maximum(acc, np.float64(x))"]
    assert _loop(CUDA) == ["double acc = -_inf();",
                           "for (long j = 0; j < n; ++j) {",
                           "  if (x > acc || x != x) {",
                           "    acc = x;",
                           "  } else {",
                           "    acc = maximum(acc, (double)(x));",
                           "  }",
                           "}"]


def test_literals_and_accumulation() -> None:
    assert NUMBA.literal(np.nan, "f32") == "np.float32(np.nan)"
    assert CUDA.literal(np.nan, "f32") == "((float)_nan())"
    assert CUDA.literal(-(2**63), "i64") == "(-9223372036854775807LL - 1)"
    # only the numba dialect's sums reassociate (radd): LLVM vectorizes the accumulation
    assert NUMBA.accumulate("add", "a", "b") == "radd(a, b)"
    assert CUDA.accumulate("add", "a", "b") == "a + b"
    assert NUMBA.index("x", ["i", "0"], (4, 1)) == "x[i, 0]"
    assert CUDA.index("x", ["i", "j"], (4, 3)) == "x[i * 3 + j]"
