"""Property tests: random programs through every registered pass and the default pipeline.

For each program: the outputs before and after agree on random inputs (reference
interpreter, tolerance by element type), the verifier passes, and the result prints and
parses back to an equal graph. About 2,000 examples in all in a normal run; GAMBIT_FUZZ=full
(`make fuzz`) runs 10,000 or more.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import explorer as gx
from explorer.backends.reference import evaluate
from explorer.ir import Graph, parse, verify
from explorer.passes.base import PassReport
from explorer.passes.pipeline import resolve, run_pipeline
from tests.corpora.ir_programs import programs
from tests.passes.semantic import assert_outputs_close, computed_tolerance, random_args

TOTAL = 10_000 if os.environ.get("GAMBIT_FUZZ") == "full" else 2_000
TARGETS = [*gx.passes.names(), "default-pipeline"]
PER_TARGET = math.ceil(TOTAL / len(TARGETS))

pytestmark = pytest.mark.fuzz


class _Pipeline:
    """The default pipeline as one callable, verifying after every pass."""

    name = "default-pipeline"

    def __call__(self, graph: Graph) -> tuple[Graph, PassReport]:
        out = run_pipeline(graph, resolve(gx.passes.DEFAULT_PIPELINE), check=True)
        return out, PassReport(changed=out != graph)


def _target(name: str):
    return _Pipeline() if name == "default-pipeline" else gx.passes.get(name)


@pytest.mark.parametrize("name", TARGETS)
def test_random_programs(name: str) -> None:
    p = _target(name)

    @settings(max_examples=PER_TARGET, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(graph=programs(), seed=st.integers(0, 2**32 - 1))
    def check(graph: Graph, seed: int) -> None:
        verify(graph)
        after, report = p(graph)
        assert isinstance(report, PassReport)
        verify(after)
        assert parse(str(after)) == after
        assert report.changed == (after != graph), f"{name}: report.changed is wrong"
        args = random_args(graph, np.random.default_rng(seed))
        assert_outputs_close(evaluate(graph, args), evaluate(after, args), name,
                             computed_tolerance(graph))

    check()
