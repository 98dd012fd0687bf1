"""A `shard_map` on one host: its body run on every device of its mesh in lockstep, the
reference semantics of a sharded program (ir/ops/sharding.py).

Each input is split per its in_spec into the blocks the devices hold; the body's nodes run in
order, each on every device's values: an ordinary op through the body's interpreter (so every
backend computes the body as it computes anything), a collective through its row's `spmd`
reference over all devices' values at once. Each result's blocks are put back together per
its out_spec (a dimension the spec leaves whole is device 0's copy along it). Values are
dropped after their last use, as the interpreter core drops them.

A collective inside a region nested in the body (a scan of psums) is not run here: it raises,
naming the node.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import Any

import numpy as np

from ..ir import dtypes
from ..ir.graph import Node
from ..ir.ops import OPS
from ..ir.sharding import Sharding
from ..ir.traits import OpKind
from .control_flow import one_or_tuple


def block(x: Any, s: Sharding, device: int) -> Any:
    """The block of `x` that `device` holds under `s` (a view)."""
    x = np.asarray(x)
    index = s.block_index(device, x.ndim)
    shape = s.block_shape(x.shape)
    return x[tuple(slice(k * b, (k + 1) * b) for k, b in zip(index, shape))]


def assemble(blocks: Sequence[Any], s: Sharding, shape: Sequence[int]) -> np.ndarray:
    """The global value from every device's block under `s`."""
    first = np.asarray(blocks[0])
    out = np.empty(tuple(shape), dtype=first.dtype)
    parts = [s.parts(d) for d in range(len(shape))]
    placed: dict[tuple[int, ...], int] = {}
    for d in range(len(blocks)):  # the first device holding each block gives it
        placed.setdefault(s.block_index(d, len(shape)), d)
    for index in product(*(range(p) for p in parts)):
        b = np.asarray(blocks[placed[index]])
        out[tuple(slice(k * n, (k + 1) * n) for k, n in zip(index, b.shape))] = b
    return out


def run_shard_map(interp: Any, n: Node, vals: Sequence[Any]) -> Any:
    """`n`'s results: its body on every device (see the module doc). `interp` is the
    interpreter the node is in; the body's ops run on its child interpreter."""
    a = n.attrs
    mesh, body = a["mesh"], a["body"]
    child = interp.child(n)
    devices = range(mesh.size)
    envs: list[dict[int, Any]] = [{} for _ in devices]
    for p, x, spec in zip(body.params, vals, a["in_specs"]):
        s = spec.on(mesh)
        for d in devices:
            envs[d][p] = block(x, s, d)
    frees = child.frees
    for node in body.nodes:
        if node.op == "parameter":
            continue
        row = OPS[node.op]
        ins = [[env[i] for i in node.inputs] for env in envs]
        if row.kind == OpKind.COLLECTIVE:
            assert row.spmd is not None
            if row.arity == 0:
                outs = row.spmd([None] * mesh.size, mesh, node.attrs)
            else:
                outs = row.spmd([x[0] for x in ins], mesh, node.attrs)
            outs = [_as(node, o) for o in outs]
        else:
            outs = [child.run_node(node, x) for x in ins]
        del ins
        for env, o in zip(envs, outs):
            env[node.id] = o
            for dead in frees.get(node.id, ()):
                env.pop(dead, None)
    results = []
    for k, (o, spec) in enumerate(zip(body.outputs, a["out_specs"])):
        t = n.type.elements[k] if len(body.outputs) > 1 else n.type
        results.append(assemble([env[o] for env in envs], spec.on(mesh), t.shape))
    return one_or_tuple(results)


def _as(node: Node, value: Any) -> np.ndarray:
    return np.asarray(value, dtype=dtypes.to_numpy(node.type.dtype))
