"""Handlers for JAX's PRNG primitives and for shape ops on typed keys.

A key is its key data (ir/ops/random.py): a `key<fry>[*S]` value is a u32[*S, 2] value here
(frontend/converter.py `aval_type`). So `random_wrap`, `random_unwrap` and `random_clone` are the
identity; `random_seed/bits/split/fold_in` become their rows; and a shape op on typed keys
(unpacking `k1, k2 = jax.random.split(k)` slices and squeezes a key array) becomes the same op
on the key data, its attributes extended over the trailing key-data dimension. Keys of an
implementation other than threefry2x32, and shape ops we do not map, run through JAX as
opaque nodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.graph import Source, TensorType
from ..ir.ops.random import KEY_WORDS
from .arguments import is_key
from .converter import Converter, handles


def _threefry(eqn: Any, impl: Any = None) -> bool:
    """Whether the equation's keys are threefry2x32 keys (others run through JAX, opaque)."""
    if impl is None:
        keys = [v.aval for v in (*eqn.invars, *eqn.outvars) if is_key(v.aval)]
        impl = keys[0].dtype._impl if keys else None
    name = getattr(impl, "name", str(impl))
    return "threefry" in name or name == "fry"


@handles("random_wrap", "random_unwrap", "random_clone", "random_clone_p")
def _identity(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    if not _threefry(eqn, eqn.params.get("impl")):
        return cv.opaque(eqn, ins, source)
    return [ins[0]]


@handles("random_seed", "random_bits", "random_split", "random_fold_in")
def _random(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    if not _threefry(eqn, eqn.params.get("impl")):
        return cv.opaque(eqn, ins, source)
    attrs = {k: cv.attr(v) for k, v in eqn.params.items() if k != "impl"}
    return cv.row(eqn, eqn.primitive.name, ins, attrs, source)


# ---------------------------------------------------------------- shape ops on typed keys


def _key_attrs(eqn: Any, cv: Converter, ins: list[int], source: Source | None
               ) -> tuple[list[int], dict[str, Any]] | None:
    """The op's inputs and attributes over key data: one more (trailing) dimension (None
    for a form we do not map)."""
    name, p = eqn.primitive.name, {k: cv.attr(v) for k, v in eqn.params.items()}
    rank = len(eqn.outvars[0].aval.shape)
    if name == "slice":
        strides = p.get("strides")
        return ins, {"start_indices": (*p["start_indices"], 0),
                     "limit_indices": (*p["limit_indices"], KEY_WORDS),
                     "strides": None if strides is None else (*strides, 1)}
    if name in ("squeeze", "expand_dims", "rev"):
        return ins, {"dimensions": p["dimensions"]}
    if name == "reshape":
        return ins, {"new_sizes": (*p["new_sizes"], KEY_WORDS)}
    if name == "broadcast_in_dim":
        return ins, {"shape": (*p["shape"], KEY_WORDS),
                     "broadcast_dimensions": (*p["broadcast_dimensions"], rank)}
    if name == "transpose":
        return ins, {"permutation": (*p["permutation"], rank)}
    if name == "concatenate":
        return ins, {"dimension": p["dimension"]}
    if name in ("dynamic_slice", "dynamic_update_slice"):
        zero = cv.constant(np.zeros((), cv.type_of(ins[-1]).dtype), source)  # type: ignore[union-attr]
        extra = {"slice_sizes": (*p["slice_sizes"], KEY_WORDS)} if name == "dynamic_slice" else {}
        return [*ins, zero], extra
    if name in ("copy", "copy_p"):
        return ins, {}
    if name == "select_n":
        pred = cv.type_of(ins[0])
        assert isinstance(pred, TensorType)
        if pred.shape:
            full = (*pred.shape, KEY_WORDS)
            ins = [cv.add("broadcast_in_dim", [ins[0]], {"shape": full, "broadcast_dimensions":
                                                        tuple(range(pred.rank))}, source),
                   *ins[1:]]
        return ins, {}
    if name == "gather":
        dn = eqn.params["dimension_numbers"]
        from ..ir.ops.indexing import GATHER_DIMS, mode_name

        dims = {k: cv.attr(getattr(dn, k)) for k in GATHER_DIMS}
        dims["offset_dims"] = (*dims["offset_dims"], rank)
        return ins, {**dims, "slice_sizes": (*p["slice_sizes"], KEY_WORDS),
                     "mode": mode_name(eqn.params["mode"]), "fill_value": None,
                     "indices_are_sorted": p["indices_are_sorted"],
                     "unique_indices": p["unique_indices"]}
    return None


KEY_SHAPE_OPS = ("slice", "squeeze", "expand_dims", "rev", "broadcast_in_dim", "transpose",
                 "concatenate", "dynamic_slice", "dynamic_update_slice", "copy", "copy_p",
                 "select_n")  # and gather and reshape, whose handlers (jax_params) defer here


@handles(*KEY_SHAPE_OPS)
def _on_keys(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int] | None:
    """Shape ops whose result is a typed key array; None (the ordinary row) otherwise."""
    if not is_key(eqn.outvars[0].aval):
        return None
    return key_shape_op(cv, eqn, ins, source)


def key_shape_op(cv: Converter, eqn: Any, ins: list[int], source: Source | None) -> list[int]:
    """A shape op on typed keys as the same op on their key data."""
    if not _threefry(eqn):
        return cv.opaque(eqn, ins, source)
    keyed = _key_attrs(eqn, cv, ins, source)
    if keyed is None:
        return cv.opaque(eqn, ins, source)
    ins, attrs = keyed
    op = {"copy_p": "copy"}.get(eqn.primitive.name, eqn.primitive.name)
    return cv.row(eqn, op, ins, attrs, source)
