"""simplify: semantics on every test graph, and the identities it must not apply."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from explorer.frontend.jaxpr import trace
from explorer.ir import GraphBuilder, TensorType
from explorer.passes.simplify import Simplify
from tests.corpora.graphs import ALL
from tests.passes.semantic import check_semantics


@pytest.mark.parametrize("name", sorted(ALL))
def test_semantics_on_test_graphs(name: str) -> None:
    fn, args = ALL[name]
    check_semantics(Simplify(), trace(fn, *args).graph, like=args)


def _apply(op: str, dtype: str, value: float, const_first: bool = False) -> bool:
    """Does simplify drop `op(x, value)`?"""
    b = GraphBuilder()
    x = b.param(TensorType((3,), dtype))
    c = b.constant(value, dtype)
    y = b.add(op, [c, x] if const_first else [x, c])
    out, report = Simplify()(b.build([y]))
    return out.outputs == (x,)


@pytest.mark.parametrize("op,value,applies", [
    ("mul", 1.0, True), ("div", 1.0, True), ("add", -0.0, True), ("sub", 0.0, True),
    ("add", 0.0, False), ("sub", -0.0, False), ("mul", 0.0, False), ("mul", -1.0, False),
    ("div", -1.0, False),
])
def test_only_exact_float_identities(op: str, value: float, applies: bool) -> None:
    assert _apply(op, "f32", value) is applies


def test_identities_with_the_constant_first() -> None:
    assert _apply("mul", "f32", 1.0, const_first=True)
    assert _apply("add", "f32", -0.0, const_first=True)
    assert not _apply("sub", "f32", 0.0, const_first=True)  # 0 - x is not x


def test_complex_identities_are_not_applied() -> None:
    assert not _apply("mul", "c64", 1.0)


def test_signed_zeros_survive() -> None:
    """The identities it applies keep -0.0 and NaN exactly."""
    b = GraphBuilder()
    x = b.param(TensorType((4,), "f32"))
    y = b.add("add", [b.add("mul", [x, b.constant(1.0, "f32")]), b.constant(-0.0, "f32")])
    g = b.build([y])
    out, _ = Simplify()(g)
    assert out.outputs == (x,)
    arr = np.array([-0.0, 0.0, np.nan, -np.inf], np.float32)
    from explorer.backends.reference import evaluate

    got = evaluate(g, [arr])[0]
    assert np.array_equal(np.signbit(got), np.signbit(arr)) and np.isnan(got[2])


def test_fold_limit_is_an_option() -> None:
    b = GraphBuilder()
    c = b.constant(np.arange(8, dtype=np.float32))
    y = b.add("neg", [c])
    g = b.build([y])
    assert Simplify(fold_limit=4)(g)[0] == g
    folded, report = Simplify(fold_limit=8)(g)
    assert [r.rule for r in report.rewrites] == ["fold-constant"]
    assert folded[folded.outputs[0]].op == "constant"


@pytest.mark.parametrize("fn,shapes", [
    (lambda a, b: (a @ b).T, [(4, 3), (3, 5)]),
    (lambda a, b: jnp.swapaxes(a @ b, 1, 2), [(2, 4, 3), (2, 3, 5)]),  # batched
    (lambda a, b: jnp.transpose(jnp.tensordot(a, b, 1), (1, 2, 0)), [(4, 3), (3, 2, 5)]),
])
def test_transpose_of_dot_keeps_the_values(fn, shapes) -> None:  # noqa: ANN001
    """transpose-of-dot fires and the reference gives the same values before and after."""
    g = trace(fn, *(np.zeros(s, np.float32) for s in shapes)).graph
    after, report = check_semantics(Simplify(), g)
    assert "transpose-of-dot" in {r.rule for r in report.rewrites}
    assert "transpose" not in after.ops()


# ---------------------------------------------------------------- remarks


def _refusals(fn, *args):  # type: ignore[no-untyped-def]
    _, report = Simplify()(trace(fn, *args).graph)
    return {r.rule: r for r in report.remarks}


def test_identities_that_are_not_exact_say_which_and_why() -> None:
    def f(x):  # type: ignore[no-untyped-def]
        a = x * 0.0
        b = x - x
        c = x / x
        d = x + 0.0
        return a, b, c, d

    line = f.__code__.co_firstlineno
    said = _refusals(f, np.ones(4, np.float32))
    assert set(said) == {"mul-by-zero", "sub-self", "div-self", "add-positive-zero"}
    for rule, offset, words in (("mul-by-zero", 1, "x * 0 -> 0 refused: NaN * 0"),
                                ("sub-self", 2, "x - x -> 0 refused: inf - inf"),
                                ("div-self", 3, "x / x -> 1 refused: 0 / 0"),
                                ("add-positive-zero", 4, "x + 0.0 -> x refused: -0.0 + 0.0")):
        r = said[rule]
        assert (r.pass_, r.kind) == ("simplify", "missed")
        assert r.source is not None and r.source.endswith(f":{line + offset}")
        assert r.reason.startswith(words)
        assert len(r.nodes) == 1


def test_no_remark_where_the_exact_identity_fires() -> None:
    def f(x):  # type: ignore[no-untyped-def]
        return (x * 1.0 - 0.0) / 1.0 + (-0.0)

    g = trace(f, np.ones(4, np.float32)).graph
    out, report = Simplify()(g)
    assert report.rewrites and report.remarks == ()
    assert set(out.ops()) == {"parameter"}


def test_integer_identities_are_exact_and_not_remarked() -> None:
    def f(n):  # type: ignore[no-untyped-def]
        return n * 0, n - n

    assert _refusals(f, np.arange(4, dtype=np.int32)) == {}


# ---------------------------------------------------------------- bound for XLA (backend=jax)


def _outer_grads(a, b):  # type: ignore[no-untyped-def]
    """Per-example outer products, transposed (what vmap(grad) of x @ w gives)."""
    outer = jax.lax.dot_general(a, b, (((), ()), ((0,), (0,))))
    return jnp.swapaxes(outer, 1, 2) * 2.0


def test_an_outer_product_for_xla_keeps_its_transpose_and_says_why() -> None:
    g = trace(_outer_grads, np.zeros((3, 4), np.float32), np.zeros((3, 5), np.float32)).graph
    after, report = check_semantics(Simplify(backend="jax"), g)
    assert "transpose-of-dot" not in {r.rule for r in report.rewrites}
    assert "transpose" in after.ops()
    said = [r for r in report.remarks if r.rule == "transpose-of-dot"]
    assert len(said) == 1 and "jax backend" in said[0].reason and said[0].kind == "missed"
    # for any other backend the operands swap, as before
    other, report = check_semantics(Simplify(backend="cpu"), g)
    assert "transpose-of-dot" in {r.rule for r in report.rewrites}


@pytest.mark.parametrize("name", sorted(ALL))
def test_semantics_for_xla_on_test_graphs(name: str) -> None:
    fn, args = ALL[name]
    check_semantics(Simplify(backend="jax"), trace(fn, *args).graph, like=args)


def test_the_jax_backend_compiles_with_the_option_set() -> None:
    """gx.compile(backend="jax") runs simplify with backend=jax (the compile options')."""
    import explorer as gx

    a, b = np.ones((3, 4), np.float32), np.ones((3, 5), np.float32)
    t = gx.compile(_outer_grads, backend="jax").trace_for(a, b)
    assert t.stage("simplify").pass_.backend == "jax"
    assert any(r.rule == "transpose-of-dot" for r in t.stage("simplify").report.remarks)
    assert gx.explore(_outer_grads, a, b).stage("simplify").pass_.backend == "reference"
