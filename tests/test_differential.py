"""The differential fuzz (tests/corpora/fuzz_programs.py): random JAX programs with special values and
random memory limits through every stage of the default pipeline and every available backend,
against JAX eager; and mutated HLO dumps through the pipeline and every backend, against the
reference interpreter. Any finding that is neither a documented divergence nor a known open
defect (fuzz_programs.KNOWN_OPEN) fails the test with its reproducer; those are counted in the
summary line.

A normal run (`make test`) checks 200 programs (traced and final stage on every backend,
every stage on the reference interpreter) and 200 HLO mutations in 4 blocks, and 100 of the
programs over f64 and i64 under jax.enable_x64(True); GAMBIT_FUZZ=full checks 10,000
programs in each mode, every stage on every backend, and 1,000 mutations.
`make fuzz` runs the full batch as one process instead, for one summary line:
`python -m tests.corpora.fuzz_programs 10000`.

The upstream divergences below are pinned by tests, so that they say when JAX/XLA changes:
the generator steers clear of the first, the harness classifies the second.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from tests.conftest import FULL_FUZZ
from tests.corpora.fuzz_programs import XLA_NAN_DROPPING_SIZE, fuzz

PROGRAMS, HLO, BLOCKS = (10_000, 1_000, 40) if FULL_FUZZ else (200, 200, 4)
X64_PROGRAMS, X64_BLOCKS = (10_000, 40) if FULL_FUZZ else (100, 2)


@pytest.mark.fuzz
@pytest.mark.parametrize("block", range(BLOCKS))
def test_random_programs_agree_with_jax_eager(block: int) -> None:
    size, hlo = PROGRAMS // BLOCKS, HLO // BLOCKS
    summary = fuzz(size, first_seed=block * size, hlo=hlo, every_stage=FULL_FUZZ)
    print(summary.line())
    assert summary.programs == size and summary.hlo_cases == hlo
    assert not summary.unknown(), summary.report()


@pytest.mark.fuzz
@pytest.mark.parametrize("block", range(X64_BLOCKS))
def test_random_x64_programs_agree_with_jax_eager(block: int) -> None:
    """The same programs over f64 and i64, under jax.enable_x64(True)."""
    size = X64_PROGRAMS // X64_BLOCKS
    summary = fuzz(size, first_seed=block * size, every_stage=FULL_FUZZ, x64=True)
    print(summary.line())
    assert summary.programs == size and summary.x64
    assert not summary.unknown(), summary.report()


@pytest.mark.parametrize("op", [jnp.min, jnp.max])
def test_xla_cpu_drops_nan_from_large_min_max_reductions(op) -> None:  # noqa: ANN001
    """Upstream: XLA on CPU drops NaN from a min/max reduction of 4096+ elements (any axis),
    eager and jit alike; NumPy and our backends keep it. If this fails, XLA fixed it: drop
    fuzz_programs' XLA_NAN_DROPPING_SIZE workaround."""
    if jax.default_backend() != "cpu":
        pytest.skip("an XLA CPU behaviour")
    for rows, cols, drops in ((64, 64, True), (32, 128, True), (63, 65, False)):
        assert (rows * cols >= XLA_NAN_DROPPING_SIZE) == drops
        x = np.ones((rows, cols), np.float32)
        x[1, 5] = np.nan
        for axis in (0, 1):
            got = np.asarray(op(jnp.asarray(x), axis=axis))
            assert np.isnan(got).any() != drops, (rows, cols, axis)
            assert np.isnan(gx.explore(lambda x, a=axis: op(x, axis=a), x).run().value).any()


def test_xla_jit_folds_log_exp() -> None:
    """Upstream: under jit XLA's algebraic simplifier folds log(exp(x)) to x, so jax.jit gives
    100 where JAX eager gives inf. The jax backend is XLA under jit and gives jit's answer
    (the fuzz counts that as documented); the reference and cpu backends give eager's."""
    x = np.array([100.0, 1.0], np.float32)
    fn = lambda x: jnp.log(jnp.exp(x))  # noqa: E731
    assert np.asarray(fn(jnp.asarray(x)))[0] == np.inf
    assert np.asarray(jax.jit(fn)(x))[0] == 100.0
    t = gx.explore(fn, x)
    assert t.run(backend="jax").value[0] == 100.0
    assert t.run(backend="reference").value[0] == np.inf


