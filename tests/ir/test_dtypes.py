"""Element types: JAX's float0, the tangent type of integer inputs, carried as JAX carries it
(no data, 0 bytes) from tracing through every stage and backend back to the caller."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.analysis.cost import graph_bytes, node_bytes
from explorer.analysis.memory import plan
from explorer.backends import registry
from explorer.ir import GraphBuilder, TensorType, dtypes
from tests.ir.ops.conformance import BACKENDS
from tests.ir.ops.conformance import check_every_stage as _check

F0 = jax.dtypes.float0
X = np.arange(1, 4, dtype=np.float32)
N = np.arange(3, dtype=np.int32)


def test_float0_is_jaxs_type_and_holds_no_data() -> None:
    assert dtypes.to_numpy("float0") == F0 and dtypes.from_numpy(F0) == "float0"
    assert (dtypes.itemsize("float0"), dtypes.bits("float0")) == (0, 0)
    assert not (dtypes.is_float("float0") or dtypes.is_int("float0") or dtypes.is_bool("float0"))
    assert dtypes.is_float0("float0") and not dtypes.is_float0("f32")
    assert TensorType((4, 5), "float0").nbytes == 0


@jax.custom_vjp
def _scale(x, n):
    return x * n


def _scale_fwd(x, n):
    return _scale(x, n), n


def _scale_bwd(n, g):  # an integer input's cotangent: float0 zeros
    return g * n, np.zeros(np.shape(n), F0)


_scale.defvjp(_scale_fwd, _scale_bwd)


def _vjp_of_custom(x, n):
    _, pullback = jax.vjp(_scale, x, n)
    return pullback(jnp.ones_like(x))


def _grad_allow_int(x, n):
    return jax.grad(lambda x, n: jnp.sum(jnp.sin(x) * n), argnums=(0, 1), allow_int=True)(x, n)


def _vjp_with_an_integer_output(x, n):  # the integer output's cotangent is a float0 argument
    _, pullback = jax.vjp(lambda x, n: (x * n, n * 2), x, n)
    return pullback((jnp.ones_like(x), np.zeros(n.shape, F0)))


def _float0_through_a_scan(x, t):
    (y, t), _ = jax.lax.scan(lambda c, _: ((c[0] * 2, c[1]), None), (x, t), None, length=2)
    return y, t.reshape(1, 3)


CASES = {"custom_vjp": (_vjp_of_custom, (X, N)), "grad_allow_int": (_grad_allow_int, (X, N)),
         "integer_output": (_vjp_with_an_integer_output, (X, N)),
         "argument_through_scan": (_float0_through_a_scan, (X, np.zeros(3, F0)))}


@pytest.mark.parametrize("case", sorted(CASES))
def test_float0_traces_and_runs_as_jax_jit_gives_it(case: str) -> None:
    """Every stage (verified, printed and parsed back) on every backend gives jax.jit's
    outputs, float0 ones included; the float0 values cost no bytes."""
    fn, args = CASES[case]
    t = _check(fn, *args, rtol=1e-6)
    g = t.stages[0].graph
    assert any(isinstance(n.type, TensorType) and n.type.dtype == "float0" for n in g.nodes)


def test_float0_values_cost_no_bytes() -> None:
    """The cost and memory analyses count a float0 value as 0 bytes, and the backends move
    it as JAX does (a concatenate of float0 tangents is one)."""
    b = GraphBuilder("tangents")
    a, c = b.param(TensorType((2, 3), "float0")), b.param(TensorType((4, 3), "float0"))
    x = b.param(TensorType((3,), "f32"))
    cat = b.add("concatenate", [a, c], {"dimension": 0})
    g = b.build([cat, b.add("exp", [x])])
    assert node_bytes(g, g[cat]) == 0 and graph_bytes(g) == 2 * 12
    assert plan(g).peak_bytes == 0
    args = [np.zeros((2, 3), F0), np.zeros((4, 3), F0), X]
    for backend in BACKENDS:
        out = registry.run_graph(g, args, backend).outputs
        assert (np.shape(out[0]), np.asarray(out[0]).dtype) == ((6, 3), F0), backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_calls_return_float0_as_jax_does(backend: str) -> None:
    """gx.compile gives the caller what jax.jit gives: float0 NumPy arrays of the same shape."""
    for fn, args in CASES.values():
        want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
        got = jax.tree_util.tree_leaves(gx.compile(fn, backend=backend)(*args))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert (np.shape(g), np.asarray(g).dtype) == (np.shape(w), np.asarray(w).dtype)
            if np.asarray(w).dtype == F0:
                assert isinstance(g, np.ndarray)
