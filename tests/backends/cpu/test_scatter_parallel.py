"""The parallel scatters (backends/cpu/scatter_parallel.py) against the op rows' references:
every strategy forced in turn (owner-computes, sorted, privatized) on JAX's modes (drop,
clip), repeated and negative and out-of-range indices, empty updates, int and float64
elements, 1-D and row updates, windows wider than one row, two index dims and batching
dims; the pick by the index statistics; and programs whose listing names the loop."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.backends.cpu import scatter_parallel
from explorer.backends.cpu.indexing_prepared import prepare
from explorer.ir import dtypes
from explorer.ir.graph import Attrs, TensorType
from explorer.ir.ops import OPS

OPS_ = ["scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max"]
ROWS = dict(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
ONE_D = dict(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))


@pytest.fixture(autouse=True)
def _parallel_from_the_first_update(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scatter through the parallel loop, cut into 3 shares (an odd split, whatever
    numba's thread count: prange runs the shares on the threads it has)."""
    monkeypatch.setattr(scatter_parallel, "PARALLEL_MIN", 1)
    monkeypatch.setattr(scatter_parallel, "threads", lambda: 3)


def _type(x: np.ndarray) -> TensorType:
    return TensorType(x.shape, dtypes.from_numpy(x.dtype))


def _run(name: str, ins: list[np.ndarray], attrs: dict[str, Any], force: str | None
         ) -> tuple[np.ndarray, np.ndarray, str]:
    fn = prepare(name, [_type(x) for x in ins], Attrs(attrs))
    assert fn is not None
    if fn.strategy is None:  # no update: the serial loop (of nothing)
        assert ins[2].size == 0
        return fn(*ins), OPS[name].ref(*ins, **attrs), "serial"
    fn.strategy.force = force
    got = fn(*ins)
    return got, OPS[name].ref(*ins, **attrs), fn.strategy.last


def _agree(got: np.ndarray, want: np.ndarray, exact: bool) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact or got.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, want)
    else:  # privatized float sums and products: another order, equal within rounding
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _cases(rng: np.random.Generator) -> dict[str, tuple[list[np.ndarray], dict[str, Any]]]:
    f32 = lambda *s: rng.uniform(0.5, 1.5, s).astype(np.float32)  # noqa: E731
    ids = rng.integers(-3, 40, (300, 1)).astype(np.int32)  # repeated, negative, out of range
    return {
        "rows, drop": ([f32(37, 5), ids, f32(300, 5)], dict(ROWS, mode="fill")),
        "rows, clip": ([f32(37, 5), ids, f32(300, 5)], dict(ROWS, mode="clip")),
        "rows, promise_in_bounds": ([f32(37, 5), np.abs(ids) % 37, f32(300, 5)],
                                    dict(ROWS, mode="promise_in_bounds")),
        "1-D, drop": ([f32(37), ids, f32(300)], dict(ONE_D, mode="fill")),
        "1-D, few segments": ([f32(3), ids % 3, f32(300)], dict(ONE_D, mode="fill")),
        "sorted rows": ([f32(37, 5), np.sort(np.abs(ids) % 37, 0), f32(300, 5)],
                        dict(ROWS, mode="fill")),
        "sorted 1-D, int64 indices": ([f32(37), np.sort(np.abs(ids) % 37, 0).astype(np.int64),
                                       f32(300)], dict(ONE_D, mode="fill")),
        "float64": ([rng.standard_normal((37, 5)), ids, rng.standard_normal((300, 5))],
                    dict(ROWS, mode="clip")),
        "int32": ([rng.integers(-5, 5, (37, 5)).astype(np.int32), ids,
                   rng.integers(-5, 5, (300, 5)).astype(np.int32)], dict(ROWS, mode="fill")),
        "uint8": ([rng.integers(0, 3, (37, 5)).astype(np.uint8), ids,
                   rng.integers(0, 3, (300, 5)).astype(np.uint8)], dict(ROWS, mode="clip")),
        "empty updates": ([f32(37, 5), ids[:0], f32(0, 5)], dict(ROWS, mode="fill")),
        # windows of 4 rows starting at each index: they overlap, and cross the shares' cuts
        "windows of 4 rows": ([f32(37, 5), ids, f32(300, 4, 5)],
                              dict(update_window_dims=(1, 2), inserted_window_dims=(),
                                   scatter_dims_to_operand_dims=(0,), mode="fill")),
        "two index dims": ([f32(11, 3, 7), rng.integers(-1, 12, (200, 2)).astype(np.int32),
                            f32(200, 3)],
                           dict(update_window_dims=(1,), inserted_window_dims=(0, 2),
                                scatter_dims_to_operand_dims=(0, 2), mode="fill")),
        "batching dims (take_along_axis's gradient)": (
            [f32(6, 9), rng.integers(-1, 10, (6, 20, 1)).astype(np.int32), f32(6, 20)],
            dict(update_window_dims=(), inserted_window_dims=(1,),
                 scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                 scatter_indices_batching_dims=(0,), mode="fill")),
    }