def test_xla_log1p_of_nan_sets_the_sign_bit() -> None:
    """Upstream: XLA's log1p turns +NaN into -NaN, NumPy's keeps +NaN; lax.top_k orders NaN by
    its sign, so a NaN that reached top_k through log1p ranks last under JAX and first with us.
    The fuzz counts such programs as documented (seed 491 is one); if this fails, XLA changed."""
    x = np.array([np.nan, 1.0, -np.inf], np.float32)
    assert not np.signbit(x[0])
    assert np.signbit(np.asarray(jnp.log1p(jnp.asarray(x)))[0])
    with np.errstate(invalid="ignore"):
        assert not np.signbit(np.log1p(x)[0])


def test_xla_divides_by_a_broadcast_through_its_reciprocal() -> None:
    """Upstream: XLA's algebraic simplifier turns a / broadcast(b) into a * broadcast(1 / b),
    eager and jit alike, so x / max(x, keepdims) is 0.99999994 where x is the maximum; NumPy
    and our backends divide (IEEE, 1.0). A conversion to int32 then gives 0 against our 1
    (fuzz seed 3429). If this fails, XLA changed."""
    if jax.default_backend() != "cpu":
        pytest.skip("an XLA CPU behaviour")
    a = np.array([[-0.49636883, 0.17691304]], np.float32)
    fn = lambda a: a / jnp.max(a, axis=1, keepdims=True)  # noqa: E731
    assert np.asarray(fn(jnp.asarray(a)))[0, 1] == np.float32(0.99999994)
    assert np.asarray(jax.jit(fn)(a))[0, 1] == np.float32(0.99999994)
    assert gx.explore(fn, a).run(backend="reference").value[0, 1] == 1.0


def test_xla_cpu_flushes_subnormals_to_zero() -> None:
    """Upstream: XLA on CPU flushes subnormal float results to zero; NumPy and our reference
    and cpu backends keep them (IEEE gradual underflow), so log of a softmax that underflowed is
    -inf under JAX and about -99 with us (fuzz seeds 3156, 6352). If this fails, XLA changed."""
    if jax.default_backend() != "cpu":
        pytest.skip("an XLA CPU behaviour")
    x = np.array([100.0, 1.4832103], np.float32)
    fn = lambda x: jnp.log(jax.nn.softmax(x))  # noqa: E731
    assert np.asarray(fn(jnp.asarray(x)))[1] == -np.inf
    t = gx.explore(fn, x)
    for backend in ("reference", "cpu"):
        assert -100 < t.run(backend=backend).value[1] < -98, backend


def test_an_amplified_difference_is_documented_and_another_is_not() -> None:
    """The harness explains a difference by an intermediate only when replaying our program
    from XLA's value there gives exactly JAX's result: not for a result JAX did not give, nor
    for a backend whose outputs differ from our reference's."""
    from tests.corpora.fuzz_programs import amplified

    a = np.array([[-0.49636883, 0.17691304], [2.0, 1.0]], np.float32)
    fn = lambda a: (a / jnp.max(a, axis=1, keepdims=True)).astype(jnp.int32)  # noqa: E731
    g = gx.explore(fn, a, pipeline=[]).stages[0].graph
    want = [np.asarray(fn(jnp.asarray(a)))]
    ours = [np.array([[-2, 1], [1, 0]], np.int32)]
    assert want[0][0, 1] == 0 and not np.array_equal(ours[0], want[0])
    assert amplified(g, ours, want, [a])
    assert not amplified(g, ours, [want[0] + 1], [a])  # no cut gives a result JAX did not
    assert not amplified(g, [ours[0] * 2], want, [a])  # not what our reference gives


