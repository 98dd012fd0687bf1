"""The view opens every body of a region (a while's cond and body, each branch of a
conditional, a split loop's tail), marks opaque nodes, and a rewrite that fired inside a body
highlights the body's own boxes and shows its line."""

from __future__ import annotations

import linecache

import jax
import jax.numpy as jnp
import numpy as np

import explorer as gx
from explorer.view.payload import stage_view
from explorer.view.render import render


def program(x):
    def cond(c):
        return c[1] < 5

    def body(c):
        return (c[0] * 1.0 + jnp.tanh(c[0]), c[1] + 1)

    y, _ = jax.lax.while_loop(cond, body, (x, 0))
    z = jax.lax.cond(y.sum() > 0, lambda v: v * 2.0, lambda v: jnp.sin(v), y)
    return jnp.fft.fft(z).real


X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)


def test_every_body_is_drawn_and_opaque_nodes_are_marked() -> None:
    tr = gx.explore(program, X)
    g = tr.stages[0].graph
    svg = render(g).svg
    (loop,) = [n for n in g.nodes if n.op == "while"]
    (branch,) = [n for n in g.nodes if n.op == "conditional"]
    cond_ids = [m.id for m in loop.attrs["cond"].nodes]
    assert all(f"gx_n{loop.id}_cond_n{i}" in svg for i in cond_ids)  # the cond, beside the body
    assert all(f"gx_n{loop.id}_n{m.id}" in svg for m in loop.attrs["body"].nodes)
    for k, b in enumerate(branch.attrs["branches"]):
        assert all(f"gx_n{branch.id}_branches{k}_n{m.id}" in svg for m in b.nodes)
    assert f"gx_n{branch.id}_head" in svg and "branch 1" in svg
    opaque = [n for n in g.nodes if n.op == "opaque"]
    assert opaque and "gx_opaque" in svg and "fft (opaque)" in svg
    assert "JAX primitive fft without a row" in svg  # the tooltip says what it is


def test_a_rewrite_inside_a_body_lights_the_body_boxes_and_names_its_line() -> None:
    tr = gx.explore(program, X)
    index = next(i for i, s in enumerate(tr.stages)
                 if any(r.region for r in s.report.rewrites))
    view = stage_view(tr, index)
    rows = [r for r in view["rewrites"] if r["region"]]
    assert rows
    for row in rows:
        assert row["region"].startswith("%")
        assert row["after_keys"] and all(f"gx_{k}" in view["after_svg"] for k in row["after_keys"])
        assert all(f"gx_{k}" in view["before_svg"] for k in row["before_keys"])
        file, line = row["source"].rsplit(":", 1)
        assert row["line_text"] == linecache.getline(file, int(line)).strip() != ""
