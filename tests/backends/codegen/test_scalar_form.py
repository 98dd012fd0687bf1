"""The code generators' tables of scalar forms (backends/codegen/scalar_form.py): every
elementwise row has a form or FALLS_BACK in every table, only elementwise rows have one, the
ops that fall back are a written-down choice, and a form narrowed to some nodes falls back for
the others."""

from __future__ import annotations

import pytest

from explorer.backends.codegen.scalar_form import (
    C_MATH,
    FALLS_BACK,
    TAKES,
    missing_forms,
    scalar_form,
)
from explorer.backends.cpu.numba_forms import FORMS as NUMBA
from explorer.backends.gpu.cuda_forms import FORMS as CUDA
from explorer.ir import GraphBuilder, TensorType
from explorer.ir.ops import OPS
from explorer.ir.traits import OpKind

TABLES = {"numba": NUMBA, "cuda": CUDA}
ELEMENTWISE = {name for name, row in OPS.items() if row.kind == OpKind.ELEMENTWISE}

# The ops each code generator leaves to the reference interpreter. Adding an op to the table,
# or a form to a generator's table, changes these sets: update them as a visible choice.
FALLS_BACK_IN = {
    "numba": {"digamma", "nextafter", "population_count", "reduce_precision"},
    "cuda": {"digamma", "bitcast_convert_type", "reduce_precision"},
}


@pytest.mark.parametrize("dialect", TABLES)
def test_every_elementwise_row_has_a_form_or_falls_back(dialect: str) -> None:
    forms = TABLES[dialect]
    assert missing_forms(forms) == []
    for name, form in forms.items():
        assert form is FALLS_BACK or callable(form), (name, dialect, form)


@pytest.mark.parametrize("dialect", TABLES)
def test_only_elementwise_rows_have_scalar_forms(dialect: str) -> None:
    assert set(TABLES[dialect]) == ELEMENTWISE
    assert set(C_MATH) <= ELEMENTWISE and set(TAKES) <= ELEMENTWISE


@pytest.mark.parametrize("dialect", TABLES)
def test_the_ops_that_fall_back_are_a_written_down_choice(dialect: str) -> None:
    falls_back = {n for n, form in TABLES[dialect].items() if form is FALLS_BACK}
    print(f"{dialect} falls back for: {', '.join(sorted(falls_back))}")
    assert falls_back == FALLS_BACK_IN[dialect]


def test_missing_forms_names_the_rows_without_one() -> None:
    assert missing_forms({}) == sorted(ELEMENTWISE)
    assert "add" in missing_forms({n: f for n, f in NUMBA.items() if n != "add"})


@pytest.mark.parametrize("dialect", TABLES)
def test_a_narrowed_form_falls_back_for_the_nodes_it_does_not_hold_for(dialect: str) -> None:
    """A kernel loads a bool as `byte != 0`: converting one to an unsigned type takes the
    reference; to a signed one, the form."""
    for new, holds in (("u8", False), ("i32", True)):
        b = GraphBuilder("convert")
        x = b.param(TensorType((3,), "pred"))
        y = b.add("convert_element_type", [x], {"new_dtype": new})
        g = b.build([y])
        form = scalar_form(g, g[y], TABLES[dialect])
        assert (form is not FALLS_BACK) == holds, (dialect, new)
        assert (form is TABLES[dialect]["convert_element_type"]) == holds


def test_c_math_functions_are_the_cuda_forms() -> None:
    for name, form in C_MATH.items():
        assert CUDA[name] is form, name
    assert C_MATH["erf_inv"](["x"], None) == "erfinv(x)"
