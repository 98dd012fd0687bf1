"""Printing and parsing round-trip: parse(str(g)) == g for every test graph."""

from __future__ import annotations

import numpy as np
import pytest

import explorer as gx
from explorer.frontend.jaxpr import trace
from explorer.ir import GraphBuilder, Literal, ParseError, TensorType, parse, verify
from tests.corpora.graphs import ALL


@pytest.mark.parametrize("name", sorted(ALL))
def test_roundtrip(name: str) -> None:
    fn, args = ALL[name]
    g = trace(fn, *args).graph
    text = str(g)
    back = parse(text)
    assert back == g
    assert str(back) == text
    verify(back)


def test_literals_roundtrip_exactly() -> None:
    b = GraphBuilder("lits")
    vals = [np.float32(0.1), np.array([np.nan, -np.inf, np.inf, -0.0], np.float32),
            np.arange(40, dtype=np.float64).reshape(5, 8) / 3, np.array([True, False]),
            np.array(-7, np.int64), np.array([1.5, 2.25], dtype="bfloat16")]
    ids = [b.constant(v) for v in vals]
    g = b.build(ids)
    back = parse(str(g))
    assert back == g
    for a, c in zip(back.nodes, g.nodes):
        assert a.attrs["value"].array.tobytes() == c.attrs["value"].array.tobytes()


def test_regions_roundtrip() -> None:
    inner = GraphBuilder("body")
    x = inner.param(TensorType((3,), "f32"))
    body = inner.build([inner.add("exp", [x]), inner.add("neg", [x])])
    outer = GraphBuilder("main")
    p = outer.param(TensorType((3,), "f32"), "x")
    k = outer.add("kernel", [p], {"body": body, "kind": "loop"})
    g = outer.build([outer.add("get_tuple_element", [k], {"index": 1})])
    assert parse(str(g)) == g
    verify(parse(str(g)))


def test_source_lines_survive() -> None:
    g = gx.explore(lambda x: x * 2, np.ones(2, np.float32), pipeline=[]).final.graph
    back = parse(str(g))
    assert [n.source for n in back.nodes] == [n.source for n in g.nodes]
    assert any(n.source is not None for n in back.nodes)


@pytest.mark.parametrize(
    "text, where, what",
    [
        ("graph @f {\n  %0 = f32[3] parameter() {index=0}\n  return %1\n", (4, 1), "expected '}'"),
        ("graph f {", (1, 7), "graph name"),
        ("graph @f {\n  %0 = f33[3] parameter()\n}", (2, 8), "type"),
        ("graph @f {\n  %0 = f32[3 parameter()\n}", (2, 14), "expected ','"),
        ("graph @f {\n  %0 = f32[3] mul(%1 %2)\n}", (2, 22), "expected '\\)'"),
        ("graph @f {\n  %0 = f32[3] parameter() {index=?}\n}", (2, 34), "unexpected character"),
        ("graph @f {\n  %0 = f32[2] constant() {value=dense<f32[2] [1.0]>}\n}", (2, 46), "does not fit"),
    ],
)
def test_parse_errors_say_where(text: str, where: tuple[int, int], what: str) -> None:
    with pytest.raises(ParseError, match=what) as e:
        parse(text)
    assert (e.value.line, e.value.column) == where, str(e.value)


def test_literal_equality_is_by_value() -> None:
    assert Literal(np.float32(1)) == Literal(1.0, "f32")
    assert Literal(np.float32(1)) != Literal(1.0, "f64")
    assert len({Literal([1, 2], "i32"), Literal(np.array([1, 2], np.int32))}) == 1


def test_float0_values_print_as_their_type_and_parse_back() -> None:
    """float0 (JAX's tangent type of integers) holds no data: its literal is its type alone,
    and a literal that gives it data is refused, saying so."""
    import jax

    b = GraphBuilder("tangents")
    x = b.param(TensorType((3,), "float0"), "t")
    z = b.constant(np.zeros((), jax.dtypes.float0))
    y = b.add("broadcast_in_dim", [z], {"shape": (2, 3), "broadcast_dimensions": ()})
    g = b.build([x, y])
    text = str(g)
    assert "float0[3] parameter()" in text and "dense<float0[]>" in text
    back = parse(text)
    assert back == g and str(back) == text
    verify(back)
    assert back[z].attrs["value"].array.dtype == jax.dtypes.float0
    with pytest.raises(ParseError, match="float0 literal holds no data: write dense<float0"):
        parse(text.replace("dense<float0[]>", "dense<float0[] 0>"))
