"""Random inputs for a graph (explorer/measure/inputs.py): seeded, indices in range, floats
at a product-preserving scale or at the traced arguments' own."""

from __future__ import annotations

from functools import cache

import jax.numpy as jnp
import numpy as np
import pytest

import explorer as gx
from explorer.measure.inputs import input_ranges, random_inputs, rms
from tests.corpora.zoo import zoo


@cache
def _zoo(name: str) -> gx.Trace:
    fn, args = zoo()[name]
    return gx.explore(fn, *args)


def test_inputs_are_seeded_and_indices_stay_in_range() -> None:
    g = _zoo("gpt_block").final.graph
    tokens = g.params.index(next(p.id for p in g.param_nodes if p.attrs["name"] == "tokens"))
    assert input_ranges(g)[tokens] == ("index", 0, 32)  # rows of the embedding table
    a, b = random_inputs(g, 5), random_inputs(g, 5)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert a[tokens].dtype == np.int32 and 0 <= a[tokens].min() and a[tokens].max() < 32
    which = _zoo("cond_switch").final.graph  # a switch's branch number
    assert input_ranges(which)[1] == ("index", 0, 3)


def test_inputs_at_the_scale_of_the_traced_arguments() -> None:
    x = np.full((64, 8), 100.0, np.float32)
    g = gx.explore(lambda a: jnp.tanh(a).sum(), x, pipeline=[]).final.graph
    drawn = random_inputs(g, np.random.default_rng(0), like=(x,))[0]
    assert rms(x) == pytest.approx(100.0) and 50 < rms(drawn) < 200
    assert 0.5 < rms(random_inputs(g, 0)[0]) / (1 / np.sqrt(64)) < 2  # LeCun: 1/sqrt(rows)
    with pytest.raises(ValueError, match="2 arguments given for 1 parameters"):
        random_inputs(g, 0, like=(x, x))
