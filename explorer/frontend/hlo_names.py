"""Name tables between HLO and our IR: elementwise opcodes, reduction computations, names."""

from __future__ import annotations

import re
from typing import Any

# HLO opcode -> (our op, its attributes), for ops that are the same function elementwise.
ELEMENTWISE: dict[str, tuple[str, dict[str, Any]]] = {
    "add": ("add", {}), "subtract": ("sub", {}), "multiply": ("mul", {}),
    "divide": ("div", {}), "remainder": ("rem", {}), "power": ("pow", {}),
    "maximum": ("max", {}), "minimum": ("min", {}), "atan2": ("atan2", {}),
    "and": ("and", {}), "or": ("or", {}), "xor": ("xor", {}), "not": ("not", {}),
    "abs": ("abs", {}), "negate": ("neg", {}), "sign": ("sign", {}),
    "exponential": ("exp", {}), "exponential-minus-one": ("expm1", {}), "log": ("log", {}),
    "log-plus-one": ("log1p", {}), "sqrt": ("sqrt", {}), "rsqrt": ("rsqrt", {}),
    "cbrt": ("cbrt", {}), "sine": ("sin", {}), "cosine": ("cos", {}), "tan": ("tan", {}),
    "tanh": ("tanh", {}), "logistic": ("logistic", {}), "erf": ("erf", {}),
    "floor": ("floor", {}), "ceil": ("ceil", {}), "is-finite": ("is_finite", {}),
    "round-nearest-afz": ("round", {"rounding_method": 0}),
    "round-nearest-even": ("round", {"rounding_method": 1}),
    "copy": ("copy", {}), "clamp": ("clamp", {}),
}

# The opcode of a reduction's computation -> (our reduction, the init value that is its
# identity: "zero", "one", "lowest", "highest", "true" or "false").
REDUCERS: dict[str, tuple[str, str]] = {
    "add": ("reduce_sum", "zero"), "multiply": ("reduce_prod", "one"),
    "maximum": ("reduce_max", "lowest"), "minimum": ("reduce_min", "highest"),
    "and": ("reduce_and", "true"), "or": ("reduce_or", "false"),
}


def sanitize(name: str) -> str:
    """An HLO name as a name our IR text accepts (`@[A-Za-z_][\\w.-]*`)."""
    name = re.sub(r"[^\w.\-]", "_", name, flags=re.ASCII) or "_"
    return name if re.match(r"[A-Za-z_]", name) else "_" + name
