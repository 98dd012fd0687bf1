"""JAX control flow -> region ops whose bodies are graphs (ir/ops/regions.py).

  scan (lax.scan, and fori_loop with static bounds)  -> `scan`, as JAX states it
  while (lax.while_loop, fori_loop otherwise)        -> `while`: JAX's condition and body
      constants become loop state that the body returns unchanged, as XLA carries them, so
      the state is (condition constants, body constants, carries)
  cond (lax.cond, lax.switch)                        -> `conditional` on the i32 index, each
      branch reading its own copy of the shared operands; lax.platform_dependent's cond
      -> the one branch of the platform picked at trace time, inlined

A region's results that JAX returns separately are read with get_tuple_element.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir.graph import Attrs, Graph, Node, Source, TensorType, TupleType
from ..ir.ops import OpError
from .converter import Converter, TraceError, handles


def region_results(cv: Converter, op: str, ins: Sequence[int], attrs: dict[str, Any],
            source: Source | None, wanted: Sequence[int]) -> list[int]:
    """Add region `op` and return the ids of its results at positions `wanted`."""
    try:
        nid = cv.add(op, ins, attrs, source)
    except OpError as e:
        raise TraceError(f"{op} at {source}: {e}") from None
    if not isinstance(cv.type_of(nid), TupleType):
        return [nid]
    return [cv.add("get_tuple_element", [nid], {"index": k}, source) for k in wanted]


def _scan_counts(params: dict[str, Any]) -> tuple[int, int]:
    """How many of a scan's operands are constants and how many carries: JAX up to 0.10
    states them (num_consts, num_carry); from 0.11 the operands' structure `ft_in` does, a
    flat tree of three groups (constants, carries, scanned inputs)."""
    if "num_consts" in params:
        return int(params["num_consts"]), int(params["num_carry"])
    consts, carry, _ = params["ft_in"].unpack()
    return len(consts), len(carry)


@handles("scan")
def _scan(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    p = eqn.params
    num_consts, num_carry = _scan_counts(p)
    attrs = {"length": int(p["length"]), "reverse": bool(p["reverse"]),
             "num_consts": num_consts, "num_carry": num_carry,
             "body": cv.region(p["jaxpr"], "scan_body", source)}
    return region_results(cv, "scan", ins, attrs, source, range(len(eqn.outvars)))


@handles("while")
def _while(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    p = eqn.params
    nc, nb = int(p["cond_nconsts"]), int(p["body_nconsts"])
    types = [cv.type_of(i) for i in ins]
    cond = cv.region(p["cond_jaxpr"], "while_cond", source)  # (cond consts, carries)
    body = cv.region(p["body_jaxpr"], "while_body", source)  # (body consts, carries)
    cond = _with_params(cond, nc, types[nc:nc + nb], "body_const")
    body = _with_params(body, 0, types[:nc], "cond_const")
    body = Graph(body.nodes, body.params, (*body.params[:nc + nb], *body.outputs), body.name)
    n = nc + nb
    return region_results(cv, "while", ins, {"cond": cond, "body": body}, source,
                   range(n, n + len(eqn.outvars)))


@handles("cond")
def _cond(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    index, operands = ins[0], ins[1:]
    if eqn.params.get("branches_platforms") is not None and cv.node(index).op == "constant":
        # lax.platform_dependent: the index is fixed at trace time (jax_params' platform_index),
        # and only that branch is kept, as JAX lowers only the branch of the platform it
        # compiles for; another platform's branch may not even lower here
        pick = int(np.clip(cv.node(index).attrs["value"].array, 0, len(eqn.params["branches"]) - 1))
        return cv.inline(eqn.params["branches"][pick], operands, source)
    branches = tuple(cv.region(br, f"branch{k}", source)
                     for k, br in enumerate(eqn.params["branches"]))
    return region_results(cv, "conditional", [index, *operands * len(branches)],
                   {"branches": branches}, source, range(len(eqn.outvars)))


def _with_params(g: Graph, at: int, types: Sequence[Any], name: str) -> Graph:
    """`g` with parameters of `types` inserted at position `at`, unread (loop state that
    this graph passes by); parameters are renumbered, node ids kept, new ones fresh."""
    if not types:
        return g
    fresh = [Node(g.next_id + k, "parameter", (), Attrs(), t) for k, t in enumerate(types)]
    assert all(isinstance(t, TensorType) for t in types)
    order = [*g.params[:at], *(n.id for n in fresh), *g.params[at:]]
    index = {pid: k for k, pid in enumerate(order)}
    added = {n.id for n in fresh}

    def renumbered(n: Node) -> Node:
        if n.op != "parameter":
            return n
        label = f"{name}{n.id - g.next_id}" if n.id in added else n.attrs.get("name", "")
        return Node(n.id, n.op, (), Attrs({"index": index[n.id], "name": label}), n.type, n.source)

    nodes = [renumbered(n) for n in fresh] + [renumbered(n) for n in g.nodes]
    return Graph(nodes, order, g.outputs, g.name)
