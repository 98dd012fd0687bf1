"""Shardings as IR values: a `MeshSpec` (the mesh's axis names and sizes) and a `Sharding`
(a mesh and one partition entry per dimension, JAX's PartitionSpec), small immutable values
that the printer writes and the parser reads back.

    mesh<"x"=4, "y"=2>
    sharding<mesh<"x"=4, "y"=2>, ("x", none, ("x", "y"))>

A partition entry is `none` (the dimension is whole on every device), an axis name, or a tuple
of axis names (the dimension is split over their product, the first axis major). A spec with
fewer entries than the rank leaves the last dimensions whole. They carry no devices: a
backend builds the mesh on the devices it has (backends/jax.py).

Per-device shapes follow from them (`block_shape`), and so does which block a device holds
(`block_index`): devices are numbered row-major over the mesh axes, as `Mesh(devices.reshape
(sizes), names)` numbers them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class ShardingError(ValueError):
    """A sharding that does not fit its value (an axis that does not divide a dimension, an
    axis the mesh lacks)."""


Entry = tuple[str, ...]  # the mesh axes one dimension is split over (empty: whole)


@dataclass(frozen=True)
class MeshSpec:
    """A mesh's axis names and sizes, in order (no devices)."""

    axes: tuple[tuple[str, int], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.axes)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(s for _, s in self.axes)

    @property
    def size(self) -> int:
        """How many devices the mesh needs."""
        return math.prod(self.sizes)

    def axis_size(self, name: str) -> int:
        for n, s in self.axes:
            if n == name:
                return s
        raise ShardingError(f"mesh {self} has no axis {name!r}")

    def coords(self, device: int) -> dict[str, int]:
        """Device `device`'s position on each axis (row-major numbering)."""
        out: dict[str, int] = {}
        for name, size in reversed(self.axes):
            out[name] = device % size
            device //= size
        return out

    def linear(self, coords: dict[str, int], names: Sequence[str]) -> int:
        """The row-major index of the position on axes `names` (in that order)."""
        k = 0
        for name in names:
            k = k * self.axis_size(name) + coords[name]
        return k

    def __str__(self) -> str:
        return "mesh<" + ", ".join(f"{_quote(n)}={s}" for n, s in self.axes) + ">"

    @staticmethod
    def of(mesh: Any) -> MeshSpec:
        """A JAX Mesh (or AbstractMesh) as a MeshSpec."""
        shape = dict(mesh.shape)
        return MeshSpec(tuple((str(n), int(shape[n])) for n in mesh.axis_names))


@dataclass(frozen=True)
class Sharding:
    """A value's layout over a mesh: one entry (the axes its dimension is split over) per
    dimension, trailing whole dimensions left out."""

    mesh: MeshSpec
    spec: tuple[Entry, ...]

    def entry(self, dim: int) -> Entry:
        return self.spec[dim] if dim < len(self.spec) else ()

    def parts(self, dim: int) -> int:
        """How many blocks dimension `dim` is split into."""
        return math.prod(self.mesh.axis_size(a) for a in self.entry(dim))

    def check(self, shape: Sequence[int], what: str = "value") -> None:
        """Raise ShardingError naming the dimension, its axes and the mesh where the spec does
        not fit `shape` (too many entries, an unknown axis, an axis used twice, a split that
        does not divide)."""
        if len(self.spec) > len(shape):
            raise ShardingError(f"{what}: partition spec {self.spec_text()} has "
                                f"{len(self.spec)} entries for rank {len(shape)}")
        used = [a for e in self.spec for a in e]
        for a in used:
            self.mesh.axis_size(a)
        if len(set(used)) != len(used):
            raise ShardingError(f"{what}: partition spec {self.spec_text()} uses a mesh axis twice")
        for d, size in enumerate(shape):
            k = self.parts(d)
            if size % k:
                raise ShardingError(
                    f"{what}: dimension {d} of size {size} is split over mesh axes "
                    f"{', '.join(self.entry(d))} ({k} parts) of {self.mesh}, and {k} does not "
                    f"divide {size}")

    def block_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """The shape each device holds."""
        return tuple(s // self.parts(d) for d, s in enumerate(shape))

    def block_index(self, device: int, rank: int) -> tuple[int, ...]:
        """Which block (per dimension) device `device` holds."""
        c = self.mesh.coords(device)
        return tuple(self.mesh.linear(c, self.entry(d)) for d in range(rank))

    def spec_text(self) -> str:
        return "P" + format_spec(self.spec, bare=True)

    def __str__(self) -> str:
        return f"sharding<{self.mesh}, P{format_spec(self.spec, bare=True)}>"

    @staticmethod
    def of(mesh: Any, spec: Any) -> Sharding:
        """From a JAX mesh and PartitionSpec."""
        return Sharding(MeshSpec.of(mesh), spec_entries(spec))


@dataclass(frozen=True)
class Spec:
    """A partition spec alone (a shard_map's in/out specs): `P("x", none)`."""

    entries: tuple[Entry, ...]

    def on(self, mesh: MeshSpec) -> Sharding:
        return Sharding(mesh, self.entries)

    def __str__(self) -> str:
        return "P" + format_spec(self.entries, bare=True)

    @staticmethod
    def of(spec: Any) -> Spec:
        return Spec(spec_entries(spec))


def spec_entries(spec: Any) -> tuple[Entry, ...]:
    """A PartitionSpec (or a tuple like one) as entries; UNCONSTRAINED reads as whole."""
    out: list[Entry] = []
    for e in tuple(spec):
        if e is None or not isinstance(e, str | tuple | list):
            out.append(())
        elif isinstance(e, str):
            out.append((e,))
        else:
            out.append(tuple(str(a) for a in e))
    while out and out[-1] == ():
        out.pop()
    return tuple(out)


def _quote(s: str) -> str:
    import json

    return json.dumps(s)


def format_spec(spec: Sequence[Entry], bare: bool = False) -> str:
    """The spec as the IR writes it: `("x", none, ("x", "y"))`; P's arguments, no trailing
    comma, with `bare`."""
    parts = ["none" if not e else _quote(e[0]) if len(e) == 1 else
             "(" + ", ".join(map(_quote, e)) + ")" for e in spec]
    if len(parts) == 1 and not bare:
        return f"({parts[0]},)"
    return "(" + ", ".join(parts) + ")"


def entries_from_value(v: Any) -> tuple[Entry, ...]:
    """The spec from its parsed attribute value (a tuple of None, str or tuples of str)."""
    if not isinstance(v, tuple):
        raise ShardingError(f"a partition spec is a tuple, got {v!r}")
    out: list[Entry] = []
    for e in v:
        if e is None:
            out.append(())
        elif isinstance(e, str):
            out.append((e,))
        elif isinstance(e, tuple) and all(isinstance(a, str) for a in e):
            out.append(tuple(e))
        else:
            raise ShardingError(f"bad partition entry {e!r}")
    return tuple(out)
