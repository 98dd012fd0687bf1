"""Output-fusion kernels (backends/output_fusion.py): the dot through the target's product,
then the epilogue over its result as the epilogue's last input; the listing names the
library, the seconds are the dot's and the epilogue's."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference
from explorer.backends.codegen.kernel_plan import PlanError
from explorer.backends.output_fusion import OutputFusion
from explorer.ir import Node


class Epilogue:
    reason, seconds = "", 0.0

    def __init__(self, node: Node, name: str) -> None:
        self.name, self.body = name, node.attrs["body"]
        self.source = f"epilogue {name}\n"
        self.inputs: list[Any] = []

    def __call__(self, vals: list[Any]) -> Any:
        self.inputs = list(vals)
        self.seconds += 1.0
        return reference.evaluate(self.body, vals)[0]


class NumpyFusion(OutputFusion):
    library = "np.matmul"  # type: ignore[assignment]

    def __init__(self, node: Node, name: str) -> None:
        super().__init__(node, name, Epilogue)

    def product(self, a: Any, b: Any) -> Any:
        return a @ b


def test_the_dot_then_its_epilogue_over_the_result() -> None:
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((8, 6), (6, 5), (5,)))
    t = gx.explore(lambda x, w, b: jax.nn.relu(x @ w + b), x, w, b)
    (node,) = [n for n in t.final.graph.nodes if n.op == "kernel"]
    assert node.attrs["kind"] == "output"
    fused = NumpyFusion(node, "dense_relu")
    got = fused([x, w, b])
    np.testing.assert_allclose(got, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fused.epilogue.inputs[-1], x @ w, rtol=1e-5)  # the dot, last
    assert fused.source.startswith("# output fusion dense_relu: first the dot, by np.matmul:")
    assert fused.source.endswith("epilogue dense_relu_epilogue\n")
    assert fused.seconds >= 1.0 and fused.reason == "" and fused.in_place == frozenset()
    fused.seconds = 0.0
    assert fused.seconds == 0.0 and fused.epilogue.seconds == 0.0


def test_a_body_that_is_not_a_dot_and_its_epilogue_is_a_plan_error() -> None:
    x = np.ones((4, 4), np.float32)
    t = gx.explore(lambda x: (x * 2.0).sum(0), x)
    (node,) = [n for n in t.final.graph.nodes if n.op == "kernel"]
    with pytest.raises(PlanError):
        NumpyFusion(node, "not_a_dot")