CASES = list(_cases(np.random.default_rng(0)))


@pytest.mark.parametrize("force", ["owner", "sorted", "privatized", None])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", OPS_)
def test_every_strategy_is_the_rows_semantics(name: str, case: str, force: str | None) -> None:
    """Owner-computes (and sorted) are the serial loop's result bit for bit; privatized
    equal within rounding for floats, exact for integers; the plain scatter never
    privatized (its later write wins)."""
    ins, attrs = _cases(np.random.default_rng(0))[case]
    got, want, took = _run(name, ins, attrs, force)
    if force == "sorted" and "sorted" in case:
        assert took == "sorted"
    if name == "scatter":
        assert took != "privatized"
    _agree(got, want, exact=took != "privatized")


@pytest.mark.parametrize("name", OPS_)
def test_the_rows_samples_under_every_strategy(name: str) -> None:
    for seed in range(20):
        ins, attrs = OPS[name].sample(np.random.default_rng(seed))
        for force in ("owner", "sorted", "privatized"):
            got, want, took = _run(name, ins, attrs, force)
            _agree(got, want, exact=took != "privatized")


def test_the_statistics_pick_the_strategy() -> None:
    """Spread updates into a large output: owner-computes; sorted ones: sorted; updates all
    on one row of the output (skewed) or into few segments: privatized; a plain scatter
    never privatized. And the owner ranges fall on cache lines."""
    rng = np.random.default_rng(1)
    spread = (np.zeros((4096, 16), np.float32), rng.integers(0, 4096, (8192, 1)).astype(np.int32),
              np.ones((8192, 16), np.float32))
    picks = {}
    for label, idx in (("spread", spread[1]), ("sorted", np.sort(spread[1], 0)),
                       ("skewed", np.zeros_like(spread[1]) + 7)):
        for name in ("scatter-add", "scatter"):
            fn = prepare(name, [_type(x) for x in spread], Attrs(dict(ROWS, mode="fill")))
            out = fn(spread[0], idx, spread[2])
            picks[label, name] = fn.strategy.last
            assert np.array_equal(out, OPS[name].ref(spread[0], idx, spread[2],
                                                     **dict(ROWS, mode="fill")))
    assert picks["spread", "scatter-add"] == "owner"
    assert picks["sorted", "scatter-add"] == picks["sorted", "scatter"] == "sorted"
    assert picks["skewed", "scatter-add"] == "privatized"
    assert picks["skewed", "scatter"] in ("owner", "sorted")
    few_ins = [np.zeros(4, np.float32), spread[1] % 4, np.ones(8192, np.float32)]
    few = prepare("scatter-add", [_type(x) for x in few_ins], Attrs(dict(ONE_D, mode="fill")))
    few(*few_ins)
    assert few.strategy.last == "privatized"
    s = scatter_parallel.Strategy("add", np.dtype(np.float32), 100, 16, 4096)
    _, cuts = s.pick(False, np.full(48, 100, np.int64), 3)
    assert cuts[0] == 0 and cuts[-1] == 4096 and all(c % 16 == 0 for c in cuts)


