"""Every program of the wide zoo (tests/corpora/wide.py, issue 42) at its small size explores
through every pass, verifies and round-trips at every stage, and its final stage matches
jax.jit on the reference, cpu and jax backends (tests/backends/gpu/test_program.py runs the
same programs as one GPU program on the host)."""

from __future__ import annotations

from functools import cache
from typing import Any

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.ir import verify
from tests.corpora.graphs import assert_tree_close
from tests.corpora.wide import PROGRAMS, wide

NAMES = sorted(PROGRAMS)
BACKENDS = ("reference", "cpu", "jax")


@cache
def _program(name: str) -> tuple[Any, tuple[Any, ...]]:
    return PROGRAMS[name]("small")


@cache
def _explored(name: str) -> Any:
    fn, args = _program(name)
    return gx.explore(fn, *args)


@cache
def _expected(name: str) -> Any:
    fn, args = _program(name)
    return jax.tree_util.tree_map(np.asarray, jax.jit(fn)(*args))


def test_the_set_holds_every_architecture_of_the_issue() -> None:
    assert len(wide("small")) == len(PROGRAMS)
    for word in ("vit", "llama", "lstm", "gnn", "moe", "dp-sgd", "ssm", "unet", "resnet"):
        assert any(word in name and "grad" in name for name in NAMES), word
    assert {"vit logits", "llama scan logits"} <= set(NAMES)  # inference too


@pytest.mark.parametrize("name", NAMES)
def test_explores_verifies_and_round_trips(name: str) -> None:
    t = _explored(name)
    assert t.stages[0].name == "traced" and len(t.stages) > 5
    for s in t.stages:
        verify(s.graph)
        assert gx.parse(str(s.graph)) == s.graph, s.name


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", NAMES)
def test_final_stage_matches_jax_jit(name: str, backend: str) -> None:
    tol = 2e-4 if backend != "jax" else 1e-4
    assert_tree_close(_explored(name).run(backend=backend).value, _expected(name),
                      rtol=tol, atol=tol)


@pytest.mark.parametrize("name", NAMES)
def test_traced_stage_matches_too(name: str) -> None:
    """Before any pass, on the oracle: what the passes start from is already right."""
    assert_tree_close(_explored(name).run(stage=0).value, _expected(name), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("name", NAMES)
def test_final_stage_reads_every_node(name: str) -> None:
    g = _explored(name).final.graph
    read = {i for n in g.nodes for i in n.inputs} | set(g.outputs)
    assert [n.id for n in g.nodes if n.op != "parameter" and n.id not in read] == []
