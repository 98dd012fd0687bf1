"""The `loop` op and the split pass: loops evaluate like their unsplit programs, every region
the pass can build computes the same values, random programs under limits from 64 KiB keep
their results with planned and measured peaks under the limit, and infeasible limits fail
with the smallest limit that works."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import explorer as gx
from explorer.analysis.memory import plan
from explorer.analysis.split_plan import grow
from explorer.backends.reference import evaluate, run
from explorer.frontend.jaxpr import trace
from explorer.ir import Graph, GraphBuilder, OpError, TensorType, parse, verify
from explorer.ir.ops import infer_type
from explorer.passes.split import InfeasibleMemoryLimit, Split, budget_of, split_for_limit
from explorer.passes.split_rewrite import build_loop
from tests.passes.semantic import assert_outputs_close, random_args


@pytest.fixture(autouse=True)
def _float64() -> Iterator[None]:
    """These programs are float64 (as seed 000's are); other tests' tracing stays as it was."""
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


# ---------------------------------------------------------------- the loop op


def _pairs(rows: int, m: int, k: int) -> Graph:
    """One chunk: d = x @ y.T, and its top_k rows, column sums, maxima and argmaxima."""
    b = GraphBuilder("body")
    x = b.param(TensorType((rows, 3), "f64"), "x")
    y = b.param(TensorType((m, 3), "f64"), "y")
    d = b.add("dot_general", [x, y], {"dimension_numbers": (((1,), (1,)), ((), ()))})
    top = b.add("top_k", [d], {"k": k, "axis": 1})
    outs = [b.add("get_tuple_element", [top], {"index": i}) for i in (0, 1)]
    outs += [b.add("reduce_sum", [d], {"axes": (0,)}), b.add("reduce_max", [d], {"axes": (0,)}),
             b.add("argmax", [d], {"axes": (0,), "index_dtype": "i32"})]
    return b.build(outs)


def _loop_program(n: int, m: int, chunk: int) -> Graph:
    b = GraphBuilder("main")
    x, y = b.param(TensorType((n, 3), "f64"), "x"), b.param(TensorType((m, 3), "f64"), "y")
    attrs = {"size": n, "chunk": chunk, "split_inputs": ((0, 0),),
             "combine": (("concat", 0), ("concat", 0), ("add",), ("max",), ("index", 3)),
             "body": _pairs(chunk, m, 2)}
    if n % chunk:
        attrs["tail"] = _pairs(n % chunk, m, 2)
    loop = b.add("loop", [x, y], attrs)
    return b.build([b.add("get_tuple_element", [loop], {"index": k}) for k in range(5)])


@pytest.mark.parametrize("chunk", [2, 3, 4, 10])
def test_loop_combines_chunks_like_numpy(chunk: int) -> None:
    g = verify(_loop_program(10, 7, chunk))
    assert parse(str(g)) == g
    rng = np.random.default_rng(chunk)
    x, y = rng.standard_normal((10, 3)), rng.standard_normal((7, 3))
    x[3] = x[8]  # ties across chunks: argmax keeps the first
    vals, idx, total, most, arg = evaluate(g, [x, y])
    d = x @ y.T
    order = np.argsort(-d, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(idx, order)
    np.testing.assert_allclose(vals, np.take_along_axis(d, order, 1))
    np.testing.assert_allclose(total, d.sum(0))
    np.testing.assert_array_equal(most, d.max(0))
    np.testing.assert_array_equal(arg, d.argmax(0))


def test_top_k_merges_across_chunks() -> None:
    """top_k along the split dimension: partial top k per chunk, merged with offsets."""
    def body(rows: int) -> Graph:
        b = GraphBuilder("body")
        x = b.param(TensorType((5, rows), "f32"), "x")
        top = b.add("top_k", [x], {"k": min(3, rows), "axis": 1})
        return b.build([b.add("get_tuple_element", [top], {"index": i}) for i in (0, 1)])

    b = GraphBuilder("main")
    x = b.param(TensorType((5, 11), "f32"), "x")
    loop = b.add("loop", [x], {"size": 11, "chunk": 4, "split_inputs": ((0, 1),),
                               "combine": (("top_k", 1), ("index", 0)), "body": body(4),
                               "tail": body(3)})
    g = verify(b.build([b.add("get_tuple_element", [loop], {"index": k}) for k in (0, 1)]))
    x = np.random.default_rng(1).integers(0, 4, (5, 11)).astype(np.float32)  # many ties
    vals, idx = evaluate(g, [x])
    want_v, want_i = gx.ir.OPS["top_k"].ref(x, k=3, axis=1)
    np.testing.assert_array_equal(vals, want_v)
    np.testing.assert_array_equal(idx, want_i)


@pytest.mark.parametrize("change,message", [
    ({"chunk": 0}, "chunk <= size"),
    ({"chunk": 4}, "tail body is needed"),
    ({"combine": (("concat", 1),) * 5}, "chunk-sized axis"),
    ({"combine": (("concat", 0), ("concat", 0), ("add",), ("add",), ("index", 3))}, "index"),
    ({"split_inputs": ((1, 0),)}, "no dimension of size"),
])
def test_loop_type_rule_rejects(change: dict, message: str) -> None:
    g = _loop_program(10, 7, 5)
    loop = next(n for n in g.nodes if n.op == "loop")
    with pytest.raises(OpError, match=message):
        infer_type("loop", [g[i].type for i in loop.inputs], loop.attrs.replace(**change))


# ---------------------------------------------------------------- the split pass on seed 000


def kernel_vector(x: jax.Array, y: jax.Array, v: jax.Array) -> jax.Array:
    return jnp.exp(-0.5 * jnp.sum((x[:, None] - y[None]) ** 2, -1)) @ v


def knn(q: jax.Array, p: jax.Array) -> jax.Array:
    return jax.lax.top_k(-jnp.sum((q[:, None] - p[None]) ** 2, -1), 10)[1]


RNG = np.random.default_rng(0)
KVP_ARGS = (RNG.standard_normal((700, 3)), RNG.standard_normal((600, 3)), RNG.standard_normal(600))
KNN_ARGS = (RNG.standard_normal((300, 3)), RNG.standard_normal((900, 3)))


@pytest.mark.parametrize("fn,args", [(kernel_vector, KVP_ARGS), (knn, KNN_ARGS)])
@pytest.mark.parametrize("pipeline", [None, "simplify,dce"])
@pytest.mark.parametrize("limit", ["256KiB", "1MiB"])
def test_seed_programs_become_one_loop(fn: Callable, args: tuple, pipeline: str | None,
                                       limit: str) -> None:
    tr = gx.explore(fn, *args, memory_limit=limit, pipeline=pipeline)
    g = tr.final.graph
    loops = [n for n in g.nodes if n.op == "loop"]
    assert len(loops) == 1, g
    limit_b = gx.parse_bytes(limit)
    assert tr.final.cost.peak_bytes <= budget_of(limit_b)
    split = tr.stage("split")
    assert [r.rule for r in split.report.rewrites if r.rule != "dead-node"] == ["split-into-loop"]
    assert all(r.source and r.source.endswith(str(fn.__code__.co_firstlineno + 1))
               for r in split.report.rewrites)
    result, unsplit = tr.run(), tr.run(stage=0)
    assert result.peak_bytes <= limit_b < unsplit.peak_bytes
    np.testing.assert_allclose(np.asarray(result.value), np.asarray(unsplit.value), rtol=1e-9)


def test_split_slots_after_dot_order_or_at_the_end() -> None:
    tr = gx.explore(kernel_vector, *KVP_ARGS, memory_limit="1MiB")
    names = [s.name for s in tr.stages]
    assert names[names.index("dot-order") + 1] == "split"
    tr = gx.explore(kernel_vector, *KVP_ARGS, memory_limit=2**20, pipeline="simplify,cse")
    assert [s.name for s in tr.stages] == ["traced", "simplify", "cse", "split"]
    assert tr.memory_limit == 2**20


def test_no_limit_no_split_and_a_fitting_program_is_left_alone() -> None:
    g = trace(kernel_vector, *KVP_ARGS).graph
    assert Split()(g) == (g, Split()(g)[1]) and not Split()(g)[1].changed
    after, report = Split(memory_limit=2**30)(g)
    assert after is g and not report.changed


def test_infeasible_limit_names_the_smallest_limit_and_the_line() -> None:
    with pytest.raises(InfeasibleMemoryLimit) as e:
        gx.explore(kernel_vector, *KVP_ARGS, memory_limit="20KiB", pipeline="simplify")
    err = e.value
    assert isinstance(err, ValueError) and err.limit == 20 * 1024 < err.needed
    assert "smallest feasible limit" in str(err) and "test_split.py" in str(err)
    assert "jnp.exp(-0.5 * jnp.sum((x[:, None] - y[None]) ** 2, -1)) @ v" in str(err)
    tr = gx.explore(kernel_vector, *KVP_ARGS, memory_limit=err.needed, pipeline="simplify")
    assert tr.run().peak_bytes <= err.needed


# ---------------------------------------------------------------- every region the pass may build


def _every_region(g: Graph) -> list[tuple[int, object]]:
    out = []
    for n in g.nodes:
        if isinstance(n.type, TensorType) and n.op not in ("parameter", "constant"):
            for axis in range(n.type.rank):
                for pull in (True, False):
                    r = grow(g, n.id, axis, pull)
                    if r is not None:
                        out.append((n.id, r))
    return out


THROUGH = {  # name -> (fn, shapes): ops the split dimension passes through or reduces
    "argmax-both-axes": (lambda x, y: (jnp.argmax(x @ y.T, 0), jnp.argmin(x @ y.T, 1)),
                         [(9, 3), (7, 3)]),
    "top-k-rows-and-cols": (lambda x, y: (jax.lax.top_k(x @ y.T, 2)[1],
                                          jax.lax.top_k((x @ y.T).T, 3)[0]), [(9, 3), (7, 3)]),
    "contracting": (lambda a, b: jnp.tanh(a) @ b, [(6, 10), (10, 5)]),
    "reductions": (lambda x: (jnp.max(jnp.exp(x), 0), jnp.prod(x, 1), jnp.min(x.T, 1)),
                   [(8, 6)]),
    "transpose-reshape": (lambda x, y: jnp.sum(jnp.reshape((x[:, None] * y[None]).transpose(
        1, 0, 2), (7, 9 * 3)) ** 2, 1), [(9, 3), (7, 3)]),
    "batched-dot": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b).sum(2), [(4, 5, 6), (4, 6, 3)]),
}


@pytest.mark.parametrize("name", THROUGH)
@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_every_region_and_chunk_keeps_the_values(name: str, chunk: int) -> None:
    fn, shapes = THROUGH[name]
    rng = np.random.default_rng(3)
    g = trace(fn, *(rng.standard_normal(s) for s in shapes)).graph
    regions = _every_region(g)
    assert regions, f"{name}: no region to split"
    args = random_args(g, rng)
    want = evaluate(g, args)
    for seed, r in regions:
        top_k = max([g[i].attrs["k"] for i in r.steps if g[i].op == "top_k"], default=1)
        c = max(chunk, top_k) if r.size > top_k else None
        if c is None or c > r.size:
            continue
        found = build_loop(g, r, c, seed)
        verify(found.graph)
        assert parse(str(found.graph)) == found.graph
        assert_outputs_close(want, evaluate(found.graph, args), f"{name} %{seed} chunk {c}")


# ---------------------------------------------------------------- random programs x limits


@st.composite
def pairwise_programs(draw: st.DrawFn) -> Graph:
    """Programs with an [N, M] (or [N, M, D]) intermediate and a small result: the shapes of
    kernel sums, nearest neighbours and attention-like reductions."""
    n, m = draw(st.sampled_from([40, 48, 61])), draw(st.sampled_from([33, 64, 90]))
    d, dt = draw(st.sampled_from([1, 3, 4])), draw(st.sampled_from(["f32", "f64"]))
    b = GraphBuilder("prog")
    x, y = b.param(TensorType((n, d), dt), "x"), b.param(TensorType((m, d), dt), "y")
    if draw(st.booleans()):  # naive squared distance through an [N, M, D] difference
        xb = b.add("broadcast_in_dim", [x], {"shape": (n, m, d), "broadcast_dimensions": (0, 2)})
        yb = b.add("broadcast_in_dim", [y], {"shape": (n, m, d), "broadcast_dimensions": (1, 2)})
        diff = b.add("sub", [xb, yb])
        z = b.add("reduce_sum", [b.add("mul", [diff, diff])], {"axes": (2,)})
    else:
        z = b.add("dot_general", [x, y], {"dimension_numbers": (((1,), (1,)), ((), ()))})
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["exp", "tanh", "neg", "square", "scale", "row", "transpose"]))
        shape = b.type_of(z).shape  # type: ignore[union-attr]
        if op == "scale":
            z = b.add("mul", [b.constant(-0.5, dt), z])
        elif op == "row":  # add a vector broadcast along one axis
            axis = draw(st.integers(0, 1))
            v = b.param(TensorType((shape[axis],), dt), f"r{len(b.params)}")
            vb = b.add("broadcast_in_dim", [v], {"shape": shape, "broadcast_dimensions": (axis,)})
            z = b.add("add", [z, vb])
        elif op == "transpose":
            z = b.add("transpose", [z], {"permutation": (1, 0)})
        else:
            z = b.add(op, [z])
    shape = b.type_of(z).shape  # type: ignore[union-attr]
    end = draw(st.sampled_from(["matvec", "sum", "max", "argmax", "argmin", "top_k"]))
    axis = draw(st.integers(0, 1))
    if end == "matvec":
        v = b.param(TensorType((shape[1],), dt), "v")
        out = [b.add("dot_general", [z, v], {"dimension_numbers": (((1,), (0,)), ((), ()))})]
    elif end in ("sum", "max"):
        out = [b.add(f"reduce_{end}", [z], {"axes": (axis,)})]
    elif end in ("argmax", "argmin"):
        out = [b.add(end, [z], {"axes": (axis,), "index_dtype": "i32"})]
    else:
        top = b.add("top_k", [z], {"k": 3, "axis": 1})
        out = [b.add("get_tuple_element", [top], {"index": i}) for i in (0, 1)]
    return b.build(out)


# No "explain" phase: its line tracer allocates, and tracemalloc would count that as ours.
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink))
@given(g=pairwise_programs(), limit=st.sampled_from([64 * 1024, 96 * 1024, 256 * 1024]))
def test_random_programs_under_limits(g: Graph, limit: int) -> None:
    args = random_args(g, np.random.default_rng(0))
    want = evaluate(g, args)
    try:
        after, _ = split_for_limit(g, limit)
    except InfeasibleMemoryLimit as e:
        assert e.needed > limit
        after, _ = split_for_limit(g, e.needed)  # the limit it names does work
        limit = e.needed
    verify(after)
    assert plan(after).peak_bytes <= budget_of(limit)
    outs, _, measured = run(after, args)
    assert measured <= limit, f"measured {measured} > limit {limit}\n{after}"
    assert_outputs_close(want, outs, f"limit {limit}")


def test_pipeline_spec_carries_the_split_options() -> None:
    """`split{memory-limit=1MiB}` in a spec is what `memory_limit=` is sugar for."""
    spec = gx.explore(kernel_vector, *KVP_ARGS, pipeline="simplify,split{memory-limit=1MiB}")
    sugar = gx.explore(kernel_vector, *KVP_ARGS, pipeline="simplify", memory_limit="1MiB")
    assert [s.name for s in spec.stages] == [s.name for s in sugar.stages]
    assert str(spec.final.graph) == str(sugar.final.graph)
    assert any(n.op == "loop" for n in spec.final.graph.nodes)
    both = gx.explore(kernel_vector, *KVP_ARGS, pipeline="split{memory-limit=1MiB, backend=cpu}")
    (loop,) = [n for n in both.final.graph.nodes if n.op == "loop"]
    assert both.stage("split").report.changed and loop.attrs["chunk"] < loop.attrs["size"]


@pytest.mark.parametrize("spec,message", [
    ("split{memory-limt=1MiB}", "pass 'split' has no option 'memory-limt'"),
    ("split{memory-limit=lots}", "not a byte size"),
    ("split{memory-limit=1MiB", "cannot read pipeline"),
    ("simplify{fold-limit=4}x", "cannot read pipeline"),
])
def test_bad_pass_options_name_the_cause(spec: str, message: str) -> None:
    from explorer.passes.pipeline import PipelineError

    with pytest.raises((PipelineError, ValueError), match=message):
        gx.explore(kernel_vector, *KVP_ARGS, pipeline=spec)


@pytest.mark.parametrize("centre", [False, True])
def test_a_self_distance_splits_under_a_limit(centre: bool) -> None:
    """Found by the differential fuzz (seeds 1563, 1658): in |a_i|^2 + |a_j|^2 - 2 a.a the
    norms of `a` feed one broadcast chunked and another whole; the region used to take them
    chunked for both (a broadcast of f32[9] to (32, 9) via (0,)) and explore() crashed."""
    import jax.numpy as jnp

    x = np.random.default_rng(7).standard_normal((32, 3)).astype(np.float32)

    def f(a):
        if centre:
            a = a - jnp.max(a, axis=1, keepdims=True)
        return jnp.sum((a[:, None, :] - a[None, :, :]) ** 2, -1)

    tr = gx.explore(f, x, memory_limit=24576)
    want = np.asarray(f(jnp.asarray(x)))
    for backend in ("reference", "cpu", "jax"):
        r = tr.run(backend=backend)
        np.testing.assert_allclose(np.asarray(r.value), want, rtol=1e-4, atol=1e-4)
        assert r.peak_bytes <= 24576 or backend == "jax", (backend, r.peak_bytes)


def test_the_reserve_for_the_interpreters_objects() -> None:
    """The split budget keeps back a quarter of a small limit, up to a third to keep 8 KiB (a
    16-chunk loop on the reference interpreter measured 7 KiB of Python objects at once), at
    most 32 KiB."""
    assert budget_of(24 * 1024) == 16 * 1024
    assert budget_of(9000) == 6000
    assert budget_of(64 * 1024) == 48 * 1024
    assert budget_of(1 << 30) == (1 << 30) - 32 * 1024


def test_smallest_limit_is_feasible_and_what_an_infeasible_limit_names() -> None:
    from explorer.examples import mlp_attention_grad
    from explorer.passes.split import smallest_limit

    fn, args = mlp_attention_grad(1)
    traced = gx.explore(fn, *args)
    g = traced.stage("dot-order").graph
    limits = smallest_limit(g)
    assert limits.smallest < limits.unsplit and limits.node.source is not None
    at = gx.explore(fn, *args, memory_limit=limits.smallest)
    assert at.final.cost.peak_bytes <= limits.smallest
    # from the unsplit limit on, nothing is split: neither the program nor its fused form
    top = gx.explore(fn, *args, memory_limit=limits.unsplit)
    assert not top.stage("split").report.changed
    below = limits.smallest * 31 // 32
    with pytest.raises(InfeasibleMemoryLimit) as e:
        gx.explore(fn, *args, memory_limit=below)
    assert (e.value.limit, e.value.needed, e.value.node) == (below, limits.smallest, limits.node)


# ---------------------------------------------------------------- remarks


def _rows_and_a_cumsum(x, y):  # type: ignore[no-untyped-def]
    c = jnp.cumsum(y * 3.0, axis=0)  # along its only axis: no chunk of it stands alone
    return jnp.sum(jnp.exp(x) * 2.0, axis=1) * jnp.max(c)


_RC_ARGS = (np.ones((2048, 256), np.float32), np.ones((262144,), np.float32))


def test_a_seed_left_whole_says_why_and_what_it_keeps_live() -> None:
    tr = gx.explore(_rows_and_a_cumsum, *_RC_ARGS, memory_limit="3MiB", pipeline="split")
    stage = tr.stage("split")
    assert [r.rule for r in stage.report.rewrites] == ["split-into-loop"]
    (r,) = stage.report.remarks
    assert (r.pass_, r.kind, r.rule) == ("split", "missed", "no-splittable-axis")
    assert tr.stages[0].graph[r.nodes[0]].op == "cumsum"
    assert "keeping 1.0 MiB live" in r.reason
    assert "axis 0: cumsum does not compute its result in chunks along this axis" in r.reason
    line = _rows_and_a_cumsum.__code__.co_firstlineno + 1
    assert r.source is not None and r.source.endswith(f":{line}")


def test_no_remark_when_everything_splits_or_fits() -> None:
    def rows(x):  # type: ignore[no-untyped-def]
        return jnp.sum(jnp.exp(x) * 2.0, axis=1)

    tr = gx.explore(rows, _RC_ARGS[0], memory_limit="1MiB", pipeline="split")
    assert tr.stage("split").report.rewrites and tr.stage("split").report.remarks == ()
    roomy = gx.explore(_rows_and_a_cumsum, *_RC_ARGS, memory_limit="64MiB", pipeline="split")
    assert roomy.stage("split").report.remarks == ()


def test_the_pass_called_by_hand_reports_its_remarks() -> None:
    g = trace(_rows_and_a_cumsum, *_RC_ARGS).graph
    _, report = Split(memory_limit=3 * 2**20)(g)
    assert [r.rule for r in report.remarks] == ["no-splittable-axis"]
    assert report.remarks[0].pass_ == "split"


def test_a_slice_shorter_than_its_input_is_no_chunk_of_it() -> None:
    """`c[:256]` of a 65,536-long `c`, read along a split axis of extent 256: the slice's
    output chunks are not its input's chunks at the same offsets (the plan once took them to
    be, and building the loop failed on the 65,536 axis)."""
    def f(x, y):  # type: ignore[no-untyped-def]
        c = jnp.cumsum(y * 3.0)
        return jnp.sum(jnp.exp(x) * 2.0 * c[:256][None, :], axis=1)

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2048, 256)).astype(np.float32) * 0.1
    y = rng.standard_normal(65536).astype(np.float32) * 1e-3
    tr = gx.explore(f, x, y, memory_limit="2MiB")
    assert tr.stage("split").report.rewrites and tr.final.cost.peak_bytes <= 2 * 2**20
    want = np.asarray(jax.jit(f)(x, y))
    for backend in ("reference", "cpu"):
        assert_outputs_close([np.asarray(tr.run(backend=backend).value)], [want])
