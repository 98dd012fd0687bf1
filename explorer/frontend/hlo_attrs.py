"""Readers for the values of HLO attributes, from the raw text that `hlo.parse_hlo` keeps.

Each reader takes the module text and the attribute (for the error position) and returns a
plain Python value, or raises ParseError pointing at the attribute.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..ir import dtypes
from ..ir.parser import ParseError
from .hlo import Attribute

_INT = r"[-+]?\d+"


def error_at(text: str, pos: int, message: str) -> ParseError:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return ParseError(message, line, col)


def ints(src: str, a: Attribute) -> tuple[int, ...]:
    """`{0,1}`, `{}` or a bare `3`."""
    body = a.text.strip()
    if re.fullmatch(_INT, body):
        return (int(body),)
    if not re.fullmatch(rf"\{{\s*(?:{_INT}(?:\s*,\s*{_INT})*)?\s*\}}", body):
        raise error_at(src, a.pos, f"{a.key}: expected a list of integers such as {{0,1}}")
    return tuple(int(x) for x in re.findall(_INT, body))


def integer(src: str, a: Attribute) -> int:
    if not re.fullmatch(_INT, a.text.strip()):
        raise error_at(src, a.pos, f"{a.key}: expected an integer")
    return int(a.text)


def name_ref(src: str, a: Attribute) -> str:
    """`%region_0.1` -> 'region_0.1'."""
    m = re.fullmatch(r"%?([\w.\-]+)", a.text.strip())
    if m is None:
        raise error_at(src, a.pos, f"{a.key}: expected a computation name")
    return m.group(1)


def name_refs(src: str, a: Attribute) -> tuple[str, ...]:
    """`{%a, %b}` -> ('a', 'b')."""
    m = re.fullmatch(r"\{([^{}]*)\}", a.text.strip())
    if m is None:
        raise error_at(src, a.pos, f"{a.key}: expected a list of computation names")
    names = [s.strip() for s in m.group(1).split(",") if s.strip()]
    if not all(re.fullmatch(r"%?[\w.\-]+", n) for n in names):
        raise error_at(src, a.pos, f"{a.key}: expected a list of computation names")
    return tuple(n.lstrip("%") for n in names)


def slices(src: str, a: Attribute) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """`{[0:2], [1:7:3]}` -> (starts, limits, strides)."""
    one = rf"\[\s*({_INT})\s*:\s*({_INT})\s*(?::\s*({_INT})\s*)?\]"
    if not re.fullmatch(rf"\{{\s*(?:{one}(?:\s*,\s*{one})*)?\s*\}}", a.text.strip()):
        raise error_at(src, a.pos, "slice: expected {[start:limit:stride], ...}")
    found = re.findall(one, a.text)
    return (tuple(int(s) for s, _, _ in found), tuple(int(l) for _, l, _ in found),
            tuple(int(st or 1) for _, _, st in found))


def padding(src: str, a: Attribute) -> tuple[tuple[int, int, int], ...]:
    """`0_0x1_2_1` -> ((0, 0, 0), (1, 2, 1)): low_high[_interior] per dimension."""
    out = []
    for part in a.text.strip().split("x") if a.text.strip() else []:
        nums = part.split("_")
        if len(nums) not in (2, 3) or not all(re.fullmatch(_INT, n) for n in nums):
            raise error_at(src, a.pos, f"padding: bad dimension {part!r}")
        lo, hi, *interior = (int(n) for n in nums)
        out.append((lo, hi, interior[0] if interior else 0))
    return tuple(out)


def metadata(src: str, a: Attribute) -> dict[str, str | int]:
    """`{op_name="jit(f)/add" source_file="f.py" source_line=3}` -> a dict."""
    body = a.text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise error_at(src, a.pos, "metadata: expected {key=value ...}")
    out: dict[str, str | int] = {}
    for key, string, number in re.findall(r'(\w+)=(?:"((?:[^"\\]|\\.)*)"|(-?\d+))', body):
        out[key] = int(number) if number else string.replace('\\"', '"').replace("\\\\", "\\")
    return out


@dataclass(frozen=True)
class ConvDims:
    """Convolution dimension numbers from `dim_labels=b01f_01io->b01f`."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]