def test_a_privatized_sum_keeps_the_sign_of_an_untouched_negative_zero() -> None:
    x = np.array([-0.0, 1.0, -0.0, 2.0], np.float32)
    idx = np.array([[1], [3], [1]], np.int32)
    got, want, took = _run("scatter-add", [x, idx, np.ones(3, np.float32)],
                           dict(ONE_D, mode="fill"), "privatized")
    assert took == "privatized"
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    assert scatter_parallel.identity("minimum", np.dtype(np.int16)) == np.iinfo(np.int16).max
    assert scatter_parallel.identity("maximum", np.dtype(np.float64)) == -np.inf
    assert scatter_parallel.identity("maximum", np.dtype(np.uint8)) == 0


PROGRAMS = {
    "segment_sum": (lambda v, i: jax.ops.segment_sum(v, i, num_segments=50),
                    lambda r: (r.standard_normal((3000, 8)).astype(np.float32),
                               r.integers(0, 50, 3000).astype(np.int32))),
    "segment_sum, sorted, out of range": (
        lambda v, i: jax.ops.segment_sum(v, i, num_segments=40, indices_are_sorted=True),
        lambda r: (r.standard_normal(5000).astype(np.float32),
                   np.sort(r.integers(0, 45, 5000)).astype(np.int32))),
    "segment_max": (lambda v, i: jax.ops.segment_max(v, i, num_segments=64),
                    lambda r: (r.standard_normal((2000, 4)), r.integers(0, 64, 2000))),
    "gradient of a gather": (jax.grad(lambda x, i: (x[i] ** 2).sum()),
                             lambda r: (r.standard_normal((300, 16)).astype(np.float32),
                                        r.integers(-300, 300, 4000).astype(np.int32))),
    "x.at[i].min, clip": (lambda x, i, u: x.at[i].min(u, mode="clip"),
                          lambda r: (r.standard_normal((100, 8)).astype(np.float32),
                                     r.integers(-20, 120, 3000).astype(np.int32),
                                     r.standard_normal((3000, 8)).astype(np.float32))),
    "x.at[i].set, drop": (lambda x, i, u: x.at[i].set(u, mode="drop"),
                          lambda r: (r.standard_normal((100, 8)).astype(np.float32),
                                     r.integers(-120, 120, 3000).astype(np.int32),
                                     r.standard_normal((3000, 8)).astype(np.float32))),
    "int32 scatter-add": (lambda x, i, u: x.at[i].add(u),
                          lambda r: (np.zeros(64, np.int32), r.integers(0, 64, 9000),
                                     r.integers(-9, 9, 9000).astype(np.int32))),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_programs_run_scatters_as_the_parallel_loop(name: str) -> None:
    """A CPU program's scatter: the listing names the parallel loop and its strategies; the
    result is the reference backend's (within rounding: a privatized float sum)."""
    fn, make = PROGRAMS[name]
    args = make(np.random.default_rng(2))
    compiled = gx.compile(fn, backend="cpu")
    program = compiled.trace_for(*args).run(backend="cpu").program
    assert "one parallel loop over" in program and "picked per call by the index" in program
    got, want = compiled(*args), gx.compile(fn, backend="reference")(*args)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_small_scatters_keep_the_serial_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scatter_parallel, "PARALLEL_MIN", 1 << 15)
    x, i = np.zeros((10, 4), np.float32), np.arange(10, dtype=np.int32)
    compiled = gx.compile(lambda x, i: x.at[i].add(1.0), backend="cpu")
    program = compiled.trace_for(x, i).run(backend="cpu").program
    assert "serial loop (40 update elements)" in program, program
    np.testing.assert_array_equal(compiled(x, i), np.ones((10, 4), np.float32))
