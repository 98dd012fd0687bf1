"""Shared by the HLO tests: the stored HLO files, and walking graphs with their regions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from explorer.ir import Graph, Node, parse, verify
from explorer.measure.closeness import magnitude, mismatch

DATA = Path(__file__).parent / "data"


def data_files() -> list[Path]:
    return sorted(DATA.glob("*.hlo"))


def all_nodes(g: Graph) -> Iterator[Node]:
    """Every node, inside region bodies too."""
    for n in g.nodes:
        yield n
        for v in n.attrs.values():
            for body in v if isinstance(v, tuple) else (v,):
                if isinstance(body, Graph):
                    yield from all_nodes(body)


def opaque_opcodes(g: Graph) -> set[str]:
    return {n.attrs["opcode"] for n in all_nodes(g) if n.op == "opaque"}


def check_imported(g: Graph) -> None:
    """What every imported graph must satisfy: it verifies and its text reads back."""
    verify(g)
    assert parse(str(g)) == g


def leaves_close(ours: list[np.ndarray], theirs: list[object], tol: float = 1e-5) -> None:
    """Leaf by leaf the same shape and type, within `tol` relative to a float leaf's
    magnitude (explorer/measure/closeness.py)."""
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        t = np.asarray(t)
        assert o.shape == t.shape and o.dtype == t.dtype, (o.shape, o.dtype, t.shape, t.dtype)
        scale = magnitude(t) if t.dtype.kind == "f" else 1.0
        assert not (why := mismatch(o, t, rtol=tol, atol=tol * scale)), why
