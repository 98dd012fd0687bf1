"""Every zoo program (tests/corpora/zoo.py) explores through every pass, verifies and round-trips at
every stage, and its final stage matches JAX on the reference, cpu and jax backends."""

from __future__ import annotations

from functools import cache
from typing import Any

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.ir import verify
from tests.corpora.graphs import assert_tree_close
from tests.corpora.zoo import zoo

NAMES = sorted(zoo())
BACKENDS = ("reference", "cpu", "jax")


@cache
def _explored(name: str) -> tuple[Any, Any, Any]:
    fn, args = zoo()[name]
    return gx.explore(fn, *args), fn, args


def _expected(fn: Any, args: tuple[Any, ...]) -> Any:
    return jax.tree_util.tree_map(np.asarray, fn(*args))


@pytest.mark.parametrize("name", NAMES)
def test_explores_verifies_and_round_trips(name: str) -> None:
    t, _, _ = _explored(name)
    assert [s.name for s in t.stages][0] == "traced" and len(t.stages) > 5
    for s in t.stages:
        verify(s.graph)
        assert gx.parse(str(s.graph)) == s.graph, s.name


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", NAMES)
def test_matches_jax(name: str, backend: str) -> None:
    t, fn, args = _explored(name)
    tol = 2e-4 if backend != "jax" else 1e-4
    assert_tree_close(t.run(backend=backend).value, _expected(fn, args), rtol=tol, atol=tol)


def test_traced_stage_matches_too() -> None:
    """Before any pass, on the oracle: what the passes start from is already right."""
    for name in ("gpt_grad", "cnn_grad", "rnn_grad", "optax_adam"):
        t, fn, args = _explored(name)
        assert_tree_close(t.run(stage=0).value, _expected(fn, args), rtol=2e-4, atol=2e-4)


def test_modules_show_as_named_scopes() -> None:
    scopes = {n.source.scope for n in _explored("equinox_mlp_grad")[0].stages[0].graph.nodes
              if n.source is not None}
    assert any(s.startswith("eqx.nn.MLP") for s in scopes)
    scopes = {n.source.scope for n in _explored("gpt_block")[0].stages[0].graph.nodes
              if n.source is not None}
    assert {"attention", "mlp"} <= scopes
