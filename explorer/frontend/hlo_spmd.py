"""What partitioned HLO adds: shardings on instructions and the collectives XLA inserts.

Our op table has no rows for HLO's collectives (all-reduce, all-gather, reduce-scatter,
collective-permute, all-to-all and their asynchronous -start/-done halves) nor for
partition-id and the SPMD custom calls, so they import as `opaque` nodes named by their HLO
opcode. These readers give such a node, and every parameter, the attributes a reader of the
partitioned program needs, in our IR's printable values:

    hlo_sharding         the instruction's `sharding={...}` as XLA printed it
    replica_groups       the devices that communicate: {{0,1,2,3}} or mesh['x'=4] {'x'}
    source_target_pairs  collective-permute's pairs: {{0,1},{1,2},...}
    channel_id           an int; dimensions: the gathered/exchanged dimensions (ints)
    reduction            the combining computation's opcode (all-reduce, reduce-scatter): "add"
    custom_call_target   for custom-call (SPMDFullToShardShape, Sharding, xla.sdy.*)
"""

from __future__ import annotations

from typing import Any

from . import hlo_attrs as A
from .hlo import HloModule, Instruction

_BASE = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all",
         "ragged-all-to-all", "collective-broadcast")
COLLECTIVES = frozenset(_BASE + tuple(f"{c}-{half}" for c in _BASE for half in ("start", "done")))
# Instructions that only mean something in a program of several partitions.
SPMD_OPCODES = COLLECTIVES | {"partition-id", "replica-id"}

_TEXT_KEYS = ("replica_groups", "source_target_pairs", "custom_call_target")
_INT_KEYS = ("channel_id", "split_dimension")
_INTS_KEYS = ("dimensions",)


def is_collective(opcode: str) -> bool:
    return opcode in COLLECTIVES


def sharding(ins: Instruction) -> dict[str, str]:
    """{'hlo_sharding': '{devices=[4,1]<=[4]}'} for an instruction XLA gave a sharding."""
    a = ins.attrs.get("sharding")
    return {"hlo_sharding": a.text} if a is not None else {}


def leaf_shardings(ins: Instruction, leaves: int) -> list[dict[str, str]]:
    """A tuple's sharding `{{replicated}, {devices=[4,1]<=[4]}}` as one per leaf (XLA lists a
    tuple's shardings flat, one per leaf); nothing when it is not such a list."""
    a = ins.attrs.get("sharding")
    body = a.text.strip() if a is not None else ""
    if not (body.startswith("{{") and body.endswith("}}")):
        return [{} for _ in range(leaves)]
    parts, depth, start = [], 0, 1
    for k, c in enumerate(body[1:-1], 1):
        depth += {"{": 1, "}": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(body[start:k].strip())
            start = k + 1
    parts.append(body[start:-1].strip())
    if len(parts) != leaves:
        return [{} for _ in range(leaves)]
    return [{"hlo_sharding": p} for p in parts]


def spmd_attrs(module: HloModule, ins: Instruction) -> dict[str, Any]:
    """The sharding and, for a collective or SPMD custom call, its communication attributes."""
    out: dict[str, Any] = dict(sharding(ins))
    if ins.opcode not in SPMD_OPCODES and ins.opcode != "custom-call":
        return out
    src = module.text
    for key in _TEXT_KEYS:
        if (a := ins.attrs.get(key)) is not None:
            out[key] = a.text.strip().strip('"')
    for key in _INT_KEYS:
        if (a := ins.attrs.get(key)) is not None:
            out[key] = A.integer(src, a)
    for key in _INTS_KEYS:
        if (a := ins.attrs.get(key)) is not None and ins.opcode in COLLECTIVES:
            out[key] = A.ints(src, a)
    if (a := ins.attrs.get("to_apply")) is not None and ins.opcode in COLLECTIVES:
        comp = module.computations.get(A.name_ref(src, a))
        if comp is not None:
            out["reduction"] = comp.root.opcode
    return out
