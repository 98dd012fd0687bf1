"""The numba scalar forms (backends/cpu/numba_forms.py) compute what the op table's NumPy
references do, each compiled into a one-loop kernel with the CPU kernels' prelude."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.backends.codegen.scalar_form import FALLS_BACK
from explorer.backends.cpu.numba_forms import FORMS
from explorer.ir import dtypes
from explorer.ir.ops import OPS
from tests.ir.ops.samples import node_of, sample

NUMBA = [n for n, form in FORMS.items() if OPS[n].sample is not None and form is not FALLS_BACK]


@pytest.mark.parametrize("name", NUMBA)
def test_numba_form_matches_the_reference(name: str) -> None:
    pytest.importorskip("numba")
    from explorer.backends.cpu.numba_dialect import PRELUDE, np_type

    inputs, attrs = sample(name)
    n = node_of(name, inputs, attrs)
    with np.errstate(all="ignore"):
        want = np.asarray(OPS[name].ref(*inputs, **attrs))
    flat = [np.ascontiguousarray(np.broadcast_to(x, want.shape)).ravel() for x in inputs]
    args = [f"in{k}" for k in range(len(inputs))]
    expr = FORMS[name]([f"{a}[i]" for a in args], n)
    source = (PRELUDE + "\n\n@njit(error_model='numpy')\n"
              f"def kernel({', '.join(args)}, out):\n"
              "    for i in range(out.shape[0]):\n"
              f"        out[i] = {np_type(n.dtype)}({expr})\n")
    scope: dict = {}
    exec(compile(source, f"<scalar form of {name}>", "exec"), scope)
    got = np.empty(want.size, dtype=dtypes.to_numpy(n.dtype))
    scope["kernel"](*flat, got)
    got = got.reshape(want.shape)
    if dtypes.is_float(n.dtype):
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6, err_msg=source)
    else:
        np.testing.assert_array_equal(got, want, err_msg=source)
