"""The pattern-rewrite engine: rules as data, one driver, every firing logged.

A `Rule` pairs a pattern with a replacement function. The pattern says which node shapes to
look at; the function decides, builds the replacement through a `RewriteContext` and returns
the id of the node that replaces the matched root, or `None` for "no match after all".
Captures named in the pattern arrive as keyword arguments (each a `Node`).

API (stable; passes in explorer/passes/ build on it):

    pat(op, *inputs, name=None, attrs=None, where=None, commute=False) -> Pat
        op: an op name, a tuple of names, or None (any op). Inputs, when given, are
        sub-patterns matched position by position (arity must agree); none given = any inputs.
        attrs: {attr: value} that must be equal; where: Node -> bool; commute: a binary
        pattern also tries its inputs swapped. A `name` captures the matched node; a name used
        twice must bind the same node (`pat("mul", var("x"), var("x"))` is x*x).
    var(name=None, where=None) -> Pat              any node
    const(value=None, name=None, where=None) -> Pat
        a `constant` node; with `value`, one whose elements all equal it bit for bit (so
        const(-0.0) does not match +0.0).
    splat(node) -> float | int | bool | None       the single value of a constant, if any
    Rule(name, pattern, fn)                         fn(ctx, **captures) -> int | Node | None
    rewrite(graph, rules, *, prune=False, max_firings=None, stop_after=None)
                                                    -> (Graph, list[Rewrite])
        stop_after=k: the graph after the first k firings (stepping a pass firing by
        firing; the driver is deterministic, so these are the firings the full run logs)
    Rewrite(rule, before, after, source, region="") one firing (re-exported by passes.base);
                                                    region: the body it happened in

    RewriteContext (the `ctx` a replacement gets):
        ctx.root                 the matched root Node
        ctx.node(x) / ctx.type(x) / ctx.users(x) / ctx.is_output(x)   (x: id or Node)
        ctx.emit(op, inputs, attrs=None) -> id   type inferred from the op table; the new
                                                 node inherits the root's source line
        ctx.constant(value, dtype) -> id
        ctx.miss(reason, nodes=None)             say why the rule declines this match (a
                                                 `missed` remark; explorer/ir/remarks.py)

A rule list is a plain list (or tuple) of rules, so rule sets compose with `+`. To make a pass
of one: `explorer.passes.base.RewritePass(name, rules)`; register it with
`gx.passes.register(RewritePass("my-pass", rules))` and it steps like a built-in pass.

Example (x * 1 -> x, for either operand order):

    def drop_one(ctx, x, root):
        return x.id if x.type == root.type else None   # a scalar x would be broadcast

    MUL_ONE = Rule("mul-by-one", pat("mul", var("x"), const(1), name="root", commute=True),
                   drop_one)
    graph, log = rewrite(graph, [MUL_ONE])

Driver semantics: nodes are visited in topological order, then again whenever one of their
inputs changed, until no rule fires (a fixed point); `max_firings` guards against rules that
undo each other. A node that is not replaced keeps its id (its inputs may be redirected); new
nodes get fresh ids above the graph's largest; users and outputs of a replaced root read the
replacement, which must have the root's exact type. Nodes with no users that are not outputs
are not visited. Dead nodes stay in the graph (dce removes them) unless `prune=True`, which
removes the nodes this rewrite made dead. Each firing is logged as `Rewrite(rule,
before=(root, and matched nodes that died with it), after=(new nodes, or the existing node
that took the root's place), source="file:line" of the root)`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .graph import Attrs, Graph, Literal, Node, Type
from .ops import OpError, infer_type
from .remarks import remark


class RewriteError(RuntimeError):
    """A rule misbehaved (wrong result type, a cycle) or rules kept firing without end."""


@dataclass(frozen=True)
class Rewrite:
    """One rule firing: which rule, the node ids it replaced and produced, the user's line.

    `region` says which body the ids are in: "" for the graph itself, else the path of a
    control-flow body ("%7.body", "%7.branches[1]", nested as "%7.body/%3.cond"), whose ids
    are the body's own."""

    rule: str
    before: tuple[int, ...]
    after: tuple[int, ...]
    source: str | None = None
    region: str = ""


# ---------------------------------------------------------------- patterns


@dataclass(frozen=True)
class Pat:
    op: tuple[str, ...] | None = None
    inputs: tuple[Pat, ...] | None = None
    name: str | None = None
    attrs: tuple[tuple[str, Any], ...] = ()
    where: Callable[[Node], bool] | None = None
    commute: bool = False
    value: tuple[Any, ...] | None = None  # (v,) for const(v): a bit-exact splat


