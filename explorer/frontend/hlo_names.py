"""Name tables between HLO and our IR, read off the op table: elementwise opcodes (each row's
`hlo` trait), reduction computations (the monoids), and names."""

from __future__ import annotations

import re
from typing import Any

from ..ir.ops import MONOID_REDUCTIONS, OPS
from ..ir.traits import MONOIDS, OpKind

# HLO opcode -> (our op, its attributes), for ops that are the same function elementwise.
ELEMENTWISE: dict[str, tuple[str, dict[str, Any]]] = {
    opcode: (name, attrs) for name, row in OPS.items() if row.kind == OpKind.ELEMENTWISE
    for opcode, attrs in row.hlo
}

# The opcode of a reduction's computation -> (our reduction, the init value that is its
# identity: "zero", "one", "lowest", "highest", "true" or "false").
REDUCERS: dict[str, tuple[str, str]] = {
    MONOIDS[m].hlo: (op, MONOIDS[m].identity) for m, op in MONOID_REDUCTIONS.items()
}


def sanitize(name: str) -> str:
    """An HLO name as a name our IR text accepts (`@[A-Za-z_][\\w.-]*`)."""
    name = re.sub(r"[^\w.\-]", "_", name, flags=re.ASCII) or "_"
    return name if re.match(r"[A-Za-z_]", name) else "_" + name
