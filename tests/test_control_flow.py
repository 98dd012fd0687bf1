"""Control flow: JAX's scan, while/fori_loop and cond/switch become region ops whose bodies are
graphs (ir/ops/regions.py, frontend/jax_control.py). Each program traces without unrolling,
explores through the default pipeline (with and without a memory limit), verifies and
round-trips at every stage, matches JAX on the reference, cpu and jax backends, and every
pass keeps its meaning inside bodies (the reference interpreter, before vs after)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import explorer as gx
from explorer.analysis.cost import graph_cost, node_flops
from explorer.analysis.memory import plan
from explorer.backends.jax import lower
from explorer.backends.reference import evaluate
from explorer.ir import Graph, VerifyError, parse, verify
from explorer.passes.split import InfeasibleMemoryLimit
from tests.passes.semantic import assert_outputs_close, check_semantics

# ---------------------------------------------------------------- the programs


def rnn(W, U, h0, xs):
    def step(h, x):
        h = jnp.tanh(W @ h + U @ x)
        return h, jnp.sum(h * h)

    return lax.scan(step, h0, xs)


def rnn_loss(W, U, h0, xs):
    h, ys = rnn(W, U, h0, xs)
    return jnp.sum(h) + jnp.sum(ys)


rnn_grad = jax.grad(rnn_loss, argnums=(0, 1))


def newton(a):  # sqrt(a): fori_loop with static bounds lowers to scan
    return lax.fori_loop(0, 8, lambda i, y: y - (y * y - a) / (2 * y), a)


def newton_dynamic(a, n):  # a trip count only known at run time lowers to while
    return lax.fori_loop(0, n, lambda i, y: y - (y * y - a) / (2 * y), a)


def doubling(x, limit):  # the trip count depends on the data
    def body(s):
        return s[0] * 2.0 + 1.0, s[1] + 1

    return lax.while_loop(lambda s: jnp.max(s[0]) < limit, body, (x, 0))


def cond_prog(p, x, y):
    return lax.cond(p > 0, lambda a, b: jnp.sin(a) * b, lambda a, b: jnp.cos(a) + b, x, y)


def switch_prog(i, x):
    return lax.switch(i, [lambda a: a * 2.0, lambda a: jnp.exp(a).sum() * a, lambda a: -a], x)


def reverse_cumsum(xs):
    return lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(xs.shape[1:]), xs, reverse=True)


def _args(name: str, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)

    def f32(*s: int) -> np.ndarray:
        return rng.standard_normal(s).astype(np.float32)

    return {
        "rnn": lambda: (f32(4, 4) * .5, f32(4, 3) * .5, f32(4), f32(6, 3)),
        "rnn_grad": lambda: (f32(4, 4) * .5, f32(4, 3) * .5, f32(4), f32(6, 3)),
        "newton": lambda: (np.abs(f32(5)) + 1,),
        "newton_dynamic": lambda: (np.abs(f32(5)) + 1, np.int32(6)),
        "doubling": lambda: (np.abs(f32(3)), np.float32(50.0)),
        "cond": lambda: (np.float32(seed % 2 - .5), f32(3), f32(3)),
        "switch": lambda: (np.int32(seed % 3), f32(4)),
        "reverse_cumsum": lambda: (f32(5, 2),),
    }[name]()


PROGRAMS = {"rnn": rnn, "rnn_grad": rnn_grad, "newton": newton,
            "newton_dynamic": newton_dynamic, "doubling": doubling, "cond": cond_prog,
            "switch": switch_prog, "reverse_cumsum": reverse_cumsum}
# The region op each program traces to (how many), so nothing was unrolled.
REGIONS = {"rnn": {"scan": 1}, "rnn_grad": {"scan": 2}, "newton": {"scan": 1},
           "newton_dynamic": {"while": 1}, "doubling": {"while": 1},
           "cond": {"conditional": 1}, "switch": {"conditional": 1},
           "reverse_cumsum": {"scan": 1}}
BACKENDS = ("reference", "cpu", "jax")


@functools.cache
def explored(name: str, memory_limit: int | None = None) -> gx.Trace:
    return gx.explore(PROGRAMS[name], *_args(name), memory_limit=memory_limit)


def _leaves(x: object) -> list[np.ndarray]:
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(x)]


def _assert_matches_jax(name: str, trace: gx.Trace, backend: str, seed: int = 0) -> None:
    args = _args(name, seed)
    want = _leaves(PROGRAMS[name](*args))
    got = _leaves(trace.run(*args, backend=backend).value)
    assert_outputs_close(want, got, f"{name} on {backend}", min_tolerance=1e-5)


# ---------------------------------------------------------------- tracing


@pytest.mark.parametrize("name", PROGRAMS)
def test_traces_to_regions_without_unrolling(name: str) -> None:
    g = explored(name).stages[0].graph
    for op, count in REGIONS[name].items():
        assert g.ops().get(op) == count, f"{name}: {g.ops()}"
    assert parse(str(g)) == g


def test_gradient_of_scan_is_a_reverse_scan() -> None:
    scans = [n for n in explored("rnn_grad").stages[0].graph.nodes if n.op == "scan"]
    assert [n.attrs["reverse"] for n in scans] == [False, True]
    assert scans[0].attrs["body"].ops().get("tanh") == 1


def test_while_constants_are_carried_unchanged() -> None:
    g = explored("newton_dynamic").stages[0].graph
    (w,) = [n for n in g.nodes if n.op == "while"]
    body = w.attrs["body"]
    # JAX's body constant (a) is loop state the body returns as it got it
    assert body.outputs[0] == body.params[0]
    assert len(w.attrs["cond"].params) == len(body.params) == len(w.inputs)


def test_cond_operands_are_copied_per_branch() -> None:
    g = explored("switch").stages[0].graph
    (c,) = [n for n in g.nodes if n.op == "conditional"]
    assert len(c.attrs["branches"]) == 3 and len(c.inputs) == 1 + 3


# ---------------------------------------------------------------- the whole pipeline


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_stage_verifies_and_round_trips(name: str) -> None:
    for stage in explored(name).stages:
        verify(stage.graph)
        assert parse(str(stage.graph)) == stage.graph, f"{name}: stage {stage.name}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", PROGRAMS)
def test_matches_jax(name: str, backend: str) -> None:
    _assert_matches_jax(name, explored(name), backend)


@pytest.mark.parametrize("name", ["cond", "switch"])
def test_other_branches_match_jax(name: str) -> None:
    for seed in (1, 2):
        _assert_matches_jax(name, explored(name), "reference", seed)


def test_fuse_runs_inside_bodies_and_logs_where() -> None:
    trace = explored("newton_dynamic")
    fused = [r for r in trace.stages[-1].report.rewrites if r.rule == "fuse-elementwise"]
    assert fused and all(r.region.endswith(".body") for r in fused)
    (w,) = [n for n in trace.final.graph.nodes if n.op == "while"]
    assert "kernel" in w.attrs["body"].ops()


def test_jax_backend_keeps_the_loops() -> None:
    """The jax backend lowers to lax control flow: XLA sees one loop, not unrolled copies."""
    for name, prim in (("rnn", "scan"), ("doubling", "while"), ("switch", "cond")):
        g = explored(name).final.graph
        jaxpr = jax.make_jaxpr(lower(g))(*_args(name))
        prims = [e.primitive.name for e in jaxpr.eqns]
        assert prim in prims, f"{name}: {prims}"
        assert prims.count("tanh") == 0  # nothing of a body was inlined at the top


# ---------------------------------------------------------------- memory limits


def big_rnn(W, h0, xs, a, b):
    h, ys = rnn(W, W, h0, xs)
    return h, ys, jnp.sum(jnp.exp(a[:, None] - b[None, :]), axis=1)


def _big_args() -> tuple:
    rng = np.random.default_rng(1)
    return (rng.standard_normal((8, 8)).astype(np.float32) * .3, np.zeros(8, np.float32),
            rng.standard_normal((20, 8)).astype(np.float32),
            rng.standard_normal(1024).astype(np.float32),
            rng.standard_normal(1024).astype(np.float32))


def test_memory_limit_splits_around_a_scan() -> None:
    args = _big_args()
    limit = 1 << 20  # the outer difference is 4 MiB; the scan needs a few hundred bytes
    trace = gx.explore(big_rnn, *args, memory_limit=limit)
    assert "loop" in trace.final.graph.ops() and "scan" in trace.final.graph.ops()
    assert trace.final.cost.peak_bytes <= limit
    want = _leaves(big_rnn(*args))
    for backend in BACKENDS:
        run = trace.run(*args, backend=backend)
        assert_outputs_close(want, _leaves(run.value), backend, min_tolerance=1e-5)
        if backend == "reference":
            assert run.peak_bytes <= limit


@pytest.mark.parametrize("name", ["rnn_grad", "newton_dynamic", "switch"])
def test_small_programs_under_a_memory_limit(name: str) -> None:
    trace = explored(name, 1 << 16)
    assert trace.final.cost.peak_bytes <= 1 << 16
    _assert_matches_jax(name, trace, "cpu")


def outer_in_scan(xs):
    """Each iteration makes an n x n temporary and reduces it: the body's peak is the scan's."""
    return lax.scan(lambda c, x: (c + jnp.sum(jnp.exp(x[:, None] * x[None, :])), c), 0.0, xs)


def test_planner_counts_a_scan_body_and_split_treats_it_as_a_barrier() -> None:
    xs = np.random.default_rng(2).standard_normal((4, 256)).astype(np.float32)
    trace = gx.explore(outer_in_scan, xs, pipeline=[])
    g = trace.final.graph
    inner = 256 * 256 * 4
    assert plan(g).peak_bytes >= inner
    run = trace.run(xs, backend="reference")
    assert inner <= run.peak_bytes <= plan(g).peak_bytes + 4096
    with pytest.raises(InfeasibleMemoryLimit, match="scan"):
        gx.explore(outer_in_scan, xs, memory_limit=inner // 2)


# ---------------------------------------------------------------- cost


def test_scan_cost_is_length_times_body() -> None:
    g = explored("newton").stages[0].graph
    (s,) = [n for n in g.nodes if n.op == "scan"]
    body = s.attrs["body"]
    per_trip = sum(node_flops(body, n) for n in body.nodes)
    assert per_trip > 0 and node_flops(g, s) == 8 * per_trip
    assert graph_cost(g).bytes >= 8 * graph_cost(body).bytes


# ---------------------------------------------------------------- every pass, inside bodies


@pytest.mark.parametrize("pass_name", gx.passes.names())
@pytest.mark.parametrize("name", ["rnn_grad", "newton_dynamic", "doubling", "switch"])
def test_pass_keeps_meaning_inside_bodies(pass_name: str, name: str) -> None:
    g = explored(name).stages[0].graph
    check_semantics(gx.passes.get(pass_name), g, trials=2)


def messy(W, xs):
    def step(h, x):
        dead = jnp.exp(x)  # noqa: F841  (dead code inside the body)
        y = jnp.sum(W * x[None, :], axis=1)  # a matrix-vector product, written out
        return h * 1.0 + jnp.sum(y) + jnp.sum(y), h

    return lax.scan(step, jnp.float32(0), xs)


def test_default_pipeline_rewrites_inside_a_scan_body() -> None:
    args = (np.ones((3, 3), np.float32), np.arange(12, dtype=np.float32).reshape(4, 3))
    trace = gx.explore(messy, *args)
    regions = [(s.name, r.region) for s in trace.stages for r in s.report.rewrites]
    for p in ("simplify", "cse", "recognize-dot", "dce", "fuse"):
        assert (p, "%3.body") in regions, (p, regions)
    (s,) = [n for n in trace.final.graph.nodes if n.op == "scan"]
    assert "dot_general" in s.attrs["body"].ops()
    assert "exp" not in s.attrs["body"].ops()
    assert_outputs_close(_leaves(messy(*args)), _leaves(trace.run(*args).value), "messy")


# ---------------------------------------------------------------- the verifier


def test_verifier_names_a_bad_body() -> None:
    g = explored("reverse_cumsum").stages[0].graph
    (s,) = [n for n in g.nodes if n.op == "scan"]
    text = str(g).replace("num_carry=1", "num_carry=0", 1)
    with pytest.raises(VerifyError, match="scan"):
        verify(parse(text))
    body = s.attrs["body"]
    broken = Graph(body.nodes, body.params, body.outputs[:1], body.name)
    bad = Graph([n if n.id != s.id else type(n)(n.id, n.op, n.inputs,
                                                n.attrs.replace(body=broken), n.type, n.source)
                 for n in g.nodes], g.params, g.outputs, g.name)
    with pytest.raises(VerifyError, match="scan"):
        verify(bad)


def test_reference_runs_reverse_scan_like_jax() -> None:
    xs = _args("reverse_cumsum")[0]
    g = explored("reverse_cumsum").stages[0].graph
    assert_outputs_close(_leaves(reverse_cumsum(xs)), evaluate(g, [xs]), "reverse")


def test_scan_counts_from_either_jax_form() -> None:
    """JAX up to 0.10 states a scan's constant and carry counts; 0.11 gives the operands'
    structure (`ft_in`, groups: constants, carries, scanned inputs) instead. Both read alike
    (with 0.11 the rnn programs failed to trace: KeyError 'num_consts')."""
    from explorer.frontend.jax_control import _scan_counts

    class Groups:  # JAX 0.11's FlatTree, as far as the converter reads it
        def unpack(self):  # noqa: ANN202
            return (["W", "b"], ["h"], ["xs", "ys", "zs"])

    assert _scan_counts({"num_consts": 2, "num_carry": 1}) == (2, 1)
    assert _scan_counts({"ft_in": Groups()}) == (2, 1)
    eqn = jax.make_jaxpr(lambda w, h, xs: lax.scan(lambda c, x: (c @ w + x, c.sum()), h, xs))(
        np.eye(3, dtype=np.float32), np.zeros(3, np.float32), np.ones((5, 3), np.float32)).eqns[-1]
    assert _scan_counts(eqn.params) == (1, 1)


def test_gpu_backend_imports_and_skips_cleanly() -> None:
    from explorer.backends import gpu  # noqa: F401  (imports without CuPy)

    trace = explored("rnn")
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(Exception, match="(?i)cupy|gpu|unavailable"):
            trace.run(*_args("rnn"), backend="gpu")
        return
    _assert_matches_jax("rnn", trace, "gpu")
