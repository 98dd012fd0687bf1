"""The check the conformance tests share: a function explored, and every stage of the pipeline
(verified, printed and parsed back) run on the reference, cpu and jax backends, against
`jax.jit` of the function: the same shapes and dtypes, and the same values."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import jax
import ml_dtypes
import numpy as np

import explorer as gx
from explorer.backends import registry
from explorer.ir import parse, verify

BACKENDS = ("reference", "cpu", "jax")


def bits(x: np.ndarray) -> np.ndarray:
    """The raw bits of x (floats compare bit for bit: NaN payloads, signed zeros)."""
    x = np.ascontiguousarray(x)
    return x.view(f"u{x.dtype.itemsize}") if x.dtype.kind == "f" or x.dtype == ml_dtypes.bfloat16 \
        else x


def check_every_stage(fn: Callable[..., Any], *args: Any, rtol: float | None = None,
                      ops: tuple[str, ...] = (), x64: bool = False,
                      bitwise: bool = False) -> gx.Trace:
    """Explore `fn`; at every stage each backend gives jax.jit's shape, dtype and value:
    equal (NaN where it has NaN; floats compared as float64, where NumPy's testing sees
    ml_dtypes' NaN), bit for bit with `bitwise` (NaN payloads, signed zeros), or within
    `rtol` where a float sum may reassociate (a float0 value, which holds no data, by its shape
    and dtype alone). `ops` must appear in the traced graph."""
    with jax.enable_x64(True) if x64 else contextlib.nullcontext():
        want = [np.asarray(w) for w in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
        t = gx.explore(fn, *args)
        traced = {n.op for n in t.stages[0].graph.nodes}
        assert set(ops) <= traced, f"expected {set(ops) - traced} in {t.stages[0].graph}"
        host = [np.asarray(a) for a in args]
        for s in t.stages:
            verify(s.graph)
            assert parse(str(s.graph)) == s.graph, f"round trip of stage {s.name}"
            for backend in BACKENDS:
                got = registry.run_graph(s.graph, host, backend).outputs
                assert len(got) == len(want), f"stage {s.name} on {backend}"
                for k, (g, w) in enumerate(zip(got, want)):
                    g = np.asarray(g)
                    where = f"output {k} of stage {s.name} on {backend}"
                    assert (g.shape, g.dtype) == (w.shape, w.dtype), where
                    if w.dtype == jax.dtypes.float0:  # no data: the type is the value
                        continue
                    if bitwise:
                        np.testing.assert_array_equal(bits(g), bits(w), err_msg=where)
                    elif w.dtype.kind in "biu" and w.dtype != ml_dtypes.bfloat16:
                        np.testing.assert_array_equal(g, w, err_msg=where)
                    else:
                        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                                   rtol=rtol or 0.0, atol=rtol or 0.0,
                                                   err_msg=where)
    return t
