"""The numba/Python dialect: how generated CPU kernels spell types, literals and statements,
and the prelude every kernel module starts with (it imports the numba runtime,
scalar_helpers.py, and names that file's hash)."""

from __future__ import annotations

import hashlib
import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...ir import dtypes
from ..codegen.dialect import Dialect
from ..codegen.kernel_plan import PlanError
from . import scalar_helpers
from .numba_forms import FORMS

SUPPORTED = frozenset({"pred", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64"})


def numba_takes(dtype: Any) -> bool:
    """Whether numba code reads and writes arrays of this NumPy element type (not float16,
    ml_dtypes' bfloat16 and 4-bit integers, complex or object): the loops outside generated
    kernels (sorting, indexing, pooling, im2col) keep the reference for the others."""
    try:
        return dtypes.from_numpy(dtype) in SUPPORTED
    except ValueError:
        return False


def np_type(d: str) -> str:
    """The NumPy scalar constructor for element type `d`, as generated code spells it."""
    if d not in SUPPORTED:
        raise PlanError(f"element type {d} has no numba kernel")
    return "np.bool_" if d == "pred" else f"np.{dtypes.to_numpy(d).name}"


def scalar(v: object, d: str) -> str:
    """A typed scalar literal: np.float32(3.0), np.float64(-np.inf), np.bool_(True)."""
    v = np.asarray(v).item()
    if isinstance(v, float) and not math.isfinite(v):
        text = "np.nan" if v != v else ("np.inf" if v > 0 else "-np.inf")
    else:
        text = repr(v)
    return f"{np_type(d)}({text})"


# numba's disk cache checks a kernel module's own file, not the helpers it inlines: the
# prelude names the helpers' hash, so that changed helpers make new modules (kernels.load keys
# them by their text) instead of reusing machine code built from the old ones.
_HELPERS_VERSION = hashlib.sha1(Path(scalar_helpers.__file__).read_bytes()).hexdigest()[:12]

_IMPORT = "from explorer.backends.cpu.scalar_helpers import ("
PRELUDE = f'''import math

import numpy as np
from numba import njit, prange

{textwrap.fill(", ".join(scalar_helpers.NAMES) + ")", 96, initial_indent=_IMPORT,
               subsequent_indent=" " * len(_IMPORT))}
# helpers {_HELPERS_VERSION}
'''


class NumbaDialect(Dialect):
    name = "numba"
    forms = FORMS
    indent = "    "
    helpers = PRELUDE
    shape_generic = True  # numba never frees compiled code: one kernel serves every shape
    unroll = 4  # (a kernel per feature count: the loop's overhead was a third of a d = 3 kNN sweep)

    def type_name(self, d: str) -> str:
        return np_type(d)

    def literal(self, v: object, d: str) -> str:
        return scalar(v, d)

    def cast(self, expr: str, d: str) -> str:
        return f"{np_type(d)}({expr})"

    def accumulate(self, kind: str, a: str, b: str) -> str:
        # sums and products fold through radd/rmul, the only operations allowed to
        # reassociate (scalar_helpers): LLVM then vectorizes the accumulation, while every
        # other operation keeps IEEE semantics
        return {"add": f"radd({a}, {b})", "mul": f"rmul({a}, {b})"}.get(kind) or \
            self.combine(kind, a, b)

    def exp64(self, x: str) -> str:
        return f"math.exp({x})"


    def index(self, array: str, index: Sequence[str], shape: Sequence[int]) -> str:
        return f"{array}[{', '.join(index) or '0'}]"

    def extent(self, array: str, axis: int, size: int) -> str:
        return f"{array}.shape[{axis}]"

    DEFINE = DECLARE = "{0} = {2}"
    ASSIGN = "{0} = {1}"
    IF, ELIF, ELSE, WHILE, BREAK = "if {0}:", "elif {0}:", "else:", "while {0}:", "break"
    TRUE, NOT, AND, OR, SELECT = "True", "not {0}", " and ", " or ", "{1} if {0} else {2}"

    FLOORDIV = "({0} // {1})"

    def for_range(self, var: str, start: str, stop: str, step: str = "1") -> str:
        bounds = stop if start == "0" and step == "1" else \
            f"{start}, {stop}" if step == "1" else f"{start}, {stop}, {step}"
        return f"for {var} in range({bounds}):"


NUMBA = NumbaDialect()
