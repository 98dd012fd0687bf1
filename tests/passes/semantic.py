"""The semantic check every pass gets: the reference interpreter on random inputs, before
vs after, compared with a tolerance that suits each element type (passes may re-associate
floating-point sums, never change integer or boolean results)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from explorer.backends.reference import evaluate
from explorer.ir import Graph, TensorType, dtypes, verify
from explorer.passes.base import Pass, PassReport

# rtol (and atol relative to the output's magnitude) by element type.
TOLERANCE = {"f16": 2e-2, "bf16": 5e-2, "f32": 1e-4, "f64": 1e-9, "c64": 1e-4, "c128": 1e-9}


def random_args(graph: Graph, rng: np.random.Generator,
                like: Sequence[Any] | None = None) -> list[np.ndarray]:
    """Random inputs for `graph`'s parameters; with `like` (the arguments the program was
    traced with, a pytree whose leaves are the parameters in order) floats are drawn at each
    argument's own scale (its RMS), so that a deep model is not driven into overflow, where
    any re-association flips an inf."""
    scales = [1.0] * len(graph.params)
    if like is not None:
        leaves = jax.tree_util.tree_leaves(like)
        if len(leaves) != len(graph.params):
            raise ValueError(f"{len(leaves)} arguments given for {len(graph.params)} parameters")
        scales = [_rms(a) for a in leaves]
    out = []
    for p, scale in zip(graph.param_nodes, scales, strict=True):
        t = p.type
        assert isinstance(t, TensorType)
        npd = dtypes.to_numpy(t.dtype)
        if dtypes.is_bool(t.dtype):
            out.append(rng.random(t.shape) < 0.5)
        elif dtypes.is_int(t.dtype):
            low = 0 if t.dtype.startswith("u") else -4
            out.append(rng.integers(low, 5, size=t.shape).astype(npd))
        else:
            out.append((rng.standard_normal(t.shape) * scale).astype(npd))
    return out


def _rms(a: Any) -> float:
    x = np.asarray(a)
    if x.size == 0 or x.dtype.kind not in "fc":
        return 1.0
    r = float(np.sqrt(np.mean(np.abs(x).astype(np.float64) ** 2)))
    return r if np.isfinite(r) and r > 0 else 1.0


def computed_tolerance(graph: Graph) -> float:
    """The loosest tolerance of any floating-point type the graph computes in: a pass may
    re-associate an f32 sum whose result is then converted to f64."""
    names = {n.type.dtype for n in graph.nodes if isinstance(n.type, TensorType)}
    return max((TOLERANCE[d] for d in names if d in TOLERANCE), default=0.0)


def assert_outputs_close(before: Sequence[np.ndarray], after: Sequence[np.ndarray],
                         what: str = "", min_tolerance: float = 0.0) -> None:
    assert len(before) == len(after), f"{what}: {len(before)} outputs became {len(after)}"
    for k, (b, a) in enumerate(zip(before, after, strict=True)):
        b, a = np.asarray(b), np.asarray(a)
        where = f"{what}: output {k}"
        assert a.shape == b.shape and a.dtype == b.dtype, \
            f"{where}: {b.dtype}{list(b.shape)} became {a.dtype}{list(a.shape)}"
        name = dtypes.from_numpy(b.dtype)
        if name not in TOLERANCE:
            np.testing.assert_array_equal(a, b, err_msg=where)
            continue
        tol = max(TOLERANCE[name], min_tolerance)
        finite = np.isfinite(b)
        scale = max(1.0, float(np.max(np.abs(b[finite]), initial=0.0)))
        np.testing.assert_allclose(a.astype(np.float64) if name == "bf16" else a,
                                   b.astype(np.float64) if name == "bf16" else b,
                                   rtol=tol, atol=tol * scale, equal_nan=True, err_msg=where)


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
