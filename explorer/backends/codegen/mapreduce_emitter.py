"""The one map-reduce emitter: a split body's plan (mapreduce_plan.py) -> the statements of its
kernel, in a target's `Dialect`.

Per row i, a sweep over j computes the pairwise value S[i, j] in registers (`value`: the cone
at one point, inner folds as inner loops, small dots as contractions) and folds it into the
row's accumulators (`head`, `fold`, `tail`): sums and products with V (in double, for floats),
max/min, argmax/argmin (first NaN, first of ties), a sorted buffer of the best k for top_k
(lax.top_k's order: +NaN first, -NaN last, ties keep the lower index), and for
softmax/logsumexp a running maximum with the sum and products rescaled when it grows
(`softmax_guard`, `softmax_step`, `softmax_tail`: online, as flash attention and KeOps's
LogSumExp). The [I, J] chunk never exists.

What differs between targets stays with them: the CPU's kernel (cpu/mapreduce.py) runs rows
in parallel and sweeps j in blocks of lanes with vector math; the GPU's (gpu/mapreduce.py)
runs a thread or a warp per row. Both call this emitter with a `Block` per part of the kernel
(before the sweep, in it, after it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...ir import dtypes
from ...ir.graph import Node
from ...ir.ops import dot_dims
from .dialect import COMBINE, Block, Dialect
from .mapreduce_plan import FOLDS, ROW_OPS, MapReducePlan


class Emitter:
    """Statements for the cone at one (i, j) point, written into `block`, and the folds of the
    plan's reductions. `arg` names each leaf's kernel argument, `out_name` each output's."""

    def __init__(self, plan: MapReducePlan, dialect: Dialect, arg: dict[int, str],
                 out_name: dict[int, str], block: Block) -> None:
        self.plan, self.g, self.d, self.b = plan, plan.flat, dialect, block
        self.arg, self.out_name = arg, out_name
        self.nk = plan.shape[plan.kept]
        # variables are numbered by the node's place among the pairwise cone and what it
        # reads, not by its id: bodies of one structure then give one source (one compiled
        # kernel), whatever else the loop body computes before or after
        read = set(plan.cone) | {i for c in plan.cone for i in self.g[c].inputs}
        order = sorted(self.g.nodes, key=lambda n: n.id not in read)  # stable: graph order
        self.num = {n.id: k for k, n in enumerate(order)}
        # run-time scalars (name, value) of a shape-generic dialect: constants and loop
        # bounds are arguments, so one compiled kernel serves every program of this structure
        self.scalars: dict[str, object] = {}
        self.accumulators: list[tuple[str, str]] = []  # (name, monoid) of the sums, max, min

    # ---- the pairwise value
    def pos(self, j: str) -> tuple[str, str]:
        """The (row, column) loop variables of the pairwise values, with `j` the folded one."""
        return ("i", j) if self.plan.kept == 0 else (j, "i")

    def bound(self, name: str, size: int) -> str:
        if not self.d.shape_generic:
            return str(size)
        self.scalars[name] = size
        return name

    def leaf(self, i: int, shape: tuple[int, ...], vars_: tuple[str, ...],
             dims: tuple[int, ...] | None = None) -> str:
        n = self.g[i]
        if n.op == "constant" and n.shape == ():
            if not self.d.shape_generic:
                return self.d.constant(n)
            name = f"c{self.num[i]}"
            self.scalars[name] = np.asarray(n.attrs["value"].array).astype(dtypes.to_numpy(n.dtype))[()]
            return name
        if n.shape == ():
            return f"{self.arg[i]}[0]"
        dims = dims if dims is not None else tuple(range(len(shape) - len(n.shape), len(shape)))
        index = [vars_[t] if d == shape[t] else "0" for d, t in zip(n.shape, dims)]
        return self.d.index(self.arg[i], index, n.shape)

    def value(self, i: int, vars_: tuple[str, ...], scope: set[int], shape: tuple[int, ...] = (),
              sfx: str = "") -> str:
        """The scalar of `i` at the point `vars_` of a consumer of shape `shape` (named with
        the suffix `sfx`: one lane's copy of the code)."""
        g, d, b = self.g, self.d, self.b
        if i not in self.plan.cone:
            return self.leaf(i, shape, vars_)
        if i in scope:
            return f"v{self.num[i]}{sfx}"
        n = g[i]
        out = f"v{self.num[i]}{sfx}"
        if n.op == "broadcast_in_dim":
            src = g[n.inputs[0]]
            text = self.value(src.id, vars_, scope, n.shape, sfx) if src.id in self.plan.cone \
                else self.leaf(src.id, n.shape, vars_, tuple(n.attrs["broadcast_dimensions"]))
            b(d.define(out, n.dtype, text))
        elif n.op == "dot_general":
            self.contraction(n, [(out, (vars_[0], vars_[1]))])
        elif n.op in FOLDS:  # an inner fold over the third axis
            src, kind = g[n.inputs[0]], FOLDS[n.op]
            b(d.declare(out, n.dtype, d.identity(kind, n.dtype)))
            with b.block(d.for_range("d", "0", self.bound(f"kd{self.num[i]}", src.shape[2]))):
                text = self.value(src.id, (*vars_, "d"), set(scope), src.shape, sfx)
                b(d.assign(out, COMBINE[kind].format(out, text)))
        else:
            ops = [self.value(k, vars_, scope, n.shape, sfx) for k in n.inputs]
            b(d.define(out, n.dtype, d.cast(d.scalar_form(g, n)(ops, n), n.dtype)))
        scope.add(i)
        return out

    def contraction(self, n: Node, outs: Sequence[tuple[str, tuple[str, str]]]) -> None:
        """`out = sum_d a[row, d] * b[col, d]` for each (out, (row, col)), summed in order of d:
        written out term by term for up to the dialect's `unroll` features, else one loop."""
        g, d, b = self.g, self.d, self.b
        lc, rc, _, _ = dot_dims(n.attrs)
        x, y = n.inputs
        size = g[x].shape[lc[0]]

        def term(k: str, pos: tuple[str, str]) -> str:
            ia, ib = ["", ""], ["", ""]
            ia[lc[0]], ia[1 - lc[0]] = k, pos[0]
            ib[rc[0]], ib[1 - rc[0]] = k, pos[1]
            return f"{d.index(self.arg[x], ia, g[x].shape)} * {d.index(self.arg[y], ib, g[y].shape)}"

        zero = d.literal(0, n.dtype)
        if size <= d.unroll:
            for out, pos in outs:
                b(d.define(out, n.dtype, " + ".join([zero, *(term(str(k), pos) for k in range(size))])))
            return
        b(*(d.declare(out, n.dtype, zero) for out, _ in outs))
        with b.block(d.for_range("d", "0", d.extent(self.arg[x], lc[0], size))):
            b(*(d.assign(out, f"{out} + {term('d', pos)}") for out, pos in outs))

    # ---- the folds
    def sweep(self, head: Block, tail: Block, lanes: int = 1) -> None:
        """Every reduction of the plan: its state before the sweep (`head`), the value at
        (i, j) and its fold (this emitter's block), its stores after the sweep (`tail`)."""
        scope: set[int] = set()
        for k, r in enumerate(self.plan.reductions):
            self.head(k, head, lanes)
            xv = self.value(r.value, self.pos("j"), scope, self.plan.shape)
            if r.kind == "softmax":
                self.softmax_sweep(k, xv)
                self.softmax_tail(k, tail, lanes)
            else:
                self.fold(k, xv, "j")
                self.tail(k, tail, lanes)

    def width(self, v: int | None) -> int:
        """Accumulators per row for a product with V (its columns), or 1."""
        return 1 if v is None or len(self.g[v].shape) == 1 else self.g[v].shape[1]

    def at(self, array: str, index: list[str], node: int) -> str:
        """Element `index` of the output of node `node`, [i] or [i, column]."""
        t = self.plan.out_type(node)
        return self.d.index(array, index[:len(t.shape)], t.shape)

    def v_at(self, v: int, j: str, f: int, t: str = "f64") -> str:
        """V's value at column j, feature f, as element type `t`."""
        shape = self.g[v].shape
        return self.d.cast(self.d.index(self.arg[v], [j] if len(shape) == 1 else [j, str(f)], shape), t)

    def acc_type(self, k: int) -> str:
        t = self.g[self.plan.reductions[k].value].dtype
        return "f64" if dtypes.is_float(t) else t

    def head(self, k: int, b: Block, lanes: int = 1) -> None:
        """Reduction k's state before the sweep (sums and softmax: one per lane of a block)."""
        d, r = self.d, self.plan.reductions[k]
        t = self.g[r.value].dtype
        if r.kind in ("argmax", "argmin"):
            b(d.declare(f"best{k}", t, d.literal(-np.inf if r.kind == "argmax" else np.inf, t)),
              d.declare(f"at{k}", "i64", "0"))
        elif r.kind == "top_k":  # kth: the k-th best, once full
            b(d.declare(f"filled{k}", "i32", "0"), d.declare(f"kth{k}", t, d.literal(0, t)))
        elif r.kind == "softmax":
            for sfx in self.suffixes(lanes):
                b(d.declare(f"m{k}{sfx}", "f64", d.literal(-np.inf, "f64")),
                  d.declare(f"l{k}{sfx}", "f64", d.literal(0, "f64")))
                b(*(d.declare(acc, "f64", d.literal(0, "f64")) for acc in self.products(k, sfx)))
        else:
            kind = "add" if r.kind == "dot" else r.kind
            per_lane = lanes if kind == "add" else 1
            for f in range(self.width(r.v)):
                for sfx in self.suffixes(per_lane):
                    b(d.declare(f"acc{k}_{f}{sfx}", self.acc_type(k), d.identity(kind, self.acc_type(k))))
                self.accumulators.append((f"acc{k}_{f}", kind))

    @staticmethod
    def suffixes(lanes: int) -> list[str]:
        return [f"_{lane}" if lane else "" for lane in range(lanes)]

    def products(self, k: int, sfx: str = "") -> list[str]:
        """The accumulators of a softmax's products with V."""
        r = self.plan.reductions[k]
        return [f"a{k}_{p}_{f}{sfx}" for p, (_node, v, _) in enumerate(r.parts[2])
                for f in range(self.width(v))]

    def fold(self, k: int, xv: str, j: str, sfx: str = "") -> None:
        """The sweep's statements folding the value `xv` at column `j` into reduction k (not
        softmax); sums and products fold into the accumulators named with suffix `sfx`."""
        d, b, r = self.d, self.b, self.plan.reductions[k]
        if r.kind in ("argmax", "argmin"):
            cmp = ">" if r.kind == "argmax" else "<"
            with b.block(d.if_(d.or_(f"{xv} {cmp} best{k}",
                                     f"({d.and_(f'{xv} != {xv}', f'best{k} == best{k}')})"))):
                b(d.assign(f"best{k}", xv), d.assign(f"at{k}", j))
        elif r.kind == "top_k":
            self.top_k(k, xv, j)
        elif r.kind == "dot":
            assert r.v is not None
            at = self.acc_type(k)
            for f in range(self.width(r.v)):
                acc = f"acc{k}_{f}{sfx}"
                b(d.assign(acc, d.accumulate("add", acc, f"{d.cast(xv, at)} * {self.v_at(r.v, j, f, at)}")))
        elif r.kind == "add":
            b(d.assign(f"acc{k}_0{sfx}", d.accumulate("add", f"acc{k}_0{sfx}", d.cast(xv, self.acc_type(k)))))
        else:  # max, min: in order
            b(d.assign(f"acc{k}_0", d.combine(r.kind, f"acc{k}_0", d.cast(xv, self.acc_type(k)))))

    def top_k(self, k: int, xv: str, j: str) -> None:
        """Insert `xv` into the sorted buffer of the best k so far (the values and indices
        outputs, in lax.top_k's order; ties keep the first). Once the buffer is full, most
        values fall below its k-th (kth<k>): one comparison rejects them (a NaN compares
        false and takes the ordered path, as a tie does)."""
        d, b, r = self.d, self.b, self.plan.reductions[k]
        vals, idx = (self.out_name[o] for o in r.outs[1:3])
        kk, t = r.k, self.g[r.value].dtype
        shape = (self.nk, kk)

        def cell(array: str, p: str) -> str:
            return d.index(array, ["i", p], shape)

        with b.block(d.if_(d.or_(f"filled{k} < {kk}", d.not_(f"{xv} < kth{k}")))):
            b(d.declare("p", "i32", f"filled{k}"), d.declare("take", "pred", d.true()))
            with b.block(d.if_(f"p == {kk}")):
                b(d.assign("take", f"top_k_key({xv}) > top_k_key(kth{k})"), d.assign("p", str(kk - 1)))
                b.reopen(d.else_())
                b(d.assign(f"filled{k}", "p + 1"))
            with b.block(d.if_("take")):
                with b.block(d.while_("p > 0")):
                    b(d.define("prev", t, cell(vals, "p - 1")))
                    with b.block(d.if_(d.not_(f"top_k_key({xv}) > top_k_key(prev)"))):
                        b(d.brk())
                    b(d.assign(cell(vals, "p"), "prev"), d.assign(cell(idx, "p"), cell(idx, "p - 1")),
                      d.assign("p", "p - 1"))
                b(d.assign(cell(vals, "p"), xv), d.assign(cell(idx, "p"), j),
                  d.assign(f"kth{k}", cell(vals, str(kk - 1))))

    def tail(self, k: int, b: Block, lanes: int = 1) -> None:
        """Reduction k's stores after the sweep (not softmax: `softmax_tail`)."""
        d, r = self.d, self.plan.reductions[k]
        if r.kind in ("argmax", "argmin"):
            b(d.assign(self.at(self.out_name[r.outs[0]], ["i"], r.outs[0]), f"at{k}"))
        elif r.kind in ("add", "dot", "max", "min"):
            per_lane = lanes if r.kind in ("add", "dot") else 1
            for f in range(self.width(r.v)):
                acc = f"acc{k}_{f}"
                if per_lane > 1:  # the lanes' partial sums
                    b(d.assign(acc, " + ".join(acc + sfx for sfx in self.suffixes(per_lane))))
                b(d.assign(self.at(self.out_name[r.outs[0]], ["i", str(f)], r.outs[0]), acc))

    # ---- the online softmax
    def softmax_guard(self, k: int, xv: str, sfx: str = "") -> None:
        """s, g and the exponent t = -|s - m| of one lane's step (g: s raises the running
        max, or is NaN, which propagates as max does)."""
        d, b = self.d, self.b
        s, m, g = f"s{k}{sfx}", f"m{k}{sfx}", f"g{k}{sfx}"
        b(d.define(s, "f64", d.cast(xv, "f64")), d.define(g, "pred", d.or_(f"{s} > {m}", f"{s} != {s}")),
          d.define(f"t{k}{sfx}", "f64", d.select(g, f"{m} - {s}", f"{s} - {m}")))

    def softmax_step(self, k: int, sfx: str, e: str, j: str) -> None:
        """One lane's online-softmax update with the value s<k> at column j, given e =
        exp(t<k>): a new max rescales the sum and products by e; any other value adds its
        weight e. A -inf adds nothing (its weight exp(-inf - m) is 0, also while m is still
        -inf, where exp would give NaN)."""
        d, b, r = self.d, self.b, self.plan.reductions[k]
        s, m, lk = f"s{k}{sfx}", f"m{k}{sfx}", f"l{k}{sfx}"
        vs = [self.v_at(v, j, f) for _node, v, _ in r.parts[2] for f in range(self.width(v))]
        with b.block(d.if_(f"g{k}{sfx}")):
            b(d.assign(m, s), d.assign(lk, f"{lk} * {e} + 1.0"))
            b(*(d.assign(acc, f"{acc} * {e} + {vj}") for acc, vj in zip(self.products(k, sfx), vs)))
            b.reopen(d.elif_(f"{s} > {d.literal(-np.inf, 'f64')}"))
            b(d.assign(lk, f"{lk} + {e}"))
            b(*(d.assign(acc, f"{acc} + {e} * {vj}") for acc, vj in zip(self.products(k, sfx), vs)))

    def softmax_sweep(self, k: int, xv: str) -> None:
        """The one-lane sweep's step: guard, weight, update."""
        self.softmax_guard(k, xv)
        self.b(self.d.define(f"e{k}", "f64", self.d.exp64(f"t{k}")))
        self.softmax_step(k, "", f"e{k}", "j")

    def softmax_tail(self, k: int, b: Block, lanes: int = 1) -> None:
        """After the sweep: the lanes' states merged into lane 0's (each rescaled to the common
        max), the whole-row rule (a row whose max is -inf sums exp(-inf - -inf) = NaN), then
        the program's shift (its row chain from the max, at this row) and the stores."""
        d, g, r = self.d, self.g, self.plan.reductions[k]
        m_node, total, products, steps = r.parts
        accs = [f"l{k}", *self.products(k)]
        if lanes > 1:
            sfxs = self.suffixes(lanes)
            b(d.declare(f"mm{k}", "f64", f"m{k}"))
            b(*(d.assign(f"mm{k}", f"maximum(mm{k}, m{k}{sfx})") for sfx in sfxs[1:]))
            b(*(d.define(f"sc{k}{sfx}", "f64", d.select(f"m{k}{sfx} == mm{k}", "1.0",
                                                          d.exp64(f"m{k}{sfx} - mm{k}")))
                for sfx in sfxs))
            b(*(d.assign(a, " + ".join(f"{a}{sfx} * sc{k}{sfx}" for sfx in sfxs)) for a in accs))
            b(d.assign(f"m{k}", f"mm{k}"))
        with b.block(d.if_(f"m{k} == {d.literal(-np.inf, 'f64')}")):
            b(*(d.assign(a, d.literal(np.nan, "f64")) for a in accs))
        mt = g[m_node].dtype
        b(d.define(f"mx{k}", mt, d.cast(f"m{k}", mt)))
        names = {m_node: f"mx{k}"}
        for c in steps:
            cn = g[c]
            if cn.op in ROW_OPS:
                names[c] = names[cn.inputs[0]]
                continue
            ops = [names[q] if q in names else self.leaf(q, (), ()) for q in cn.inputs]
            b(d.define(f"r{self.num[c]}", cn.dtype, d.cast(d.scalar_form(g, cn)(ops, cn), cn.dtype)))
            names[c] = f"r{self.num[c]}"
        back = f"back{k}"
        b(d.define(back, "f64", d.exp64(f"m{k} - {d.cast(names[steps[-1]], 'f64')}") if steps else "1.0"))
        b(d.assign(self.at(self.out_name[m_node], ["i"], m_node), f"mx{k}"))
        if total is not None:
            b(d.assign(self.at(self.out_name[total], ["i"], total), f"l{k} * {back}"))
        for p, (node, v, divided) in enumerate(products):
            for f in range(self.width(v)):
                value = f"a{k}_{p}_{f} / l{k}" if divided else f"a{k}_{p}_{f} * {back}"
                b(d.assign(self.at(self.out_name[node], ["i", str(f)], node), value))
