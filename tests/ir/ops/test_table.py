"""The op table drives these tests: every row against its jax.lax lowering on random inputs."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from explorer.ir import dtypes
from explorer.ir.graph import Attrs, TensorType, TupleType
from explorer.ir.ops import OPS, OpError, infer_type
from explorer.measure.closeness import mismatch

# Rows without a standalone NumPy-vs-JAX check, and why.
NOT_SAMPLED = {
    "parameter": "bound to arguments, not computed",
    "constant": "holds a Literal; covered by every traced graph",
    "get_tuple_element": "reads a tuple; covered by top_k/sort/split in traced graphs",
    "opaque": "an HLO instruction kept as text; never computed",
    "tuple": "HLO's tuples; covered by the HLO import tests",
    **{name: "a collective: runs only inside a shard_map, on every device at once; its spmd "
             "reference is checked against jax.lax on host devices (tests/sharding)"
       for name, op in OPS.items() if op.kind == "collective"},
}
SAMPLED = [name for name, op in OPS.items() if op.sample is not None]


def test_every_op_is_sampled_or_explained() -> None:
    regions = {n for n, op in OPS.items() if op.kind == "region"}
    missing = set(OPS) - set(SAMPLED) - set(NOT_SAMPLED) - regions
    assert not missing, f"ops without a sample in the table: {sorted(missing)}"


def _close(a: np.ndarray, b: np.ndarray, dtype: str) -> None:
    tolerance = 2e-6 if dtypes.is_float(dtype) else 0.0  # absolute and relative
    assert not (why := mismatch(a, b, tolerance, tolerance)), why


@pytest.mark.parametrize("name", SAMPLED)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reference_matches_jax(name: str, seed: int) -> None:
    op = OPS[name]
    inputs, attrs = op.sample(np.random.default_rng(seed))  # type: ignore[misc]
    types = [TensorType(np.shape(x), dtypes.from_numpy(np.asarray(x).dtype)) for x in inputs]
    out_type = infer_type(name, types, Attrs(attrs))
    with np.errstate(all="ignore"):
        ours = op.ref(*[np.asarray(x) for x in inputs], **attrs)
    theirs = op.jax(*[jax.numpy.asarray(x) for x in inputs], **attrs)  # type: ignore[misc]
    if isinstance(out_type, TupleType):
        assert len(ours) == len(theirs) == len(out_type.elements)
        pairs = list(zip(ours, theirs, out_type.elements))
    else:
        pairs = [(ours, theirs, out_type)]
    for a, b, t in pairs:
        assert tuple(np.shape(b)) == t.shape, f"shape rule disagrees with JAX for {name}"
        assert dtypes.from_numpy(np.asarray(b).dtype) == t.dtype, f"dtype rule disagrees for {name}"
        _close(a, b, t.dtype)


@pytest.mark.parametrize("name", SAMPLED)
def test_flops_are_non_negative(name: str) -> None:
    op = OPS[name]
    inputs, attrs = op.sample(np.random.default_rng(0))  # type: ignore[misc]
    types = [TensorType(np.shape(x), dtypes.from_numpy(np.asarray(x).dtype)) for x in inputs]
    out = infer_type(name, types, Attrs(attrs))
    assert op.flops(types, out, Attrs(attrs)) >= 0


@pytest.mark.parametrize(
    "op, types, attrs, message",
    [
        ("add", [TensorType((3,), "f32"), TensorType((4,), "f32")], {}, "shapes differ"),
        ("add", [TensorType((3,), "f32"), TensorType((3,), "i32")], {}, "element types differ"),
        ("exp", [TensorType((3,), "i32")], {}, "floating-point"),
        ("reshape", [TensorType((3, 4), "f32")], {"new_sizes": (5,)}, "cannot reshape"),
        ("dot_general", [TensorType((3, 4), "f32"), TensorType((5, 6), "f32")],
         {"dimension_numbers": (((1,), (0,)), ((), ()))}, "does not match"),
        ("transpose", [TensorType((3, 4), "f32")], {"permutation": (0, 0)}, "not a permutation"),
        ("reduce_sum", [TensorType((3, 4), "f32")], {"axes": (2,)}, "out of range"),
        ("mul", [TensorType((3,), "f32")], {}, "takes 2 inputs"),
        ("slice", [TensorType((3,), "f32")], {"start_indices": (0,)}, "missing attribute"),
    ],
)
def test_shape_rules_reject_bad_input(op, types, attrs, message) -> None:
    with pytest.raises(OpError, match=message):
        infer_type(op, types, Attrs(attrs))


def test_top_k_ranks_positive_zero_above_negative_zero_as_lax_does() -> None:
    """XLA's total order: +0.0 above -0.0 (fuzz seed 1726); on every backend."""
    import jax
    import jax.numpy as jnp

    import explorer as gx

    x = np.array([[-0.0, 0.0, 0.0, -0.0, -1.0], [0.0, -0.0, np.nan, -0.0, 0.0]], np.float32)
    want_v, want_i = (np.asarray(a) for a in jax.lax.top_k(jnp.asarray(x), 3))
    tr = gx.explore(lambda x: jax.lax.top_k(x, 3), x)
    for backend in ("reference", "cpu", "jax"):
        v, i = (np.asarray(a) for a in tr.run(backend=backend).value)
        np.testing.assert_array_equal(i, want_i, err_msg=backend)
        np.testing.assert_array_equal(np.signbit(v), np.signbit(want_v), err_msg=backend)
