"""The verifier: ids unique, edges defined before use, ops known, types as the table infers."""

from __future__ import annotations

from .graph import Graph, TensorType
from .ops import OPS, OpError, infer_type
from .ops.regions import bodies, body_path


class VerifyError(ValueError):
    """A malformed graph; the message names the node (id, op and source line)."""


def verify(g: Graph) -> Graph:
    """Check `g` and return it, so that passes and tests can write `verify(pass(g))`."""
    seen: dict[int, object] = {}
    where = f"graph @{g.name}"
    for n in g.nodes:
        if n.id in seen:
            raise VerifyError(f"{where}: node id %{n.id} is defined twice")
        for i in n.inputs:
            if i not in seen:
                what = "is used before it is defined" if i in g else "does not exist (dangling edge)"
                raise VerifyError(f"{where}: {n.describe()} reads %{i}, which {what}")
        if n.op not in OPS:
            raise VerifyError(f"{where}: {n.describe()} uses unknown op {n.op!r}")
        seen[n.id] = n.type
        if n.op == "parameter":
            if not isinstance(n.type, TensorType):
                raise VerifyError(f"{where}: parameter {n.describe()} must have a tensor type")
            continue
        try:
            expected = infer_type(n.op, [g[i].type for i in n.inputs], n.attrs)
        except (OpError, KeyError, TypeError, ValueError, IndexError) as e:
            raise VerifyError(f"{where}: {n.describe()}: {e}") from None
        if expected != n.type:
            raise VerifyError(
                f"{where}: {n.describe()} has type {n.type}, but its inputs give {expected}")
        for key, body in bodies(n):
            try:
                verify(body)
            except VerifyError as e:
                raise VerifyError(f"{where}: in {body_path(n, key)}: {e}") from None
    params = [n.id for n in g.nodes if n.op == "parameter"]
    if sorted(params) != sorted(g.params):
        raise VerifyError(f"{where}: params {list(g.params)} do not match parameter nodes {params}")
    for k, p in enumerate(g.params):
        if g[p].attrs.get("index", k) != k:
            raise VerifyError(f"{where}: {g[p].describe()} has index {g[p].attrs['index']}, not {k}")
    for o in g.outputs:
        if o not in seen:
            raise VerifyError(f"{where}: output %{o} does not exist")
    return g
