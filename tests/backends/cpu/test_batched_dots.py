"""Batched outer products as one numba loop (backends/cpu/batched_dots.py): every dot_general
shape the loop takes matches the reference interpreter (0-3 batch dims, batch dims not
leading, contracting dims anywhere, size-1 and empty dims, float and integer types), every
shape it declines runs np.matmul, and the program's listing names each dot's method."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference, registry
from explorer.backends.cpu import CpuInterpreter, batched_dots
from explorer.backends.cpu.program import generate_program
from explorer.ir import GraphBuilder, TensorType
from explorer.ir import dtypes as ir_dtypes
from tests.corpora.wide import dp_sgd_grad

rng = np.random.default_rng(42)


def _array(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype.startswith(("i", "u")):
        return rng.integers(-9 if dtype.startswith("i") else 0, 9, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _dot_graph(ls: tuple[int, ...], rs: tuple[int, ...], dtype: str, dn: tuple) -> tuple:
    b = GraphBuilder("dot")
    t = ir_dtypes.from_numpy(np.dtype(dtype))
    x, y = b.param(TensorType(ls, t)), b.param(TensorType(rs, t))
    return b.build([b.add("dot_general", [x, y], {"dimension_numbers": dn})]), \
        [_array(ls, dtype), _array(rs, dtype)]


def _check(ls: tuple[int, ...], rs: tuple[int, ...], dtype: str, dn: tuple) -> str:
    """Runs the dot on the CPU backend against the reference; returns the program's text."""
    g, ins = _dot_graph(ls, rs, dtype, dn)
    want = reference.evaluate(g, ins)[0]
    got = registry.executable(g, "cpu").run(ins).outputs[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    if dtype.startswith(("i", "u")):
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return generate_program(g, CpuInterpreter).source


# (lhs shape, rhs shape, ((lc, rc), (lb, rb))): no contraction unless marked
OUTER = [
    ((5, 7), (5, 3), (((), ()), ((0,), (0,)))),  # per-example outer products
    ((7,), (3,), (((), ()), ((), ()))),  # unbatched outer product, 0 batch dims
    ((4, 1, 5), (4, 6), (((), ()), ((0,), (0,)))),  # a size-1 free dim
    ((2, 3, 4), (3, 2, 5), (((), ()), ((0, 1), (1, 0)))),  # 2 batch dims, rhs's swapped
    ((4, 2, 3, 5), (3, 6, 2, 4), (((), ()), ((0, 1, 2), (3, 2, 0)))),  # 3 batch dims
    ((6, 4), (3, 4), (((), ()), ((1,), (1,)))),  # batch dims not leading
    ((6, 1, 4), (4, 1, 3), (((1,), (1,)), ((2,), (0,)))),  # a contraction of one, in the middle
    ((1, 7), (1, 1), (((), ()), ((0,), (0,)))),  # size-1 dims
    ((0, 7), (0, 3), (((), ()), ((0,), (0,)))),  # empty batch
    ((5, 0), (5, 3), (((), ()), ((0,), (0,)))),  # empty free dim
    ((5, 0, 2), (5, 3, 0), (((1,), (2,)), ((0,), (0,)))),  # empty contraction: zeros
    ((64, 33), (64, 129), (((), ()), ((0,), (0,)))),  # large enough for the parallel loop
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int8", "uint16"])
@pytest.mark.parametrize("case", range(len(OUTER)))
def test_outer_products_run_the_loop_and_match_the_reference(case: int, dtype: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batched_dots, "LOOP_MIN", 1)  # the loop at every size
    ls, rs, dn = OUTER[case]
    src = _check(ls, rs, dtype, dn)
    assert "batched loop over" in src and "matmul(" not in src


def test_small_outer_products_keep_np_matmul_and_say_why() -> None:
    src = _check((5, 7), (5, 3), "float32", (((), ()), ((0,), (0,))))
    assert "matmul(" in src and f"# BLAS: 105 < {batched_dots.LOOP_MIN} elements" in src
    src = _check((16, 32), (16, 8), "float32", (((), ()), ((0,), (0,))))
    assert "batched loop over 16 entries of (32x1)(1x8) (an outer product)" in src


# contractions longer than one: np.matmul, with the reason in the listing
BLAS = [
    ((5, 7, 4), (5, 4, 3), (((2,), (1,)), ((0,), (0,)))),
    ((3, 7, 2, 4), (4, 2, 3), (((3, 2), (0, 1)), ((0,), (2,)))),  # contracting dims anywhere
    ((2, 3, 4, 5), (2, 3, 5, 6), (((3,), (2,)), ((0, 1), (0, 1)))),  # attention-like
    ((6, 4), (4, 3), (((1,), (0,)), ((), ()))),  # a plain matmul
    ((2, 0, 4), (2, 4, 3), (((2,), (1,)), ((0,), (0,)))),  # empty free dim
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("case", range(len(BLAS)))
def test_longer_contractions_keep_blas_and_say_why(case: int, dtype: str) -> None:
    ls, rs, dn = BLAS[case]
    src = _check(ls, rs, dtype, dn)
    assert "matmul(" in src and "# BLAS" in src and "batched loop" not in src


def test_declined_types_fall_back_to_blas_with_a_note() -> None:
    b = GraphBuilder("dot")
    x, y = b.param(TensorType((4, 3), "bf16")), b.param(TensorType((4, 5), "bf16"))
    dn = (((), ()), ((0,), (0,)))
    d = b.add("dot_general", [x, y], {"dimension_numbers": dn, "preferred_element_type": "f32"})
    src = generate_program(b.build([d]), CpuInterpreter).source
    assert "# BLAS: accumulates in f32" in src
    how, why = batched_dots.choose([TensorType((4, 3), "pred"), TensorType((4, 5), "pred")],
                                   {"dimension_numbers": dn})
    assert how is None and "pred" in why


def test_per_example_gradients_of_an_mlp_match_jax(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batched_dots, "LOOP_MIN", 1)
    i = np.random.default_rng(0)
    sizes = (6, 8, 5, 3)
    p = [(i.standard_normal((a, c)).astype(np.float32), i.standard_normal(c).astype(np.float32))
         for a, c in zip(sizes[:-1], sizes[1:])]
    xs, ys = i.standard_normal((4, 6)).astype(np.float32), i.integers(0, 3, 4).astype(np.int32)
    want = jax.tree_util.tree_leaves(jax.jit(dp_sgd_grad)(p, xs, ys))
    t = gx.explore(dp_sgd_grad, p, xs, ys)
    # the traced stage holds vmap's per-example outer products: the loop runs them
    assert "batched loop over 4 entries of (5x1)(1x8)" in generate_program(
        t.stages[0].graph, CpuInterpreter).source
    for backend in ("reference", "cpu"):
        for stage in (0, -1):
            got = jax.tree_util.tree_leaves(t.run(p, xs, ys, backend=backend, stage=stage).value)
            for a, b in zip(got, want, strict=True):
                np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
