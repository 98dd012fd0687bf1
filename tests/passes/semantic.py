"""The semantic check every pass gets: the reference interpreter on random inputs, before
vs after, compared with a tolerance that suits each element type (passes may re-associate
floating-point sums, never change integer or boolean results)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from explorer.backends.reference import evaluate
from explorer.ir import Graph, TensorType, dtypes, verify
from explorer.measure.closeness import magnitude, mismatch
from explorer.measure.inputs import random_inputs
from explorer.passes.base import Pass, PassReport

# rtol (and atol relative to the output's magnitude) by element type: a pass on the reference
# interpreter may only re-associate, so tighter than a backend's (closeness.TOLERANCE).
TOLERANCE = {"f16": 2e-2, "bf16": 5e-2, "f32": 1e-4, "f64": 1e-9, "c64": 1e-4, "c128": 1e-9}


def random_args(graph: Graph, rng: np.random.Generator,
                like: Sequence[Any] | None = None) -> list[np.ndarray]:
    """Random inputs for `graph`'s parameters (explorer/measure/inputs.py); with `like` (the
    arguments the program was traced with) floats are drawn at each argument's own scale."""
    return random_inputs(graph, rng, like)


def computed_tolerance(graph: Graph) -> float:
    """The loosest tolerance of any floating-point type the graph computes in: a pass may
    re-associate an f32 sum whose result is then converted to f64."""
    names = {n.type.dtype for n in graph.nodes if isinstance(n.type, TensorType)}
    return max((TOLERANCE[d] for d in names if d in TOLERANCE), default=0.0)


def assert_outputs_close(before: Sequence[np.ndarray], after: Sequence[np.ndarray],
                         what: str = "", min_tolerance: float = 0.0) -> None:
    """Each output of `after` as `before`'s: the same shape and element type, floats within
    their type's TOLERANCE (at least `min_tolerance`) of `before` relative to its magnitude
    (explorer/measure/closeness.py), others equal."""
    assert len(before) == len(after), f"{what}: {len(before)} outputs became {len(after)}"
    for k, (b, a) in enumerate(zip(before, after, strict=True)):
        b, a = np.asarray(b), np.asarray(a)
        where = f"{what}: output {k}"
        assert a.shape == b.shape and a.dtype == b.dtype, \
            f"{where}: {b.dtype}{list(b.shape)} became {a.dtype}{list(a.shape)}"
        name = dtypes.from_numpy(b.dtype)
        tol = max(TOLERANCE[name], min_tolerance) if name in TOLERANCE else 0.0
        assert not (why := mismatch(a, b, rtol=tol, atol=tol * magnitude(b))), f"{where}: {why}"


def check_semantics(p: Pass, graph: Graph, trials: int = 3, seed: int = 0,
                    like: Sequence[Any] | None = None) -> tuple[Graph, PassReport]:
    """Run pass `p` on `graph`, verify the result, and compare both graphs' outputs on
    `trials` random inputs (at the scale of `like`, the program's own flat arguments, when
    given). Returns what the pass returned."""
    after, report = p(graph)
    verify(after)
    rng = np.random.default_rng(seed)
    for t in range(trials):
        args = random_args(graph, rng, like)
        assert_outputs_close(evaluate(graph, args), evaluate(after, args),
                             f"pass {p.name!r}, trial {t}", computed_tolerance(graph))
    return after, report
