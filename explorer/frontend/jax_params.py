"""Handlers for primitives whose params are JAX objects rather than plain values: gather and
the scatters (GatherDimensionNumbers, ScatterDimensionNumbers, GatherScatterMode become flat
attributes, ir/ops/indexing.py) and the max-pooling gradients (`select_prim`, a primitive,
becomes "ge" or "le", ir/ops/windows.py); and for two that need a little translation:
`reshape` with `dimensions` (a transpose first) and `platform_index` (a constant); and for
params that change a result's type: `empty` (zeros), `mul` with `out_dtype` (converts first),
`dot_general` with a `preferred_element_type` other than its operands'. Registered with
frontend/converter.py's `handles`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir import dtypes
from ..ir.graph import Source
from ..ir.ops import OpError
from ..ir.ops.indexing import GATHER_DIMS, SCATTER_DIMS, mode_name
from .arguments import is_key
from .converter import Converter, aval_type, handles


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
    v = Converter.attr(v)
    return None if isinstance(v, float) and math.isnan(v) else v


@handles("reshape")
def _reshape(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int] | None:
    """`reshape` with `dimensions` (lax.reshape's transpose first, as in a grouped conv's
    gradient) becomes transpose + reshape; a plain one is left to its row."""
    if is_key(eqn.outvars[0].aval):
        from .jax_random import key_shape_op

        return key_shape_op(cv, eqn, ins, source)
    dims = eqn.params.get("dimensions")
    if dims is None or tuple(dims) == tuple(range(len(dims))):
        return None
    moved = cv.row(eqn, "transpose", ins, {"permutation": cv.attr(dims)}, source)
    return cv.row(eqn, "reshape", moved, {"new_sizes": cv.attr(eqn.params["new_sizes"])},
                  source)


@handles("platform_index")
def _platform(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    """`lax.platform_dependent`'s branch index, fixed at trace time: our IR is the same on
    every backend, and every branch computes the same function, so take the CPU branch if
    there is one, else the default (None) one."""
    platforms = list(eqn.params["platforms"])
    pick = next((k for k, p in enumerate(platforms) if p is not None and "cpu" in p),
                next((k for k, p in enumerate(platforms) if p is None), None))
    if pick is None:  # no CPU or default branch: JAX picks one when it runs
        return cv.opaque(eqn, ins, source)
    return [cv.constant(np.asarray(pick, np.int32), source)]


@handles("gather")
def _gather(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    if is_key(eqn.outvars[0].aval):  # indexing an array of typed PRNG keys
        from .jax_random import key_shape_op

        return key_shape_op(cv, eqn, ins, source)
    p, flags = eqn.params, _flags(eqn)
    if flags is None:
        return cv.opaque(eqn, ins, source)
    dn = p["dimension_numbers"]
    attrs = {"slice_sizes": cv.attr(p["slice_sizes"]),
             **{k: cv.attr(getattr(dn, k)) for k in GATHER_DIMS}, **flags,
             "fill_value": _fill(p["fill_value"])}
    return cv.row(eqn, "gather", ins, attrs, source)


@handles("scatter", "scatter-add", "scatter_add", "scatter-mul", "scatter_mul", "scatter-min",
         "scatter_min", "scatter-max", "scatter_max")
def _scatter(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    name, p, flags = eqn.primitive.name, eqn.params, _flags(eqn)
    if flags is None or is_key(eqn.outvars[0].aval) or (
            name == "scatter" and p.get("update_jaxpr") is not None):
        # a mode without a row form, keys, or `x.at[i].apply(f)` (a combiner of its own)
        return cv.opaque(eqn, ins, source)
    dn = p["dimension_numbers"]
    attrs = {**{k: cv.attr(getattr(dn, k)) for k in SCATTER_DIMS}, **flags}
    return cv.row(eqn, name.replace("_", "-"), ins, attrs, source)


@handles("select_and_scatter_add", "select_and_gather_add")
def _select(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    p = dict(eqn.params)
    prim = p.pop("select_prim")
    if prim.name not in ("ge", "le"):
        return cv.opaque(eqn, ins, source)
    attrs = {"select_prim": prim.name, **{k: cv.attr(v) for k, v in p.items()}}
    return cv.row(eqn, eqn.primitive.name, ins, attrs, source)


@handles("custom_linear_solve")
def _linear_solve(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    """`jnp.linalg.solve`/`inv`: evaluated, as JAX's own impl does, by its `solve` jaxpr on the
    right-hand side (the other jaxprs serve autodiff only), inlined here."""
    lengths, jaxprs = eqn.params["const_lengths"], eqn.params["jaxprs"]
    start = lengths.matvec + lengths.vecmat
    operands = [*ins[start:start + lengths.solve], *ins[sum(lengths):]]
    return cv.inline(jaxprs.solve, operands, source)


# ---------------------------------------------------------------- params that change the type


@handles("empty", "empty2")
def _empty(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    """lax.empty (a buffer scans and linalg gradients fill later): zeros, as JAX lowers it."""
    return [cv.constant(np.zeros(o.aval.shape, o.aval.dtype), source) for o in eqn.outvars]


@handles("mul")
def _mul_out_dtype(cv: Converter, eqn: Any, ins: list[int],
                   source: Source | None) -> list[int] | None:
    """lax.mul(x, y, out_dtype=T) as JAX lowers it: each operand converted to T, then
    multiplied in T. Without out_dtype, the mul row."""
    if eqn.params.get("out_dtype") is None:
        return None
    t = aval_type(eqn.outvars[0].aval).dtype  # out_dtype as JAX canonicalizes it (f64 -> f32)
    ins = [i if cv.type_of(i).dtype == t
           else cv.add("convert_element_type", [i], {"new_dtype": t}, source) for i in ins]
    return [cv.add("mul", ins, {}, source)]


@handles("dot_general")
def _dot_general(cv: Converter, eqn: Any, ins: list[int],
                 source: Source | None) -> list[int] | None:
    """dot_general with its preferred_element_type where that changes the result's type
    (bf16 operands accumulating in f32, int8 in i32); jnp.matmul names the operands' own
    type, which is no attribute. A form the row does not compute exactly runs in JAX."""
    attrs = {"dimension_numbers": cv.attr(eqn.params["dimension_numbers"])}
    pet = eqn.params.get("preferred_element_type")
    if pet is not None and dtypes.from_numpy(pet) != cv.type_of(ins[0]).dtype:
        attrs["preferred_element_type"] = dtypes.from_numpy(pet)
    return cv.row(eqn, "dot_general", ins, attrs, source)