def pat(op: str | Sequence[str] | None, *inputs: Pat, name: str | None = None,
        attrs: Mapping[str, Any] | None = None, where: Callable[[Node], bool] | None = None,
        commute: bool = False) -> Pat:
    ops = (op,) if isinstance(op, str) else (tuple(op) if op is not None else None)
    if commute and len(inputs) != 2:
        raise ValueError("commute=True needs exactly two input patterns")
    return Pat(ops, tuple(inputs) if inputs else None, name, tuple((attrs or {}).items()),
               where, commute)


def var(name: str | None = None, where: Callable[[Node], bool] | None = None) -> Pat:
    return Pat(None, None, name, (), where)


def const(value: Any = None, name: str | None = None,
          where: Callable[[Node], bool] | None = None) -> Pat:
    return Pat(("constant",), None, name, (), where, False, None if value is None else (value,))


def splat(node: Node) -> Any:
    """The one value every element of a constant node holds, bit for bit (None if they
    differ, if the constant is empty, or if the node is not a constant)."""
    if node.op != "constant":
        return None
    flat = node.attrs["value"].array.reshape(-1)
    if flat.size == 0:
        return None
    if flat.size > 1:
        raw = np.ascontiguousarray(flat).view(np.uint8).reshape(flat.size, -1)
        if not (raw == raw[0]).all():
            return None
    return flat[0].item()


def _same_value(node: Node, want: Any) -> bool:
    got = splat(node)
    if got is None or isinstance(got, complex) or want is None:
        return False
    if isinstance(got, float) or isinstance(want, float):
        g, w = float(got), float(want)
        if np.isnan(g) or np.isnan(w):
            return bool(np.isnan(g) and np.isnan(w))
        return g == w and bool(np.signbit(g) == np.signbit(w))
    return bool(got == want)


# ---------------------------------------------------------------- rules


ReplaceFn = Callable[..., "int | Node | None"]


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: Pat
    fn: ReplaceFn = field(repr=False)


class RewriteContext:
    """What a replacement function may look at and build; see the module docstring."""

    def __init__(self, state: _State) -> None:
        self._s = state
        self.root: Node = None  # type: ignore[assignment]
        self.pending: dict[int, Node] = {}

    def node(self, x: int | Node) -> Node:
        i = x.id if isinstance(x, Node) else x
        return self.pending.get(i) or self._s.nodes[i]

    def type(self, x: int | Node) -> Type:
        return self.node(x).type

    def users(self, x: int | Node) -> tuple[int, ...]:
        return tuple(self._s.users.get(x.id if isinstance(x, Node) else x, ()))

    def is_output(self, x: int | Node) -> bool:
        return self._s.out_count.get(x.id if isinstance(x, Node) else x, 0) > 0

    def emit(self, op: str, inputs: Iterable[int | Node], attrs: Mapping[str, Any] | None = None,
             ) -> int:
        ids = tuple(i.id if isinstance(i, Node) else i for i in inputs)
        a = attrs if isinstance(attrs, Attrs) else Attrs(attrs or {})
        try:
            typ = infer_type(op, [self.type(i) for i in ids], a)
        except OpError as e:
            raise RewriteError(f"rule {self._s.rule!r} on {self.root.describe()} built a bad "
                               f"{op}: {e}") from None
        nid = self._s.fresh()
        self.pending[nid] = Node(nid, op, ids, a, typ, self.root.source)
        return nid

    def constant(self, value: Any, dtype: str) -> int:
        return self.emit("constant", (), {"value": Literal(value, dtype)})

    def miss(self, reason: str, nodes: Iterable[int | Node] | None = None,
             kind: str = "missed") -> None:
        """Say why this rule declines the match it was given (return None after it): a
        remark of this rule on the root (or `nodes`), with the root's source line
        (explorer/ir/remarks.py). The pass's name is filled in by the pipeline."""
        ids = [self.root.id] if nodes is None else \
            [i.id if isinstance(i, Node) else int(i) for i in nodes]
        source = str(self.root.source) if self.root.source is not None else None
        remark(kind, "", self._s.rule, reason, ids, source=source)


# ---------------------------------------------------------------- the driver


