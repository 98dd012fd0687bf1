"""Sharded JAX programs -> the rows of ir/ops/sharding.py.

  sharding_constraint (with_sharding_constraint), reshard (JAX's own, in a gradient)
                                                  -> `sharding_constraint` {sharding}; a
      sharding that does not fit its value (an axis that does not divide) is refused naming
      the dimension, the axis, the mesh and the user's line
  shard_map                                       -> the `shard_map` region (mesh, in/out specs,
                                                     body)
  psum, psum_invariant, pmax, pmin, all_gather, reduce_scatter (psum_scatter), ppermute,
  all_to_all, axis_index                          -> the collective rows; a form the rows do
      not take (axis_index_groups, an untiled all_to_all) is refused naming the primitive,
      since a collective cannot run as an opaque node outside its shard_map
  a jit's in_shardings / out_shardings            -> the parameters' `sharding` attribute (or
      a constraint where the input is no parameter), a constraint of origin "out_shardings"
      on each output (`shardings_of`, called by the converter where it inlines a jit)
"""

from __future__ import annotations

from typing import Any

from ..ir.graph import Source
from ..ir.ops import OpError
from ..ir.sharding import MeshSpec, Sharding, Spec
from .converter import JIT_SHARDINGS, Converter, TraceError, handles
from .jax_control import region_results


def _where(source: Source | None) -> str:
    return f" at {source} in {source.function}: `{source.line_text}`" if source else ""


def named_sharding(s: Any) -> Sharding | None:
    """A JAX NamedSharding as a Sharding; None for anything else (unspecified, a single
    device, a sharding of another kind)."""
    mesh, spec = getattr(s, "mesh", None), getattr(s, "spec", None)
    if mesh is None or spec is None or not getattr(mesh, "axis_names", None):
        return None
    try:
        return Sharding.of(mesh, spec)
    except (TypeError, ValueError, KeyError):
        return None


def _add(cv: Converter, op: str, ins: list[int], attrs: dict[str, Any], source: Source | None,
         prim: str) -> list[int]:
    try:
        return [cv.add(op, ins, attrs, source)]
    except OpError as e:
        raise TraceError(f"{prim}{_where(source)}: {e}") from None


