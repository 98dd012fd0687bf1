"""The rewrite engine: matching, captures, the fixed point, ids, sources, the log, errors."""

from __future__ import annotations

import pytest

from explorer.ir import GraphBuilder, Node, Source, TensorType, verify
from explorer.ir.rewrite import Rewrite, RewriteError, Rule, const, pat, rewrite, splat, var

F = TensorType((3,), "f32")
SRC = Source("cell.py", 7, "f")


def _neg_chain(depth: int):
    b = GraphBuilder()
    x = b.param(F)
    y = x
    for _ in range(depth):
        y = b.add("neg", [y], source=SRC)
    return b.build([y]), x


NEG_NEG = Rule("neg-neg", pat("neg", pat("neg", var("x"))), lambda ctx, x: x)


def test_fixed_point_and_log() -> None:
    g, x = _neg_chain(5)
    out, log = rewrite(g, [NEG_NEG])
    verify(out)
    (last,) = [n for n in out.nodes if n.id == out.outputs[0]]
    assert last.op == "neg" and last.inputs == (x,)
    assert [r.rule for r in log] == ["neg-neg", "neg-neg"]
    assert all(r.source == "cell.py:7" for r in log)
    assert log[0] == Rewrite("neg-neg", (2, 1), (x,), "cell.py:7")


def test_no_firing_returns_the_same_graph() -> None:
    g, _ = _neg_chain(1)
    out, log = rewrite(g, [NEG_NEG])
    assert out is g and log == []


def test_untouched_ids_stay_new_ids_are_fresh_and_inherit_the_source() -> None:
    b = GraphBuilder()
    x = b.param(F)
    y = b.add("integer_pow", [x], {"y": 2}, source=SRC)
    z = b.add("exp", [y])
    g = b.build([z])
    rule = Rule("square", pat("integer_pow", var("x"), attrs={"y": 2}),
                lambda ctx, x: ctx.emit("mul", [x, x]))
    out, (fired,) = rewrite(g, [rule])
    new = out[fired.after[0]]
    assert new.id == g.next_id and new.op == "mul" and new.source == SRC
    assert out[z].inputs == (new.id,)  # the user keeps its id and reads the replacement
    assert [n.id for n in out.nodes].index(new.id) < [n.id for n in out.nodes].index(z)
    assert fired.before == (y,)
    pruned, _ = rewrite(g, [rule], prune=True)
    assert y not in pruned and x in pruned


def test_commutative_patterns_offer_both_bindings() -> None:
    b = GraphBuilder()
    x = b.param(F)
    one = b.constant(1.0, "f32")
    y = b.add("mul", [one, x])
    seen: list[tuple[int, int]] = []

    def fn(ctx, x: Node, c: Node) -> int | None:
        seen.append((x.id, c.id))
        return x.id if c.op == "constant" else None

    out, log = rewrite(b.build([y]), [Rule("mul-one", pat("mul", var("x"), var("c"),
                                                           commute=True), fn)])
    assert seen == [(one, x), (x, one)] and out.outputs == (x,)


def test_repeated_capture_names_must_bind_the_same_node() -> None:
    b = GraphBuilder()
    x, y = b.param(F), b.param(F)
    same, other = b.add("mul", [x, x]), b.add("mul", [x, y])
    rule = Rule("square", pat("mul", var("a"), var("a")),
                lambda ctx, a: ctx.emit("integer_pow", [a], {"y": 2}))
    out, log = rewrite(b.build([same, other]), [rule])
    assert [r.before for r in log] == [(same,)]


def test_const_patterns_compare_bits() -> None:
    b = GraphBuilder()
    x = b.param(F)
    pz, nz = b.constant(0.0, "f32"), b.constant(-0.0, "f32")
    g = b.build([b.add("add", [x, pz]), b.add("add", [x, nz])])
    rule = Rule("add-neg-zero", pat("add", var("x"), const(-0.0)), lambda ctx, x: x)
    out, log = rewrite(g, [rule])
    assert len(log) == 1 and out.outputs[1] == x
    assert splat(g[pz]) == 0.0 and splat(g[x]) is None


def test_a_wrong_type_is_an_error_naming_the_rule() -> None:
    g, x = _neg_chain(1)
    bad = Rule("to-constant", pat("neg"), lambda ctx: ctx.constant(0.0, "f64"))
    with pytest.raises(RewriteError, match="to-constant"):
        rewrite(g, [bad])


def test_rules_that_undo_each_other_hit_the_loop_guard() -> None:
    g, x = _neg_chain(1)
    flip = Rule("flip", pat("neg", var("x")), lambda ctx, x: ctx.emit("neg", [x]))
    with pytest.raises(RewriteError, match="did not settle"):
        rewrite(g, [flip], max_firings=50)


def test_rule_lists_compose_with_plus_and_users_are_revisited() -> None:
    b = GraphBuilder()
    x = b.param(F)
    y = b.add("exp", [b.add("neg", [b.add("neg", [x])])])
    on_param = Rule("exp-of-parameter", pat("exp", var("x", where=lambda n: n.op == "parameter")),
                    lambda ctx, x: ctx.emit("abs", [x]))
    out, log = rewrite(b.build([y]), [NEG_NEG] + [on_param])
    assert [r.rule for r in log] == ["neg-neg", "exp-of-parameter"]
    assert out[out.outputs[0]].op == "abs"