def test_a_nan_made_inside_the_program_and_ranked_by_top_k_is_seen() -> None:
    """Fuzz program 166 takes top_k of sqrt(max(x)) over a row with negative maxima: the NaNs
    are made inside (in no argument or output), and their sign, -NaN on x86 and +NaN from
    CUDA, orders the indices: on an H200 the gpu backend's indices differed from JAX's on
    the CPU. The harness finds such a NaN on the reference and documents the difference."""
    from tests.corpora.fuzz_programs import make_program, nan_reaches_top_k

    prog = make_program(166)
    traced = gx.explore(prog.fn(), *prog.args, pipeline=[]).stages[0].graph
    assert "top_k" in prog.source and nan_reaches_top_k(traced, prog.args)
    assert not any(np.isnan(np.asarray(a, np.float64)).any() for a in prog.args)
    fine = gx.explore(lambda x: jax.lax.top_k(x, 2)[1], np.arange(6, dtype=np.float32),
                      pipeline=[]).stages[0].graph
    assert not nan_reaches_top_k(fine, [np.arange(6, dtype=np.float32)])


@pytest.mark.parametrize("seed", [457, 491, 577, 3156, 3429, 4397, 4815])
def test_programs_whose_divergence_readme_documents_are_classified_so(seed: int) -> None:
    """457: the euclidean rewrite's NaN for an infinite input, converted to int32 (0 against
    INT_MAX); 491: top_k of log1p of a NaN (its sign); 577: distances between integer points
    of norm ~500 off by 0.004, inside the rewrite's documented bound.
    Amplified: 3156, log of a softmax XLA flushed to zero; 3429, an int32 conversion of XLA's
    x / max(x) = 0.99999994; 4397, top_k of a NaN whose sign exp sets (NumPy) or keeps (XLA);
    4815, sin of a sum of 11,127 whose last bit differs."""
    from tests.corpora.fuzz_programs import check_program, make_program

    found = check_program(make_program(seed))
    assert found and all(f.kind == "documented" for f in found), [f.report() for f in found]


def test_few_feature_distances_no_longer_overflow() -> None:
    """3557 was documented: distances between points of norm ~1e19 with 32 features, whose
    |a|^2 + |b|^2 overflowed float32 (NaN against the naive 0). The form is computed in
    float64 for so few features now, and the program agrees everywhere, its measured peak
    within its 24 KiB limit."""
    from tests.corpora.fuzz_programs import check_program, make_program

    assert check_program(make_program(3557)) == []


def test_the_euclidean_bound_check_can_fail(monkeypatch) -> None:
    """The harness's bound is checked on the values, not assumed: a distance off by more than
    README's bound is not classified as documented."""
    import tests.corpora.fuzz_programs as fp

    x = np.random.default_rng(0).standard_normal((20, 8)).astype(np.float32)
    tr = gx.explore(lambda a: jnp.sum((a[:, None] - a[None]) ** 2, -1), x)
    at = next(i for i, s in enumerate(tr.stages) if s.name == "euclidean-distance")
    before, stage = tr.stages[at - 1].graph, tr.stages[at]
    assert stage.report.rewrites and fp.euclidean_within_bound(before, stage, [x])
    values = fp._values

    def off(g, ids, args):  # noqa: ANN001, ANN202
        out = values(g, ids, args)
        return [o + np.float32(1e-2) for o in out] if g is stage.graph else out

    monkeypatch.setattr(fp, "_values", off)
    assert not fp.euclidean_within_bound(before, stage, [x])


def test_a_near_tie_is_documented_and_a_real_difference_is_not() -> None:
    """argmin over values equal within float tolerance may pick either (seed 1092: tanh
    saturating to -1.0 in NumPy, one ulp above in XLA); a pick of a clearly larger value is a
    mismatch."""
    from tests.corpora.fuzz_programs import near_ties

    x = np.array([[0.5, -1.0, 2.0, -1.0 + 1e-7]], np.float32)
    tr = gx.explore(lambda x: jnp.argmin(x, axis=1), x)
    g = tr.stages[0].graph
    assert near_ties(g, [np.array([3], np.int32)], [np.array([1], np.int32)], [x])
    assert not near_ties(g, [np.array([0], np.int32)], [np.array([1], np.int32)], [x])
    assert not near_ties(g, [np.array([1], np.int32)], [np.array([1], np.int32)], [x])
