"""trace.numerics: each stage's and node's error against the traced program in float64, and
first_change's stage and firing (explorer/measure/numerics.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.ir.rewrite import Rule, pat, var
from explorer.measure.latest import latest
from explorer.measure.numerics import Numerics, NumericsError, ulps_apart
from explorer.passes.base import RewritePass
from explorer.trace import Stage

rng = np.random.default_rng(0)


def distances(a, b):
    return jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1)  # the distance line


def near_tied(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Points clustered 1e-3 around one point: their distances cancel in the quadratic form."""
    base = rng.standard_normal((1, k))
    return ((base + 1e-3 * rng.standard_normal((12, k))).astype(np.float32),
            (base + 1e-3 * rng.standard_normal((9, k))).astype(np.float32))


def test_an_exact_program_has_no_error() -> None:
    """One rounding per output (a sum of two floats, an integer product) is the correctly
    rounded result: error 0 at every stage, output and node."""
    def f(x, y, i):
        return x + y, i * 3 + 1, (x * 2.0).reshape(-1)

    x, y = rng.standard_normal((2, 3, 4)).astype(np.float32)
    t = gx.explore(f, x, y, np.arange(5, dtype=np.int32))
    n = t.numerics()
    assert n.precision == "f32"
    for s in n.stages:
        assert [(o.max_rel, o.max_ulps) for o in s.outputs] == [(0.0, 0.0)] * 3, s.name
        assert s.drift == 0.0
        assert all(e.max_rel == 0.0 and e.max_ulps == 0.0 for e in s.nodes.values())
    assert n.stages[0].nodes, "the traced stage's nodes are compared"
    assert n.first_change(rtol=0.0) is None


def test_a_program_without_floats_is_exact() -> None:
    n = gx.explore(lambda i, j: (i * j + 7) // 2, np.arange(6, dtype=np.int32),
                   np.arange(6, dtype=np.int32)).numerics()
    assert n.precision.startswith("exact")
    assert all(s.max_rel == 0.0 and s.max_ulps == 0.0 for s in n.stages)
    assert "exact" in str(n)


def test_the_distance_rewrite_cancels_on_near_tied_points_and_first_change_names_it() -> None:
    a, b = near_tied(64)  # over 32 features: the quadratic form stays in float32
    t = gx.explore(distances, a, b)
    n = t.numerics()
    traced, rewritten = n[0], n["euclidean-distance"]
    assert traced.max_rel < 1e-9 and traced.max_ulps <= 16  # the naive form: a few roundings
    assert rewritten.max_rel > 1e-5 and rewritten.max_ulps > 1e4  # cancellation
    change = n.first_change(rtol=1e-6)
    assert change is not None and change.name == "euclidean-distance"
    assert change.stage == [s.name for s in t.stages].index("euclidean-distance")
    assert change.rule == "expand-squared-distance" and change.firing == 0
    assert change.firings == 1
    assert change.source.endswith(f"test_numerics.py:{distances.__code__.co_firstlineno + 1}")
    assert "the distance line" in change.line
    rw = t.stage("euclidean-distance").report.rewrites[0]
    assert (change.before, change.after) == (rw.before, rw.after)
    text = str(change)
    assert "euclidean-distance" in text and "expand-squared-distance" in text and \
        "the distance line" in text


def test_the_wide_form_keeps_near_tied_distances_exact() -> None:
    """Up to 32 features the pass computes the form in float64: no cancellation left."""
    a, b = near_tied(16)
    n = gx.explore(distances, a, b).numerics()
    assert n["euclidean-distance"].max_ulps <= 16
    assert n.first_change(rtol=1e-6) is None


REASSOCIATE = Rule("reassociate-add",
                   pat("add", pat("add", var("a"), var("b"), name="inner"), var("c"), name="root"),
                   lambda ctx, root, inner, a, b, c: None if ctx.users(inner) != (root.id,)
                   else ctx.emit("add", (a, ctx.emit("add", (b, c)))))


