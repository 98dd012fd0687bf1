"""A `shard_map` on one host: its body run once per device of its mesh, the collectives
combining the devices' values, the reference semantics of a sharded program
(ir/ops/sharding.py).

Each input is split per its in_spec into the blocks the devices hold. Every device runs the
body on its blocks through the body's interpreter (so every backend computes a body as it
computes anything, nested control flow included), each in a thread of its own; a collective
is where they meet: each device leaves its value, and once all have, the row's `spmd`
reference computes every device's result from all of them at once (a scan of ppermutes, a
ring, runs as it reads). Each result's blocks are then put back together per its out_spec (a
dimension the spec leaves whole is the copy of the first device holding it).

An error on one device stops the others at their next collective, and is raised here.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from itertools import product
from typing import Any

import numpy as np

from ..ir import dtypes
from ..ir.graph import Node
from ..ir.ops import OPS
from ..ir.sharding import MeshSpec, Sharding
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


class _Devices:
    """The devices of one shard_map run, meeting at collectives."""

    def __init__(self, mesh: MeshSpec) -> None:
        self.mesh = mesh
        self.barrier = threading.Barrier(mesh.size)
        self.slots: list[Any] = [None] * mesh.size
        self.results: list[Any] = []

    def collective(self, device: int, n: Node, value: Any) -> Any:
        self.slots[device] = value
        if self.barrier.wait() == 0:  # one thread computes, once every device has left its value
            row = OPS[n.op]
            assert row.spmd is not None
            try:
                self.results = row.spmd(list(self.slots), self.mesh, n.attrs)
            except BaseException:
                self.barrier.abort()
                raise
        self.barrier.wait()
        out = np.asarray(self.results[device], dtype=dtypes.to_numpy(n.type.dtype))  # type: ignore[union-attr]
        self.barrier.wait()  # (every device has its result before the slots are reused)
        return out


_HERE = threading.local()  # the device this thread runs: (its _Devices, its index)


def in_shard_map() -> bool:
    """Whether this thread runs a device of a shard_map body (where collectives meet)."""
    return getattr(_HERE, "device", None) is not None


def collective(n: Node, vals: Sequence[Any]) -> Any:
    """Collective `n` on this device's value: every device's result, once all have come."""
    devices, d = _HERE.device
    return devices.collective(d, n, vals[0] if vals else None)


def run_shard_map(interp: Any, n: Node, vals: Sequence[Any]) -> Any:
    """`n`'s results: its body on every device (see the module doc). `interp` is the
    interpreter the node is in; the body runs on its child interpreter."""
    a = n.attrs
    mesh = a["mesh"]
    child = interp.child(n)
    child.compile_bodies()  # (made now: the device threads share them)
    specs = [s.on(mesh) for s in a["in_specs"]]
    inputs = [[block(x, s, d) for x, s in zip(vals, specs)] for d in range(mesh.size)]
    devices = _Devices(mesh)
    outs: list[Any] = [None] * mesh.size
    errors: list[BaseException] = []

    def run(d: int) -> None:
        _HERE.device = (devices, d)
        try:
            outs[d] = child.evaluate(inputs[d])
        except threading.BrokenBarrierError:
            pass  # another device failed: its error is the one raised
        except BaseException as e:  # noqa: BLE001  (raised in the caller's thread below)
            errors.append(e)
            devices.barrier.abort()
        finally:
            _HERE.device = None

    threads = [threading.Thread(target=run, args=(d,), name=f"device {d}") for d in range(mesh.size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    types = n.type.elements if len(a["body"].outputs) > 1 else (n.type,)  # type: ignore[union-attr]
    results = [assemble([o[k] for o in outs], spec.on(mesh), t.shape)  # type: ignore[union-attr]
               for k, (spec, t) in enumerate(zip(a["out_specs"], types))]
    return one_or_tuple(results)