@handles("sharding_constraint", "reshard")
def _constraint(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    prim = eqn.primitive.name
    s = named_sharding(eqn.params["sharding" if prim == "sharding_constraint" else "dst_sharding"])
    if s is None:  # a sharding of another kind (a single device, positional): JAX runs it
        return cv.opaque(eqn, ins, source)
    attrs: dict[str, Any] = {"sharding": s} if prim == "sharding_constraint" else {
        "sharding": s, "origin": "reshard"}
    return _add(cv, "sharding_constraint", ins, attrs, source,
                "with_sharding_constraint" if prim == "sharding_constraint" else "reshard")


def constrain(cv: Converter, nid: int, sharding: Any, origin: str, source: Source | None) -> int:
    """`nid` under a jit's in/out sharding: the parameter's `sharding` attribute where `nid` is
    a parameter of the traced function without one, else a constraint node."""
    s = named_sharding(sharding)
    if s is None:
        return nid
    node = cv.node(nid)
    if origin == "in_shardings" and node.op == "parameter" and "sharding" not in node.attrs:
        try:
            s.check(node.type.shape, f"argument {node.attrs.get('name', '')}")
        except ValueError as e:
            raise TraceError(f"{e}{_where(source)}") from None
        cv.b.set_attr(nid, "sharding", s)
        return nid
    if origin == "out_shardings" and node.source is not None:
        source = node.source  # the line that made the output (the jit's may be no user's)
    return _add(cv, "sharding_constraint", [nid], {"sharding": s, "origin": origin}, source,
                f"jit's {origin}")[0]


def _jit_shardings(cv: Converter, eqn: Any, ids: list[int], key: str,
                   source: Source | None) -> list[int]:
    shardings = eqn.params.get(key) or ()
    if len(shardings) != len(ids):
        return ids
    return [constrain(cv, i, s, key, source) for i, s in zip(ids, shardings)]


JIT_SHARDINGS.append(_jit_shardings)


def _names(v: Any) -> tuple[str, ...]:
    return tuple(str(a) for a in v) if isinstance(v, tuple | list | frozenset) else (str(v),)


def _plain(eqn: Any, prim: str) -> None:
    if eqn.params.get("axis_index_groups") is not None:
        raise TraceError(f"{prim} with axis_index_groups is not supported by gambit-explorer"
                         f"{_where(None)}")


@handles("psum", "psum_invariant", "pmax", "pmin")
def _reduce(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    _plain(eqn, eqn.primitive.name)
    op = "psum" if eqn.primitive.name == "psum_invariant" else eqn.primitive.name
    axes = _names(eqn.params["axes"])
    return [_add(cv, op, [i], {"axes": axes}, source, eqn.primitive.name)[0] for i in ins]


@handles("all_gather")
def _all_gather(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    p = eqn.params
    _plain(eqn, "all_gather")
    return _add(cv, "all_gather", ins, {"axes": _names(p["axis_name"]),
                                        "dimension": int(p["all_gather_dimension"]),
                                        "tiled": bool(p["tiled"]), "axis_size": int(p["axis_size"])},
                source, "all_gather")


@handles("reduce_scatter")
def _psum_scatter(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    p = eqn.params
    _plain(eqn, "psum_scatter")
    return _add(cv, "psum_scatter", ins, {"axes": _names(p["axis_name"]),
                                          "dimension": int(p["scatter_dimension"]),
                                          "tiled": bool(p["tiled"]), "axis_size": int(p["axis_size"])},
                source, "psum_scatter")


@handles("ppermute")
def _ppermute(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    p = eqn.params
    perm = tuple((int(a), int(b)) for a, b in p["perm"])
    return [_add(cv, "ppermute", [i], {"axes": _names(p["axis_name"]), "perm": perm}, source,
                 "ppermute")[0] for i in ins]


@handles("all_to_all")
def _all_to_all(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    p = eqn.params
    _plain(eqn, "all_to_all")
    if not p.get("tiled", False):
        raise TraceError(f"an untiled all_to_all is not supported by gambit-explorer"
                         f"{_where(source)}: pass tiled=True")
    c = int(p["concat_axis"])
    n = eqn.outvars[0].aval.shape[c] // eqn.invars[0].aval.shape[c]
    return _add(cv, "all_to_all", ins, {"axes": _names(p["axis_name"]),
                                        "split_axis": int(p["split_axis"]), "concat_axis": c,
                                        "axis_size": int(n)}, source, "all_to_all")


@handles("axis_index")
def _axis_index(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    return _add(cv, "axis_index", [], {"axes": _names(eqn.params["axis_name"])}, source,
                "axis_index")


@handles("shard_map")
def _shard_map(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    p = eqn.params
    mesh = MeshSpec.of(p["mesh"])
    body = cv.region(p["jaxpr"], "shard_map_body", source)
    if source is None or not source.line:  # handed to explore() itself: its body's first line
        source = next((n.source for n in body.nodes if n.source is not None and n.source.line),
                      source)
    attrs = {"mesh": mesh,
             "in_specs": tuple(Spec.of(s) for s in p["in_specs"]),
             "out_specs": tuple(Spec.of(s) for s in p["out_specs"]),
             "body": body}
    return region_results(cv, "shard_map", ins, attrs, source, range(len(eqn.outvars)))


def argument_sharding(cv: Converter, param: int, value: Any) -> None:
    """Give parameter `param` the sharding of its argument, a jax.Array laid out over a mesh
    of several devices."""
    s = getattr(value, "sharding", None)
    if s is None or len(getattr(s, "device_set", ())) < 2:
        return
    found = named_sharding(s)
    if found is not None and found.mesh.size > 1:
        cv.b.set_attr(param, "sharding", found)
