"""Random inputs for a graph: one array per parameter, drawn so that the program runs as it
would on real data. Reproducer scripts draw their inputs here, and the tests draw theirs
(a pass's semantic check, a backend against the reference).

Floats are normal, scaled so that products keep unit scale (`normal_scale`) or at the traced
arguments' own scale; booleans are coin flips; integers are small, and those that end up as
indices (gather and scatter indices, dynamic slice starts, a switch's branch; followed
through the ops that pass integers on unchanged, and into region bodies) stay in range.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..ir import dtypes
from ..ir.graph import Graph, Node, TensorType
from ..ir.ops.regions import bodies


def normal_scale(shape: tuple[int, ...]) -> float:
    """The standard deviation of a float input: 1 for scalars and vectors, 1/sqrt(n) for an
    array whose next-to-last axis has n entries, as a weight matrix is initialised (LeCun), so
    that a product over that axis keeps unit scale. Standard normal weights of a model's width
    (256) make its logits so large that float32 rounding alone moves a gradient by 4e-3, and
    the reproducer would report that conditioning as a mismatch."""
    return 1.0 if len(shape) < 2 else 1.0 / float(np.sqrt(max(shape[-2], 1)))


def random_inputs(graph: Graph, seed: int | np.random.Generator = 0,
                  like: Sequence[Any] | None = None) -> list[np.ndarray]:
    """One array per parameter: normal floats scaled by `normal_scale`, coin-flip booleans,
    small integers, except that integers used as indices (gather and scatter indices, dynamic
    slice starts, a switch's branch) stay in range. `seed` is a seed or a Generator to draw
    from. With `like` (the arguments the program was traced with, a pytree whose leaves are
    the parameters in order) floats are drawn at each argument's own scale (its RMS), so that
    a deep model is not driven into overflow, where any re-association flips an inf."""
    rng = np.random.default_rng(seed)
    scales: list[float | None] = [None] * len(graph.params)
    if like is not None:
        import jax

        leaves = jax.tree_util.tree_leaves(like)
        if len(leaves) != len(graph.params):
            raise ValueError(f"{len(leaves)} arguments given for {len(graph.params)} parameters")
        scales = [rms(a) for a in leaves]
    out = []
    for p, (kind, low, high), scale in zip(graph.param_nodes, input_ranges(graph), scales,
                                           strict=True):
        t = p.type
        assert isinstance(t, TensorType)
        npd = dtypes.to_numpy(t.dtype)
        if kind == "bool":
            out.append(rng.random(t.shape) < 0.5)
        elif kind == "normal":
            scale = normal_scale(t.shape) if scale is None else scale
            out.append((rng.standard_normal(t.shape) * scale).astype(npd))
        else:
            out.append(rng.integers(low, high, size=t.shape).astype(npd))
    return out


def rms(a: Any) -> float:
    """The root mean square of a float array (1 for an empty, non-float or non-finite one)."""
    x = np.asarray(a)
    if x.size == 0 or x.dtype.kind not in "fc":
        return 1.0
    r = float(np.sqrt(np.mean(np.abs(x).astype(np.float64) ** 2)))
    return r if np.isfinite(r) and r > 0 else 1.0


def input_ranges(graph: Graph) -> list[tuple[str, int, int]]:
    """Per parameter: ("normal" | "bool" | "int" | "index", low, high) with integers drawn
    from [low, high)."""
    bounds = index_bounds(graph)
    out = []
    for p in graph.param_nodes:
        dt = p.type.dtype if isinstance(p.type, TensorType) else "f32"
        if dtypes.is_bool(dt):
            out.append(("bool", 0, 2))
        elif not dtypes.is_int(dt):
            out.append(("normal", 0, 0))
        elif p.id in bounds:
            out.append(("index", 0, min(bounds[p.id], int(dtypes.iinfo(dt).max) + 1)))
        else:
            out.append(("int", 0 if dt.startswith("u") else -4, 5))
    return out


def describe_inputs(graph: Graph) -> list[str]:
    """A line per parameter, for a script's header."""
    out = []
    for p, (kind, low, high) in zip(graph.param_nodes, input_ranges(graph), strict=True):
        scale = normal_scale(p.type.shape) if isinstance(p.type, TensorType) else 1.0
        what = {"normal": f"normal, mean 0, std {scale:.3g}", "bool": "coin flips"}
        draw = what.get(kind) or f"integers in [{low}, {high})" + (" (indices)" if kind == "index" else "")
        out.append(f"%{p.id} {p.attrs.get('name', '')} {p.type}: {draw}")
    return out


# Ops that pass integer values on unchanged (a value read as an index keeps its range through
# them): the operand positions that carry the value, None for all.
_CARRIERS: dict[str, range | None] = {
    "convert_element_type": None, "reshape": None, "broadcast_in_dim": None, "transpose": None,
    "copy": None, "slice": None, "squeeze": None, "expand_dims": None, "rev": None,
    "concatenate": None, "stack": None, "tile": None, "select_n": range(1, 1 << 30),
    "clamp": range(1, 2), "dynamic_slice": range(1), "pad": range(1),
}


def index_bounds(graph: Graph, outputs: Mapping[int, int] | None = None) -> dict[int, int]:
    """node id -> an exclusive upper bound for the integers it holds, where they end up as
    indices; `outputs` (output position -> bound) seeds a body's analysis from its user."""
    bound: dict[int, int] = {}

    def need(i: int, b: int) -> None:
        t = graph[i].type
        if isinstance(t, TensorType) and dtypes.is_int(t.dtype):
            bound[i] = max(1, min(bound.get(i, b), b))

    for k, o in enumerate(graph.outputs):
        if outputs and k in outputs:
            need(o, outputs[k])
    for n in reversed(graph.nodes):
        types = [graph[i].type for i in n.inputs]
        a = n.attrs
        if n.op == "gather" and len(types) == 2:
            sizes, shape = a["slice_sizes"], types[0].shape
            need(n.inputs[1], min((shape[d] - sizes[d] + 1 for d in a["start_index_map"]), default=1))
        elif n.op.startswith("scatter") and len(types) == 3:
            dims = a.get("scatter_dims_to_operand_dims") or ()
            need(n.inputs[1], min((types[0].shape[d] for d in dims), default=1))
        elif n.op == "dynamic_slice":
            for k, i in enumerate(n.inputs[1:]):
                need(i, types[0].shape[k] - a["slice_sizes"][k] + 1)
        elif n.op == "dynamic_update_slice":
            for k, i in enumerate(n.inputs[2:]):
                need(i, types[0].shape[k] - types[1].shape[k] + 1)
        elif n.op == "conditional" and types and types[0].dtype != "pred":
            need(n.inputs[0], len(a["branches"]))
        if n.id in bound and n.op in _CARRIERS:
            positions = _CARRIERS[n.op]
            for k, i in enumerate(n.inputs):
                if positions is None or k in positions:
                    need(i, bound[n.id])
        _into_bodies(graph, n, bound, need)
    return bound


def _into_bodies(graph: Graph, n: Node, bound: dict[int, int], need: Any) -> None:
    """A region's inputs bind its bodies' parameters in order (a conditional's after its
    selector, branch after branch): a bound a body puts on a parameter goes to the input."""
    first = 1 if n.op == "conditional" else 0
    for _, body in bodies(n):
        seeded = {0: bound[n.id]} if n.id in bound and isinstance(n.type, TensorType) else None
        inner = index_bounds(body, seeded)
        for k, p in enumerate(body.params):
            if p in inner and first + k < len(n.inputs):
                need(n.inputs[first + k], inner[p])
        if n.op == "conditional":
            first += len(body.params)
