"""The program the view tests explore: a hostile comment and function name check escaping."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

import explorer as gx
from tests.view.toypasses import all_toy_passes

HOSTILE = "</script><script>window.pwned=1</script>"


def program(x, y):
    a = x * 2.0  # </script><script>window.pwned=1</script> & <b>
    b = a + 1.0
    c = b * b
    return jnp.sum(c @ y, axis=0)


program.__name__ = "prog<&>"
PROGRAM_LINE = program.__code__.co_firstlineno + 1  # the line of `a = x * 2.0`


def args():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((3, 4)).astype(np.float32),
            rng.standard_normal((4, 5)).astype(np.float32))


def toy_trace() -> gx.Trace:
    """5 stages: traced, mul-two-to-add (1 rewrite), nothing (unchanged),
    fuse-elementwise (a kernel region), drop-unused (removes a constant)."""
    return gx.explore(program, *args(), pipeline=all_toy_passes())