def test_a_rule_pass_is_bisected_to_the_one_firing_that_moved_the_outputs() -> None:
    def sums(x, y, z):
        first = (x * 2.0 + y) + z
        second = (x + y) + z  # the cancelling one
        third = (y * 3.0 + z) + x
        return first * 0.0 + third, second

    x = np.full(4, 1e8, np.float32)
    y, z = np.full(4, -1e8, np.float32), np.ones(4, np.float32)
    t = gx.explore(sums, x, y, z, pipeline=[RewritePass("reassociate", [REASSOCIATE]), "dce"])
    rewrites = t.stage("reassociate").report.rewrites
    assert len(rewrites) >= 3
    n = t.numerics()
    assert n[0].max_rel == 0.0
    change = n.first_change(rtol=1e-3)
    assert change.name == "reassociate" and change.rule == "reassociate-add"
    assert "the cancelling one" in change.line
    assert change.firing is not None and rewrites[change.firing].before == change.before
    assert change.error_before is not None and change.error_before <= 1e-3
    # the firing is the first after which the outputs are past the tolerance
    g = t.after_firing("reassociate", change.firing)
    flat = t.flat_args(t.example_args)
    before = gx.backends.registry.run_graph(g, flat, "reference").outputs
    after = gx.backends.registry.run_graph(t.after_firing("reassociate", change.firing + 1),
                                           flat, "reference").outputs
    assert np.array_equal(before[1], np.ones(4, np.float32))
    assert np.array_equal(after[1], np.zeros(4, np.float32))
    assert n.first_change(rtol=1e-3, bisect=False).firing is None


def test_float64_programs_are_measured_in_their_own_precision() -> None:
    with jax.enable_x64(True):
        x = rng.standard_normal((5, 3))
        t = gx.explore(lambda x: jnp.tanh(x) @ x.T + 1.0, x)
        n = t.numerics()
    assert n.precision == "f64"
    assert all(s.drift == 0.0 for s in n.stages)  # nothing to widen: the same program
    assert all(s.max_ulps <= 4 for s in n.stages)


def test_arguments_and_seeded_inputs() -> None:
    def f(x):
        return jnp.exp(x) - 1.0

    t = gx.explore(f, np.full(8, 1e-4, np.float32))
    small = t.numerics()  # exp(x) - 1 cancels at the traced x
    assert small.inputs == "the traced example arguments"
    assert small[0].max_ulps > 100
    big = t.numerics(np.full(8, 3.0, np.float32))
    assert big.inputs == "the given arguments" and big[0].max_ulps <= 2
    seeded = t.numerics(seed=3)
    assert seeded.inputs == "random inputs (seed 3)"
    assert str(seeded) == str(t.numerics(seed=3))
    with pytest.raises(ValueError, match="not both"):
        gx.measure.numerics.numerics(t, (np.ones(8, np.float32),), seed=1)
    with pytest.raises(ValueError):
        t.numerics(np.ones(7, np.float32))  # not like the traced arguments


def test_the_latest_numerics_is_kept_for_the_widget_and_prints_as_a_table() -> None:
    a, b = near_tied(64)
    t = gx.explore(distances, a, b)
    n = t.numerics()
    assert isinstance(n, Numerics) and latest(t).numerics is n
    lines = str(n).splitlines()
    assert lines[0].startswith("numerics: f32 against float64")
    assert len(lines) == 2 + len(t.stages)
    html = n._repr_html_()
    assert html.count("<tr>") == 1 + len(t.stages) and "euclidean-distance" in html
    # the widget colours nodes by stages[i].nodes[id].max_rel: surviving ids only
    for s, stage in zip(n.stages, t.stages):
        assert set(s.nodes) <= {m.id for m in stage.graph.nodes}


