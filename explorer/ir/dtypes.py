"""Element types by their short HLO-style names (f32, i32, pred, ...), and JAX's `float0`.

`float0` is the tangent type of integer and boolean values (the cotangent a `custom_vjp`'s
backward pass or `jax.grad(..., allow_int=True)` gives an integer input): its elements hold no
data (NumPy's zero-width void, `jax.dtypes.float0`, itemsize 0). It is carried as JAX carries
it, through the rows that only move or place elements; its bytes count 0 everywhere.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

_BY_NAME: dict[str, np.dtype] = {
    "pred": np.dtype(np.bool_),
    # 4-bit integers: NumPy holds one per byte (ml_dtypes), XLA packs two; `bits` says 4
    "i4": np.dtype(ml_dtypes.int4),
    "u4": np.dtype(ml_dtypes.uint4),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "c64": np.dtype(np.complex64),
    "c128": np.dtype(np.complex128),
    # equal to jax.dtypes.float0 (without importing JAX here)
    "float0": np.dtype([("float0", np.void, 0)]),
}
_BY_DTYPE = {v: k for k, v in _BY_NAME.items()}

NAMES = tuple(_BY_NAME)


def to_numpy(name: str) -> np.dtype:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown element type {name!r}; known: {', '.join(NAMES)}") from None


def from_numpy(dtype) -> str:
    dt = np.dtype(dtype)
    try:
        return _BY_DTYPE[dt]
    except KeyError:
        raise ValueError(f"unsupported element type {dt}") from None


def is_float0(name: str) -> bool:
    """Whether the type is JAX's float0, whose elements hold no data."""
    return name == "float0"


def is_float(name: str) -> bool:
    return name in ("bf16", "f16", "f32", "f64")


def is_int(name: str) -> bool:
    return name[0] in "iu"  # (not float0)


def is_unsigned(name: str) -> bool:
    return name[0] == "u"


def is_bool(name: str) -> bool:
    return name == "pred"


def itemsize(name: str) -> int:
    """Bytes an element takes in a NumPy array (a 4-bit integer takes one, float0 none)."""
    return _BY_NAME[name].itemsize


def bits(name: str) -> int:
    """The element type's width in bits, as XLA counts it (i4: 4, pred: 8, float0: 0)."""
    return 4 if name in ("i4", "u4") else 8 * _BY_NAME[name].itemsize


def iinfo(name: str) -> Any:
    """The range of an integer type (NumPy's iinfo does not know the 4-bit ones)."""
    return ml_dtypes.iinfo(_BY_NAME[name])


# The C type of each element type a generated CUDA kernel handles.
C_TYPES = {"pred": "bool", "i8": "signed char", "i16": "short", "i32": "int", "i64": "long long",
           "u8": "unsigned char", "u16": "unsigned short", "u32": "unsigned int",
           "u64": "unsigned long long", "f32": "float", "f64": "double"}