class _State:
    """The graph being rewritten, mutable: nodes by id, users, output counts."""

    def __init__(self, g: Graph) -> None:
        self.nodes: dict[int, Node] = dict(g.by_id)
        self.order: list[int] = [n.id for n in g.nodes]
        self.users: dict[int, list[int]] = {k: list(v) for k, v in g.users.items()}
        self.outputs = list(g.outputs)
        self.out_count: dict[int, int] = {}
        for o in g.outputs:
            self.out_count[o] = self.out_count.get(o, 0) + 1
        self.next_id = g.next_id
        self.rule = ""
        self.dead: set[int] = set()  # nodes that no output depends on
        for n in reversed(g.nodes):
            if not self.out_count.get(n.id) and all(u in self.dead for u in self.users[n.id]):
                self.dead.add(n.id)
        self.dead_at_start = set(self.dead)

    def fresh(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def live(self, i: int) -> bool:
        return i not in self.dead

    def bury(self, i: int) -> None:
        """Mark `i` dead if nothing live reads it, and so on up its inputs."""
        stack = [i]
        while stack:
            j = stack.pop()
            if j in self.dead or self.out_count.get(j) or any(
                    u not in self.dead for u in self.users[j]):
                continue
            self.dead.add(j)
            stack.extend(self.nodes[j].inputs)

    def revive(self, i: int) -> None:
        """`i` is read by a live node again: it and its inputs are live."""
        stack = [i]
        while stack:
            j = stack.pop()
            if j in self.dead:
                self.dead.discard(j)
                stack.extend(self.nodes[j].inputs)

    def add(self, n: Node) -> None:
        self.nodes[n.id] = n
        self.order.append(n.id)
        self.users.setdefault(n.id, [])
        for i in n.inputs:
            self.users[i].append(n.id)
            self.revive(i)

    def redirect(self, old: int, new: int) -> list[int]:
        """Make every user (and output) of `old` read `new`; returns the users touched."""
        touched = list(dict.fromkeys(self.users.get(old, ())))
        for u in touched:
            n = self.nodes[u]
            self.nodes[u] = replace(n, inputs=tuple(new if i == old else i for i in n.inputs))
            self.users[new].extend(u for i in n.inputs if i == old)
        self.users[old] = []
        if self.out_count.get(old):
            self.outputs = [new if o == old else o for o in self.outputs]
            self.out_count[new] = self.out_count.get(new, 0) + self.out_count.pop(old)
        self.revive(new)
        self.bury(old)
        return touched


Binding = tuple[dict[str, int], tuple[int, ...]]  # captures, and the op-matched node ids


def _matches(p: Pat, nid: int, s: _State, caps: dict[str, int], inner: tuple[int, ...],
             ) -> Iterator[Binding]:
    """Every way `p` matches node `nid` given the captures so far (a commutative pattern
    can match two ways; the replacement function gets to try each)."""
    n = s.nodes[nid]
    if p.op is not None and n.op not in p.op:
        return
    for k, v in p.attrs:
        if n.attrs.get(k, _MISSING) != v:
            return
    if p.value is not None and not _same_value(n, p.value[0]):
        return
    if p.where is not None and not p.where(n):
        return
    if p.name is not None and caps.get(p.name, nid) != nid:
        return
    if p.inputs is None:
        yield _bind(p, nid, caps, inner)
        return
    if len(p.inputs) != len(n.inputs):
        return
    orders = (n.inputs, n.inputs[::-1]) if p.commute and n.inputs[0] != n.inputs[1] \
        else (n.inputs,)
    for ins in orders:
        for c, i in _match_all(p.inputs, ins, s, caps, inner):
            yield _bind(p, nid, c, i)


def _match_all(pats: tuple[Pat, ...], ids: tuple[int, ...], s: _State, caps: dict[str, int],
               inner: tuple[int, ...]) -> Iterator[Binding]:
    if not pats:
        yield caps, inner
        return
    for c, i in _matches(pats[0], ids[0], s, caps, inner):
        yield from _match_all(pats[1:], ids[1:], s, c, i)


def _bind(p: Pat, nid: int, caps: dict[str, int], inner: tuple[int, ...]) -> Binding:
    if p.name is not None:
        caps = {**caps, p.name: nid}
    if p.op is not None:
        inner = (*inner, nid)
    return caps, inner


_MISSING = object()


def rewrite(graph: Graph, rules: Sequence[Rule], *, prune: bool = False,
            max_firings: int | None = None, stop_after: int | None = None,
            ) -> tuple[Graph, list[Rewrite]]:
    """Apply `rules` to a fixed point (or until `stop_after` firings); returns the graph (the
    same object if nothing fired) and the log of firings. See the module docstring for the
    guarantees."""
    by_op: dict[str, list[Rule]] = {}
    wildcard: list[Rule] = []
    for r in rules:
        for op in r.pattern.op or ():
            by_op.setdefault(op, [])
        if r.pattern.op is None:
            wildcard.append(r)
    for r in rules:  # keep the rule list's order within each op
        for op in by_op:
            if r.pattern.op is None or op in r.pattern.op:
                by_op[op].append(r)
    s = _State(graph)
    ctx = RewriteContext(s)
    log: list[Rewrite] = []
    limit = max_firings if max_firings is not None else 20 * len(graph) + 1000
    work = deque(s.order)
    while work and (stop_after is None or len(log) < stop_after):
        nid = work.popleft()
        root = s.nodes.get(nid)
        if root is None or not s.live(nid):
            continue
        fired = _first_firing(s, ctx, by_op.get(root.op, wildcard), root)
        if fired is None:
            continue
        if len(log) >= limit:
            recent = ", ".join(dict.fromkeys(w.rule for w in log[-20:]))
            raise RewriteError(f"rewriting did not settle after {limit} firings; rules still "
                               f"firing: {recent}")
        rule, new, inner = fired
        log.append(_commit(s, ctx, rule, root, new, inner, work))
    if not log:
        return graph, log
    if prune:
        _prune(s)
    nodes = _topological(s)
    params = [i for i in graph.params if i in s.nodes]
    return Graph(nodes, params, s.outputs, graph.name), log


def _first_firing(s: _State, ctx: RewriteContext, rules: list[Rule], root: Node,
                  ) -> tuple[Rule, int, tuple[int, ...]] | None:
    """The first rule (in list order) and match whose function returns a replacement."""
    for r in rules:
        for caps, inner in _matches(r.pattern, root.id, s, {}, ()):
            s.rule, ctx.root, ctx.pending = r.name, root, {}
            result = r.fn(ctx, **{k: s.nodes[v] for k, v in caps.items()})
            if result is None:
                continue
            new = result.id if isinstance(result, Node) else int(result)
            if new != root.id:
                return r, new, inner
    return None


def _commit(s: _State, ctx: RewriteContext, r: Rule, root: Node, new: int,
            inner: tuple[int, ...], work: deque[int]) -> Rewrite:
    built = _reachable_pending(ctx.pending, new)
    for i in built:
        if root.id in ctx.pending[i].inputs:
            raise RewriteError(f"rule {r.name!r}: a new node reads the root it replaces, "
                               f"{root.describe()}")
        s.add(ctx.pending[i])
    if new not in s.nodes:
        raise RewriteError(f"rule {r.name!r} returned %{new}, which does not exist")
    if s.nodes[new].type != root.type:
        raise RewriteError(f"rule {r.name!r} replaced {root.describe()} of type {root.type} "
                           f"with %{new} of type {s.nodes[new].type}")
    users = s.redirect(root.id, new)
    before = [root.id] + [i for i in reversed(dict.fromkeys(inner))
                          if i != root.id and not s.live(i)]
    work.extendleft(reversed([*built, new, *users]))
    source = str(root.source) if root.source is not None else None
    return Rewrite(r.name, tuple(before), tuple(built) or (new,), source)


def _reachable_pending(pending: dict[int, Node], new: int) -> list[int]:
    """The new nodes the replacement actually uses, in the order they were built."""
    keep: set[int] = set()
    stack = [new]
    while stack:
        i = stack.pop()
        if i in pending and i not in keep:
            keep.add(i)
            stack.extend(pending[i].inputs)
    return [i for i in pending if i in keep]


def _prune(s: _State) -> None:
    """Drop the nodes this rewrite made dead (never parameters), and any dead-from-the-start
    node that reads one of them."""
    gone = {i for i in s.dead - s.dead_at_start if s.nodes[i].op != "parameter"}
    grew = True
    while grew:
        more = {i for i in s.dead_at_start - gone
                if i in s.nodes and any(j in gone for j in s.nodes[i].inputs)}
        grew = bool(more)
        gone |= more
    for i in gone:
        del s.nodes[i]


def _topological(s: _State) -> list[Node]:
    """The nodes in an order where inputs come first: the old order, each new node placed
    just before its first reader (an iterative depth-first walk)."""
    placed: set[int] = set()
    out: list[Node] = []
    for start in s.order:
        if start in placed or start not in s.nodes:
            continue
        stack: list[tuple[int, int]] = [(start, 0)]
        visiting = {start}
        while stack:
            nid, k = stack[-1]
            ins = s.nodes[nid].inputs
            while k < len(ins) and ins[k] in placed:
                k += 1
            if k < len(ins):
                stack[-1] = (nid, k + 1)
                nxt = ins[k]
                if nxt in visiting:
                    raise RewriteError(f"rewriting made a cycle through %{nxt}")
                visiting.add(nxt)
                stack.append((nxt, 0))
                continue
            stack.pop()
            visiting.discard(nid)
            placed.add(nid)
            out.append(s.nodes[nid])
    return out
