"""What the row tests share: a row's sample inputs, and the node applying a row to them."""

from __future__ import annotations

import numpy as np

from explorer.ir import GraphBuilder, TensorType, dtypes
from explorer.ir.graph import Node
from explorer.ir.ops import OPS


def sample(name: str, seed: int = 7) -> tuple[list[np.ndarray], dict]:
    """Row `name`'s sample inputs (as arrays) and attributes."""
    inputs, attrs = OPS[name].sample(np.random.default_rng(seed))  # type: ignore[misc]
    return [np.asarray(x) for x in inputs], attrs


def node_of(name: str, inputs: list[np.ndarray], attrs: dict) -> Node:
    """The node applying `name` to parameters of the inputs' types (for its dtype and attrs)."""
    b = GraphBuilder("op")
    ps = [b.param(TensorType(x.shape, dtypes.from_numpy(x.dtype))) for x in inputs]
    y = b.add(name, ps, attrs)
    return b.build([y])[y]
