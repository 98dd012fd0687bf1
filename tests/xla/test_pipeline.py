"""gx.xla_pipeline (explorer/xla/pipeline.py): XLA's passes on the seed examples as stages,
from per-compilation dumps."""

from __future__ import annotations

import os
import re
from functools import cache

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.xla.pipeline import XlaCompilation, compile_with_dumps, trace_of
from tests.corpora.graphs import SEEDS
from tests.frontend.hlo.helpers import all_nodes, check_imported, leaves_close, opaque_opcodes

# (A@B)@v, the naive Euclidean distance, reduce_sum(x+y*z), mean(x**2*3+y), gemm2.
EXAMPLES = ["matrix_chain", "euclidean_naive", "sum_xyz", "mean_square", "gemm2"]


@cache
def compilation(name: str) -> XlaCompilation:
    fn, args = SEEDS[name]
    return compile_with_dumps(fn, *args)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_dump_file_parses(name: str) -> None:
    dumps = compilation(name).dumps
    assert dumps[0].pass_name == "before-optimizations"
    # (the last dump is named for the platform the compilation ran on, as JAX names it)
    assert dumps[-1].pass_name == f"{jax.devices('cpu')[0].platform}-after-optimizations"
    assert len(dumps) > 10  # XLA dumps at every pipeline's start, and after every change
    for d in dumps:
        check_imported(gx.from_hlo(d.text))


@pytest.mark.parametrize("name", EXAMPLES)
def test_stages_follow_xla(name: str) -> None:
    comp = compilation(name)
    trace = trace_of(comp, SEEDS[name][1])
    names = [s.name for s in trace.stages]
    assert names[0] == "traced" and names[-1] == "after-optimizations"
    assert len(set(names)) == len(names) and len(names) >= 3
    files = [d.file for d in comp.dumps]
    order = []
    for s in trace.stages:
        check_imported(s.graph)
        (file,) = [n[len("file: "):] for n in s.report.notes if n.startswith("file: ")]
        order.append(files.index(file))
    assert order == sorted(order)  # XLA's order
    for s in trace.stages[1:-1]:
        assert re.fullmatch(r"[a-z0-9\-]+\.[a-z0-9\-]+(#\d+)?", s.name), s.name
        assert s.report.changed
        pipeline, xla_pass = s.name.split("#")[0].split(".")
        note = s.report.notes[0]
        kebab_note = note.lower().replace("_", "-")
        assert xla_pass in kebab_note and pipeline in kebab_note


@pytest.mark.parametrize("name", EXAMPLES)
def test_stages_compute_the_function(name: str) -> None:
    fn, args = SEEDS[name]
    trace = gx.xla_pipeline(fn, *args)
    want = jax.tree_util.tree_leaves(fn(*args))
    for k, s in enumerate(trace.stages):
        if opaque_opcodes(s.graph):
            assert k > 0, "the module before optimisation maps fully"
            continue
        got = jax.tree_util.tree_leaves(trace.run(stage=k).value)
        leaves_close([np.asarray(g) for g in got], want, 1e-4)


def test_fusions_are_kernels_and_ids_are_stable() -> None:
    fn, args = SEEDS["mean_square"]
    trace = gx.xla_pipeline(fn, *args)
    assert "kernel" not in trace.stages[0].graph.ops()
    # the stage after XLA's fusion pass, by the pass's name (its pipeline's name is XLA's)
    (fusion,) = [s for s in trace.stages if s.name.split("#")[0].endswith(".fusion")]
    (kernel,) = [n for n in fusion.graph.nodes if n.op == "kernel"]
    assert kernel.attrs["kind"] == "kLoop"
    assert {"mul", "add", "reduce_sum"} <= set(kernel.attrs["body"].ops())
    params = [tuple(s.graph.params) for s in trace.stages]
    assert len(set(params)) == 1  # an instruction keeps its id from stage to stage


def test_seed_002_xla_still_does_not_find_the_matmul() -> None:
    """gemm2 (broadcast, multiply, reduce) stays a fused loop: no dot in XLA's final module."""
    fn, args = SEEDS["gemm2"]
    final = gx.xla_pipeline(fn, *args).final.graph
    ops = {n.op for n in all_nodes(final)}
    assert "kernel" in ops and "reduce_sum" in ops and "dot_general" not in ops


def test_no_process_wide_flags() -> None:
    before = os.environ.get("XLA_FLAGS")
    fn, args = SEEDS["sum_xyz"]
    gx.xla_pipeline(fn, *args)
    assert os.environ.get("XLA_FLAGS") == before


def test_unknown_backend() -> None:
    fn, args = SEEDS["sum_xyz"]
    with pytest.raises(ValueError, match="no 'nope' device"):
        gx.xla_pipeline(fn, *args, backend="nope")


@pytest.mark.gpu
def test_gpu_pipeline() -> None:
    try:
        jax.devices("gpu")
    except RuntimeError:
        pytest.skip("no GPU")
    fn, args = SEEDS["mean_square"]
    trace = gx.xla_pipeline(fn, *args, backend="gpu")
    # the stages are named after XLA's own dumps, which differ between JAX versions and
    # devices (JAX 0.11.2 on an H100 has no "after-optimizations"): read, not assumed
    assert trace.stages[0].name == "traced" and len(trace.stages) > 1
    assert trace.final is trace.stages[-1] and trace.final.name != "traced"
    assert any(n.op == "kernel" for n in trace.final.graph.nodes)
    for s in trace.stages:
        check_imported(s.graph)
