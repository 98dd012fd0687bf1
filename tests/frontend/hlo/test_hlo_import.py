"""HLO -> Graph on real modules: every catalogue function's HLO imports, verifies, prints and
reads back; where every op maps, the reference interpreter on the import equals JAX."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import explorer as gx
from explorer.backends import reference
from tests.corpora.graphs import ALL, MODELS
from tests.frontend.hlo.helpers import (
    DATA,
    all_nodes,
    check_imported,
    data_files,
    leaves_close,
    opaque_opcodes,
)

# Functions whose HLO holds ops our table lacks (variadic reduce for argmax, sort with a
# comparator, TopK): they import as opaque nodes.
EXPECTED_OPAQUE = {
    "argmax_argmin": {"reduce"}, "one_hot": {"reduce"}, "argsort": {"sort"},
    "sort": {"sort"}, "top_k": {"topk"},
}


def jax_hlo(fn, *args) -> str:
    return jax.jit(fn).lower(*args).as_text(dialect="hlo")


@pytest.mark.parametrize("name", sorted(ALL))
def test_import_matches_jax(name: str) -> None:
    fn, args = ALL[name]
    g = gx.from_hlo(jax_hlo(fn, *args))
    check_imported(g)
    opaque = opaque_opcodes(g)
    assert opaque == EXPECTED_OPAQUE.get(name, set())
    if opaque:
        return
    leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
    outs = reference.evaluate(g, reference.check_args(g, leaves))
    leaves_close(outs, jax.tree_util.tree_leaves(fn(*args)), 1e-4 if name in MODELS else 1e-5)


def test_loop_and_branches_are_regions() -> None:
    def fn(x, n):
        def body(i, acc):
            return jax.lax.cond(i % 2 == 0, lambda a: a * 1.5, lambda a: a - 1.0, acc)

        return jax.lax.fori_loop(0, n, body, x), jax.lax.cond(n > 2, jnp_sum, jnp_max, x)

    def jnp_sum(x):
        return x.sum()

    def jnp_max(x):
        return x.max()

    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    for n in (np.int32(1), np.int32(5)):
        g = gx.from_hlo(jax_hlo(fn, x, n))
        check_imported(g)
        ops = {m.op for m in all_nodes(g)}
        assert {"while", "conditional"} <= ops and "opaque" not in ops
        leaves_close(reference.evaluate(g, [x, n]), list(fn(x, n)))


@pytest.mark.parametrize("path", data_files(), ids=lambda p: p.name)
def test_stored_modules_import(path) -> None:
    g = gx.from_hlo(path.read_text())
    check_imported(g)


def test_stored_loop_module_runs() -> None:
    """The CPU-optimised loop (call, while, conditional, fusions) still computes the loop."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    want = x.copy()
    for i in range(5):
        want = want * np.float32(1.5) if i % 2 == 0 else want - np.float32(1.0)
    for name in ("jax_loop_cond_before.hlo", "jax_loop_cond_cpu_after.hlo"):
        g = gx.from_hlo((DATA / name).read_text())
        assert not opaque_opcodes(g)
        leaves_close(reference.evaluate(g, [x, np.int32(5)]), [want])


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "cummax", "cummin"])
@pytest.mark.parametrize("axis, reverse", [(0, False), (1, True)])
def test_cumulative_reductions_map(op: str, axis: int, reverse: bool) -> None:
    """JAX lowers these to reduce-window on CPU; that window pattern maps back to them."""
    x = np.random.default_rng(2).uniform(0.5, 1.5, (3, 5)).astype(np.float32)

    def fn(x):
        return getattr(jax.lax, op)(x, axis=axis, reverse=reverse)

    g = gx.from_hlo(jax_hlo(fn, x))
    check_imported(g)
    assert {n.op for n in all_nodes(g)} & {op, "opaque"} == {op}
    leaves_close(reference.evaluate(g, [x]), [fn(x)])


def test_pooling_window_stays_opaque() -> None:
    x = np.ones((4, 6), np.float32)

    def fn(x):
        return jax.lax.reduce_window(x, 0.0, jax.lax.add, (2, 2), (2, 2), "VALID")

    g = gx.from_hlo(jax_hlo(fn, x))
    check_imported(g)
    assert opaque_opcodes(g) == {"reduce-window"}
