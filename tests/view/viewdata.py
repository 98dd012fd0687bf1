"""The programs the view tests explore: a hostile comment and function name check escaping;
a user pass that says why it declines (remarks), at the top level and in a loop's body."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.ir.rewrite import Rule, const, pat, var
from explorer.passes.base import RewritePass
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


def _keep_scaling(ctx, x, c, root):  # type: ignore[no-untyped-def]
    ctx.miss(f"%{root.id} multiplies by a constant other than one: nothing to drop")
    return None


# a user pass that fires nowhere and says why at every multiplication by a constant
WHY_PASS = RewritePass("why-demo", [Rule("mul-by-one", pat("mul", var("x"), const(name="c"),
                                                          name="root", commute=True),
                                         _keep_scaling)])


def scaled(x):
    y = x * 3.0
    z = jax.lax.fori_loop(0, 3, lambda i, c: c * 2.0, y)
    return jnp.sum(z + 1.0)


SCALED_LINE = scaled.__code__.co_firstlineno + 1  # the line of `y = x * 3.0`


def remark_trace() -> gx.Trace:
    """2 stages: traced, why-demo (no rewrites; a missed remark at `x * 3.0`, and one at
    `c * 2.0` inside the loop's body)."""
    return gx.explore(scaled, np.linspace(0.5, 2.0, 8, dtype=np.float32), pipeline=[WHY_PASS])