def test_opaque_nodes_run_through_jax_in_both_precisions_or_say_why_not() -> None:
    def f(x):
        y = jax.lax.bessel_i1e(x) * 2.0  # no row: an opaque node JAX runs in float64 too
        z = jax.pure_callback(lambda v: np.sort(v).astype(np.float32),
                              jax.ShapeDtypeStruct(x.shape, x.dtype), y)  # float32 only
        return y, z + 1.0

    x = np.linspace(-2, 2, 7).astype(np.float32)
    t = gx.explore(f, x)
    n = t.numerics()
    assert n[0].outputs[0].max_ulps <= 4  # bessel_i1e in float64 rounds to its float32 value
    assert len(n.notes) == 1 and "pure_callback" in n.notes[0] and \
        "ran at its own precision, (f32[7]), in the float64 run" in n.notes[0]
    assert "note:" in str(n)


def test_an_opaque_node_that_cannot_run_here_is_refused_with_its_reason() -> None:
    t = gx.explore(lambda x: jax.lax.bessel_i1e(x) + 1.0, np.ones(3, np.float32))
    text = str(t.stages[1].graph)
    token = text.split('impl=jax<"')[1].split('"')[0]
    parsed = gx.parse(text.replace(token, "bessel_i1e:999999"))
    t.stages[1] = Stage(t.stages[1].name, parsed, t.stages[1].report, t.stages[1].pass_)
    with pytest.raises(NumericsError, match="read from text.*cannot run here"):
        t.numerics()


def test_ulps_count_the_floats_between() -> None:
    one = np.float32(1.0)
    assert ulps_apart(np.array([np.nextafter(one, np.float32(2))]), np.array([one])) == 1
    assert ulps_apart(np.array([-0.0], np.float32), np.array([0.0], np.float32)) == 0
    tiny = np.array([np.float32(1e-45)])
    assert ulps_apart(-tiny, tiny) == 2  # across zero
    assert ulps_apart(np.array([np.nan], np.float32), np.array([np.nan], np.float32)) == 0
    assert ulps_apart(np.array([np.nan], np.float32), np.array([1.0], np.float32)) == np.inf
    assert ulps_apart(np.array([3, 9]), np.array([3, 5])) == 4


def test_a_firing_inside_a_scan_body_is_found_with_its_line() -> None:
    def f(xs, big):
        def step(c, x):
            return c, (big - big * 1.0) + x  # the cancelling line, in the body
        return jax.lax.scan(step, big[0], xs)[1]

    xs = np.full((3, 4), 1.0, np.float32)
    t = gx.explore(f, xs, np.full(4, 1e8, np.float32),
                   pipeline=[RewritePass("reassociate", [REASSOCIATE_SUB])])
    assert any(r.region for r in t.stage("reassociate").report.rewrites)
    n = t.numerics()
    assert n[0].max_rel == 0.0
    change = n.first_change(rtol=1e-3)
    assert change.name == "reassociate" and change.rule == "reassociate-sub"
    assert "the cancelling line" in change.line


# (a - b) + c -> a - (b - c): exact in real numbers, not in float32
REASSOCIATE_SUB = Rule("reassociate-sub",
                       pat("add", pat("sub", var("a"), var("b"), name="inner"), var("c"),
                           name="root"),
                       lambda ctx, root, inner, a, b, c: None if ctx.users(inner) != (root.id,)
                       else ctx.emit("sub", (a, ctx.emit("sub", (b, c)))))


@pytest.mark.parametrize("name", ["dropout", "rnn_grad"])
def test_zoo_programs(name: str) -> None:
    """Random bits turned into floats by a bitcast (kept at float32, said once) and a scan's
    gradient: every stage within float32's rounding of float64, nothing moved."""
    from tests.corpora.zoo import zoo

    fn, args = zoo()[name]
    n = gx.explore(fn, *args).numerics()
    assert all(s.max_rel < 1e-5 for s in n.stages)
    assert n.first_change() is None
    if name == "dropout":
        assert len(n.notes) == 2 and all("bitcast_convert_type" in x for x in n.notes)
