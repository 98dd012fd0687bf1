"""The CUDA scalar forms (backends/gpu/cuda_forms.py) as text: each reads every operand, and
some are pinned as written. (That they compute the references: the GPU backend's tests.)"""

from __future__ import annotations

import re

import numpy as np
import pytest

from explorer.backends.codegen.scalar_form import FALLS_BACK
from explorer.backends.gpu.cuda_forms import FORMS
from explorer.ir import dtypes
from explorer.ir.ops import OPS
from tests.ir.ops.samples import node_of, sample

CUDA = [n for n, form in FORMS.items() if OPS[n].sample is not None and form is not FALLS_BACK]


@pytest.mark.parametrize("name", CUDA)
def test_cuda_form_reads_every_operand(name: str) -> None:
    inputs, attrs = sample(name)
    n = node_of(name, inputs, attrs)
    operands = [f"a{k}" for k in range(len(inputs))]
    text = FORMS[name](operands, n)
    assert isinstance(text, str) and text.count("(") == text.count(")"), text
    for a in operands:
        assert re.search(rf"\b{a}\b", text), (name, text)


@pytest.mark.parametrize("name, attrs, dtype, want", [
    ("abs", {}, "f32", "(a0 < 0 ? -a0 : a0)"),
    ("round", {"rounding_method": 0}, "f32", "round(a0)"),
    ("round", {"rounding_method": 1}, "f32", "rint(a0)"),
    ("convert_element_type", {"new_dtype": "i32"}, "f32", "to_int<int>(a0)"),
    ("convert_element_type", {"new_dtype": "f64"}, "f32", "((double)a0)"),
    ("div", {}, "i32", "idiv(a0, a1)"),
    ("rem", {}, "f32", "fmod(a0, a1)"),
    ("not", {}, "pred", "(!a0)"),
])
def test_cuda_forms_as_text(name: str, attrs: dict, dtype: str, want: str) -> None:
    x = np.zeros((2,), dtypes.to_numpy(dtype))
    inputs = [x] * (OPS[name].arity or 1)
    n = node_of(name, inputs, attrs)
    assert FORMS[name]([f"a{k}" for k in range(len(inputs))], n) == want