_DIGITS = "0123456789"


def _labels(text: str, special: str) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    if sorted(c for c in text if c not in _DIGITS) != sorted(special):
        return None
    digits = sorted((int(c), i) for i, c in enumerate(text) if c in _DIGITS)
    if [d for d, _ in digits] != list(range(len(digits))):
        return None
    return tuple(text.index(c) for c in special), tuple(i for _, i in digits)


def conv_dims(src: str, a: Attribute) -> ConvDims:
    m = re.fullmatch(r"(\w+)_(\w+)->(\w+)", a.text.strip())
    parts = m and (_labels(m.group(1), "bf"), _labels(m.group(2), "io"), _labels(m.group(3), "bf"))
    if not parts or None in parts:
        raise error_at(src, a.pos, "dim_labels: expected labels such as b01f_01io->b01f")
    (ib, ifeat), isp = parts[0]  # type: ignore[misc]
    (ki, ko), ksp = parts[1]  # type: ignore[misc]
    (ob, of), osp = parts[2]  # type: ignore[misc]
    return ConvDims(ib, ifeat, isp, ki, ko, ksp, ob, of, osp)


def window(src: str, a: Attribute) -> dict[str, tuple[tuple[int, ...], ...] | tuple[int, ...]]:
    """`{size=3x3 stride=2x2 pad=1_1x1_1}` -> {'size': (3, 3), 'stride': (2, 2),
    'pad': ((1, 1), (1, 1))}."""
    body = a.text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise error_at(src, a.pos, "window: expected {size=... ...}")
    out: dict[str, tuple] = {}
    for item in body[1:-1].split():
        key, _, value = item.partition("=")
        parts = value.split("x")
        try:
            if key == "pad":
                out[key] = tuple(tuple(int(n) for n in p.split("_")) for p in parts)
            else:
                out[key] = tuple(int(p) for p in parts)
        except ValueError:
            raise error_at(src, a.pos, f"window: bad {key!r} value {value!r}") from None
    return out


_SPECIAL = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan, "-nan": np.nan, "true": True,
            "false": False}
_SCALAR = re.compile(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
                     r"|-?inf|-?nan(?:\(0x[0-9a-fA-F]+\))?|true|false")


def literal(payload: str, dtype: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """The value of `constant(...)`, or None when XLA elided it (`{...}`) or we cannot read it
    (odd element types): the instruction then stays opaque. A complex element is written
    `(real, imaginary)`, as XLA prints it, or as a plain real number."""
    body = re.sub(r"^\s*[a-z]\w*\[[^\]]*\](?:\{[^}]*\})?", "", payload)  # `f32[2] {1, 2}` form
    if "..." in body or not re.fullmatch(r"[\s{},\w.+\-()]*", body):
        return None
    if re.sub(r"[\s{},]", "", body) == "" and int(np.prod(shape)) != 0:
        return None
    values = [_SPECIAL.get(re.sub(r"\(.*\)", "", v), v) for v in _SCALAR.findall(body)]
    rest = re.sub(_SCALAR, "", body)
    pairs = dtype in ("c64", "c128") and "(" in rest  # complex elements as (real, imaginary)
    if pairs:
        rest = re.sub(r"\(\s*,\s*\)", "", rest)
    if rest.strip(" \n{},") != "":
        return None
    try:
        npd = dtypes.to_numpy(dtype)
        if dtypes.is_int(dtype):
            info = np.iinfo(npd)
            flat = [int(v) for v in values]  # exact, also for 64-bit values
            if any(not info.min <= v <= info.max for v in flat):
                return None
        elif dtypes.is_bool(dtype):
            flat = [v if isinstance(v, bool) else bool(float(v)) for v in values]
        else:
            flat = [float(v) if isinstance(v, str) else v for v in values]
        if pairs:
            flat = [complex(r, i) for r, i in zip(flat[::2], flat[1::2])]
        with np.errstate(all="ignore"):
            return np.array(flat, dtype=npd).reshape(shape)
    except (ValueError, TypeError, OverflowError):
        return None
