"""Handlers for primitives whose params are JAX objects rather than plain values: gather and
the scatters (GatherDimensionNumbers, ScatterDimensionNumbers, GatherScatterMode become flat
attributes, ir/ops_indexing.py) and the max-pooling gradients (`select_prim`, a primitive,
becomes "ge" or "le", ir/ops_window.py); and for two that need a little translation:
`reshape` with `dimensions` (a transpose first) and `platform_index` (a constant). Registered
with frontend/jax.py's `handles`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir.builder import GraphBuilder
from ..ir.graph import Source, TupleType
from ..ir.ops import OpError
from ..ir.ops_indexing import GATHER_DIMS, SCATTER_DIMS, mode_name
from .arguments import is_key
from .jax import _convert, _opaque, handles


def add_row(b: GraphBuilder, eqn: Any, op: str, ins: list[int], attrs: dict[str, Any],
            source: Source | None) -> list[int]:
    """One node of row `op`, and a get_tuple_element per result when it has several (an
    opaque node running the primitive through JAX if the row refuses this form)."""
    try:
        nid = b.add(op, ins, attrs, source)
    except OpError:  # a form of the primitive our row does not take: JAX runs it
        return _opaque(b, eqn, ins, source)
    if len(eqn.outvars) == 1 and not isinstance(b.type_of(nid), TupleType):
        return [nid]
    return [b.add("get_tuple_element", [nid], {"index": k}, source)
            for k in range(len(eqn.outvars))]


def _flags(eqn: Any) -> dict[str, Any] | None:
    """Mode and hints; None for a mode we have no row form of (one_hot): JAX runs those."""
    p = eqn.params
    try:
        mode = mode_name(p["mode"])
    except OpError:
        return None
    return {"mode": mode, "indices_are_sorted": bool(p["indices_are_sorted"]),
            "unique_indices": bool(p["unique_indices"])}


def _fill(v: Any) -> Any:
    """NaN (never equal to itself, so no round trip) is what None means for floats anyway."""
    v = _convert(v)
    return None if isinstance(v, float) and math.isnan(v) else v


@handles("reshape")
def _reshape(b: GraphBuilder, eqn: Any, ins: list[int], source: Source | None) -> list[int] | None:
    """`reshape` with `dimensions` (lax.reshape's transpose first, as in a grouped conv's
    gradient) becomes transpose + reshape; a plain one is left to its row."""
    if is_key(eqn.outvars[0].aval):
        from .jax_random import key_shape_op

        return key_shape_op(b, eqn, ins, source)
    dims = eqn.params.get("dimensions")
    if dims is None or tuple(dims) == tuple(range(len(dims))):
        return None
    moved = add_row(b, eqn, "transpose", ins, {"permutation": _convert(dims)}, source)
    return add_row(b, eqn, "reshape", moved, {"new_sizes": _convert(eqn.params["new_sizes"])},
                   source)


@handles("platform_index")
def _platform(b: GraphBuilder, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    """`lax.platform_dependent`'s branch index, fixed at trace time: our IR is the same on
    every backend, and every branch computes the same function, so take the CPU branch if
    there is one, else the default (None) one."""
    platforms = list(eqn.params["platforms"])
    pick = next((k for k, p in enumerate(platforms) if p is not None and "cpu" in p),
                next((k for k, p in enumerate(platforms) if p is None), None))
    if pick is None:  # no CPU or default branch: JAX picks one when it runs
        return _opaque(b, eqn, ins, source)
    return [b.constant(np.asarray(pick, np.int32), source=source)]


@handles("gather")
def _gather(b: GraphBuilder, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    if is_key(eqn.outvars[0].aval):  # indexing an array of typed PRNG keys
        from .jax_random import key_shape_op

        return key_shape_op(b, eqn, ins, source)
    p, flags = eqn.params, _flags(eqn)
    if flags is None:
        return _opaque(b, eqn, ins, source)
    dn = p["dimension_numbers"]
    attrs = {"slice_sizes": _convert(p["slice_sizes"]),
             **{k: _convert(getattr(dn, k)) for k in GATHER_DIMS}, **flags,
             "fill_value": _fill(p["fill_value"])}
    return add_row(b, eqn, "gather", ins, attrs, source)


@handles("scatter", "scatter-add", "scatter_add", "scatter-mul", "scatter_mul", "scatter-min",
         "scatter_min", "scatter-max", "scatter_max")
def _scatter(b: GraphBuilder, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    name, p, flags = eqn.primitive.name, eqn.params, _flags(eqn)
    if flags is None or is_key(eqn.outvars[0].aval) or (
            name == "scatter" and p.get("update_jaxpr") is not None):
        # a mode without a row form, keys, or `x.at[i].apply(f)` (a combiner of its own)
        return _opaque(b, eqn, ins, source)
    dn = p["dimension_numbers"]
    attrs = {**{k: _convert(getattr(dn, k)) for k in SCATTER_DIMS}, **flags}
    return add_row(b, eqn, name.replace("_", "-"), ins, attrs, source)


@handles("select_and_scatter_add", "select_and_gather_add")
def _select(b: GraphBuilder, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    p = dict(eqn.params)
    prim = p.pop("select_prim")
    if prim.name not in ("ge", "le"):
        return _opaque(b, eqn, ins, source)
    attrs = {"select_prim": prim.name, **{k: _convert(v) for k, v in p.items()}}
    return add_row(b, eqn, eqn.primitive.name, ins, attrs, source)


@handles("custom_linear_solve")
def _linear_solve(b: GraphBuilder, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    """`jnp.linalg.solve`/`inv`: evaluated, as JAX's own impl does, by its `solve` jaxpr on the
    right-hand side (the other jaxprs serve autodiff only), inlined here."""
    from .jax import _emit, _read

    lengths, jaxprs = eqn.params["const_lengths"], eqn.params["jaxprs"]
    start = lengths.matvec + lengths.vecmat
    operands = [*ins[start:start + lengths.solve], *ins[sum(lengths):]]
    inner = jaxprs.solve.jaxpr
    env: dict[Any, int] = dict(zip(inner.invars, operands, strict=True))
    for var, c in zip(inner.constvars, jaxprs.solve.consts):
        env[var] = b.constant(np.asarray(c), source=source)
    _emit(b, inner, env, source)
    return [_read(b, env, v, source) for v in inner.outvars]
