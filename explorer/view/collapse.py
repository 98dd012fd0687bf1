"""Keep graphs readable at model scale: group nodes by the user's own structure and open only
as many groups as fit a screen.

A node's place in the hierarchy follows the user's calls (`Source.calls`): a function called
from the traced one is a group, and a function called more than once from one place (a loop
over layers) holds one group per call, "layer #0", "layer #1", ... in call order. Named scopes
(`Source.scope`: jitted helpers, equinox / flax modules, `jax.named_scope`) are groups where
they were opened, around or inside the calls. Then the source line (an unrolled Python loop is
one line run many times); the traced function's own lines sit in a group named after it.
Parameters, when there are many, are one "inputs" group, nested by their pytree paths
("params" / "params[0]"). A group with more children than fit is cut: many groups (a long
loop's calls) into blocks of consecutive ones ("layer #0…#5"), many nodes into runs. Region
ops (scan, while, conditional, kernels, split loops) can be opened to show their bodies.

The first view opens groups and regions breadth first while the picture stays within
`budget` boxes (about a screenful); the user's own choices (`opened`: key -> open or not)
override that, and `reveal` opens whatever holds the given nodes (search hits). Keys are
stable across stages (a group's key is a hash of its path), so a choice holds while stepping.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..ir.graph import Call, Graph, Node, Source
from ..ir.ops.regions import bodies

BUDGET = 60  # boxes on the first view
_MANY_PARAMS = 8  # more parameters than this are grouped as "inputs"


@dataclass
class Group:
    """A group of the hierarchy: its path of names, and its children in graph order."""

    path: tuple[str, ...]
    children: list[Group | Node] = field(default_factory=list)
    split: bool = False  # its children were cut into runs: opened only when asked

    @property
    def key(self) -> str:
        return "g" + hashlib.sha1("\x1f".join(self.path).encode()).hexdigest()[:10]

    @property
    def name(self) -> str:
        return "/".join(self.path)

    def nodes(self) -> list[Node]:
        out: list[Node] = []
        for c in self.children:
            out += c.nodes() if isinstance(c, Group) else [c]
        return out

    def summary(self) -> str:
        counts = Counter(n.op for n in self.nodes()).most_common()
        shown = ", ".join(f"{op}×{k}" for op, k in counts[:3])
        return shown + (", …" if len(counts) > 3 else "")


def body_prefix(region_key: str, attr: str, index: int | None) -> str:
    """The key prefix of a body's nodes: 'n7_' for region %7's `body`, 'n7_cond_' for its
    `cond`, 'n7_branches1_' for its second branch."""
    if attr == "body" and index is None:
        return f"{region_key}_"
    return f"{region_key}_{attr}{'' if index is None else index}_"


def region_prefix(path: str) -> str:
    """A Rewrite.region path ('%7.body', '%7.branches[1]', '%7.body/%3.cond') as a key prefix."""
    prefix = ""
    for part in path.split("/"):
        node, _, where = part.partition(".")
        attr, _, index = where.partition("[")
        prefix = body_prefix(f"{prefix}n{node.lstrip('%')}", attr,
                             int(index.rstrip("]")) if index else None)
    return prefix


def count_nodes(graph: Graph) -> int:
    """Nodes including those inside region bodies, at any depth."""
    return sum(1 + sum(count_nodes(b) for _, b in bodies(n)) for n in graph.nodes)


_PYTREE_KEY = re.compile(r"\[[^\]]*\]|\.[^.\[]+|[^.\[]+")


def _param_path(n: Node) -> tuple[str, ...]:
    """"inputs", then the parameter's pytree path prefixes: "params['w'][0]" sits in
    ("inputs", "params", "params['w']")."""
    keys = _PYTREE_KEY.findall(str(n.attrs.get("name", "")))
    return ("inputs",) + tuple("".join(keys[:k]) for k in range(1, len(keys)))


def _call_path(file: str, line: int, function: str, scopes: str,
               calls: tuple[Call, ...]) -> tuple[str | tuple[str, int], ...]:
    """Scope parts and calls in nesting order, then the line. A call is its function's group
    followed by (function, number): the group of this call, kept when there are several."""
    scope = tuple(p for p in scopes.split("/") if p)
    where = f"{file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}"  # zoo.py:31, In[3]:4
    if not calls:  # the traced function's own lines ('mlp.<locals>.model' as 'model')
        function = function.rsplit("<locals>.", 1)[-1]
        return scope + ((function,) if function else ()) + (where,)
    out: list[str | tuple[str, int]] = []
    at = 0
    for c in calls:
        out += scope[at:c.depth]  # named scopes around this call
        at = max(at, c.depth)
        # a module's call is named by its scope (flax's "Block_0"), a jitted `block` by its
        # scope "block": no group for the function then
        module = c.function.partition(" (")[0].endswith(".__call__")
        if not (module or out and isinstance(out[-1], str) and _names(out[-1], c.function)):
            out.append(c.function)
        out.append((c.function, c.number))
    return (*out, *scope[at:], where)


def _names(scope: str, function: str) -> bool:
    """Whether a scope already names a call of `function`: a jitted `block`'s scope is "block"
    (also in the backward pass, where JAX names the transposed jit "block" too), a flax
    module's call `MLP.__call__` is in the scope "MLP"."""
    name, transposed, _ = function.partition(" (transpose)")
    part, part_transposed, _ = scope.partition(" (transpose)")
    return (transposed or not part_transposed) and part in (name, name.split(".")[0],
                                                            name.rsplit(".", 1)[-1])


def _label(part: str | tuple[str, int]) -> str:
    """(function, number) as "layer #3", "layer #3 (transpose)"."""
    if isinstance(part, str):
        return part
    name, number = part
    base, transposed, _ = name.partition(" (transpose)")
    return f"{base} #{number}{transposed}"


def _paths(graph: Graph) -> list[tuple[str, ...]]:
    """Each top-level node's path of group names (its place in the hierarchy)."""
    many = len(graph.params) > _MANY_PARAMS
    where = [None if n.source is None or n.op == "parameter" else _place(n.source)
             for n in graph.nodes]
    raw = {place: _call_path(*place) for place in set(where) if place is not None}
    numbers: dict[tuple[object, ...], set[int]] = {}  # a function's group -> its calls' numbers
    for path in raw.values():
        for k, part in enumerate(path):
            if isinstance(part, tuple):
                numbers.setdefault(path[:k], set()).add(part[1])
    # a function called once in its place needs no group per call
    kept = {place: tuple(_label(p) for k, p in enumerate(path)
                         if isinstance(p, str) or len(numbers[path[:k]]) > 1)
            for place, path in raw.items()}
    return [kept[place] if place is not None else _param_path(n) if many and n.op == "parameter"
            else () for n, place in zip(graph.nodes, where)]


def _place(s: Source) -> tuple[str, int, str, str, tuple[Call, ...]]:
    """What a node's place depends on (nodes of one line in one call share it)."""
    return s.file, s.line, s.function, s.scope, s.calls


def _simplify(g: Group, budget: int) -> Group | Node:
    """Merge chains of single children, drop one-node groups, split groups too wide to show."""
    g.children = [_simplify(c, budget) if isinstance(c, Group) else c for c in g.children]
    while len(g.children) == 1 and isinstance(g.children[0], Group) and g.path:
        only = g.children[0]
        g.path, g.children = only.path, only.children
    if len(g.children) == 1 and g.path:
        return g.children[0]
    if len(g.children) > budget:
        if sum(isinstance(c, Group) for c in g.children) > budget // 2:
            g.children = _blocks(g, budget)  # a loop's calls, a list of parameter dicts
        else:
            g.children, g.split = _runs(g, budget), True
    return g


def _blocks(g: Group, budget: int) -> list[Group | Node]:
    """Children, mostly groups, cut into blocks of consecutive ones named by their first and
    last ("layer #0…#5"): unlike runs of nodes, worth opening in the first view."""
    size = max(2, math.ceil(len(g.children) / max(1, budget // 2)))
    out: list[Group | Node] = []
    for k in range(0, len(g.children), size):
        part = g.children[k:k + size]
        if len(part) == 1:
            out.append(part[0])
            continue
        first, last = (_name(c, len(g.path)) for c in (part[0], part[-1]))
        head, mark, tail = last.rpartition("#")
        label = f"{first}…{mark}{tail}" if mark and first.startswith(head + mark) else \
            f"{first}…{last}"
        block = Group(g.path + (label,))
        for c in part:
            block.children.append(_moved(c, len(g.path), block.path) if isinstance(c, Group)
                                  else c)
        # cut further when that makes progress (a tiny budget blocks all in one)
        out.append(_simplify(block, budget) if budget < len(part) < len(g.children) else block)
    return out


def _name(c: Group | Node, depth: int) -> str:
    return c.path[depth] if isinstance(c, Group) else f"%{c.id}"


def _moved(g: Group, depth: int, under: tuple[str, ...]) -> Group:
    """`g` and the groups inside it with their paths' first `depth` names replaced by
    `under` (a group put into a block)."""
    g.path = under + g.path[depth:]
    for c in g.children:
        if isinstance(c, Group):
            _moved(c, depth, under)
    return g


def _runs(g: Group, budget: int) -> list[Group | Node]:
    """Consecutive single nodes boxed together until the children fit."""
    size = max(2, math.ceil(len(g.children) / max(1, budget // 2)))
    out: list[Group | Node] = []
    run: list[Node] = []

    def flush() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            box = Group(g.path + (f"%{run[0].id}…%{run[-1].id}",), list(run))
            # split further only when that makes progress (a tiny budget boxes all in one)
            out.append(_simplify(box, budget) if len(run) < len(g.children) else box)
        run.clear()

    for c in g.children:
        if isinstance(c, Group):
            flush()
            out.append(c)
            continue
        run.append(c)
        if len(run) >= size:
            flush()
    flush()
    return out if len(out) < len(g.children) else g.children


def hierarchy(graph: Graph, budget: int = BUDGET) -> Group:
    """The graph's nodes as a tree of groups (the root has the empty path)."""
    root = Group(())
    index: dict[tuple[str, ...], Group] = {(): root}
    for n, path in zip(graph.nodes, _paths(graph)):
        for depth in range(1, len(path) + 1):
            if path[:depth] not in index:
                index[path[:depth]] = Group(path[:depth])
                index[path[: depth - 1]].children.append(index[path[:depth]])
        index[path].children.append(n)
    out = _simplify(root, budget)
    return out if isinstance(out, Group) else Group((), [out])


@dataclass(frozen=True)
class Box:
    """A node drawn as a box; an open region's bodies are drawn around it."""

    key: str
    node: Node
    open_bodies: tuple[tuple[str, str, Graph, tuple[Entry, ...]], ...] = ()  # (prefix, name, body, entries)


@dataclass(frozen=True)
class Folded:
    """A closed group: one box standing for its nodes."""

    key: str
    group: Group
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class Cluster:
    """An open group: its entries drawn inside a frame named after it."""

    key: str
    group: Group
    entries: tuple[Entry, ...]


Entry = Box | Folded | Cluster


@dataclass(frozen=True)
class Layout:
    entries: tuple[Entry, ...]
    item_of: dict[int, str]  # top-level node id -> key of the box drawing it
    grouped: bool  # drawn with its hierarchy (else every node is its own box)
    boxes: int  # boxes drawn
    note: str


def _region_key_nodes(key: str, n: Node) -> list[tuple[str, str, Graph]]:
    return [(body_prefix(key, attr, idx), attr if idx is None else f"{attr}[{idx}]", b)
            for (attr, idx), b in bodies(n)]


class _Planner:
    """The first view opens a whole level of the hierarchy at a time (breadth first), as far
    as the budget goes, so that it is uniform: every top-level group, or every group one
    level down, and so on. The user's choices then apply on top of that, without moving
    anything else: opening a group shows its children closed, closing one leaves the rest."""

    def __init__(self, opened: Mapping[str, bool], reveal: set[str], budget: int) -> None:
        self.opened, self.reveal, self.budget = opened, reveal, budget
        self.boxes = 0
        self.open: set[str] = set()

    @staticmethod
    def children(c: Group | Node, key: str) -> list[tuple[Group | Node, str]]:
        if isinstance(c, Group):
            prefix = key[: len(key) - len(c.key)]
            return [(x, prefix + (x.key if isinstance(x, Group) else f"n{x.id}"))
                    for x in c.children]
        return [(m, f"{p}n{m.id}") for p, _, b in _region_key_nodes(key, c) for m in b.nodes]

    def first_view(self, top: list[tuple[Group | Node, str]]) -> set[str]:
        """What the first view opens: whole levels while the boxes stay within the budget."""
        boxes, level, out = len(top), top, set()
        while level:
            wanted = [(c, key, kids) for c, key in level
                      if not (isinstance(c, Group) and c.split)
                      and (kids := self.children(c, key))]
            # an open group is replaced by its children; an open region keeps its own box
            extra = sum(len(kids) - isinstance(c, Group) for c, _, kids in wanted)
            if not wanted or boxes + extra > self.budget:
                break
            boxes += extra
            out.update(key for _, key, _ in wanted)
            level = [kid for _, _, kids in wanted for kid in kids]
        return out

    def build(self, level: list[tuple[Group | Node, str]]) -> tuple[Entry, ...]:
        out: list[Entry] = []
        for c, key in level:
            if isinstance(c, Group):
                if key in self.open:
                    out.append(Cluster(key, c, self.build(self.children(c, key))))
                else:
                    self.boxes += 1
                    out.append(Folded(key, c, tuple(c.nodes())))
                continue
            self.boxes += 1
            if key in self.open and bodies(c):
                out.append(Box(key, c, tuple(
                    (p, name, b, self.build([(m, f"{p}n{m.id}") for m in b.nodes]))
                    for p, name, b in _region_key_nodes(key, c))))
            else:
                out.append(Box(key, c))
        return tuple(out)

    def plan(self, top: list[Group | Node]) -> tuple[Entry, ...]:
        level = [(c, c.key if isinstance(c, Group) else f"n{c.id}") for c in top]
        self.open = ((self.first_view(level) | self.reveal
                      | {k for k, v in self.opened.items() if v})
                     - {k for k, v in self.opened.items() if not v})
        return self.build(level)


def _ancestors(root: Group, ids: set[int]) -> set[str]:
    """Keys of the groups holding any of the (top-level) nodes `ids`."""
    out: set[str] = set()

    def walk(g: Group, chain: list[str]) -> None:
        for c in g.children:
            if isinstance(c, Group):
                walk(c, chain + [c.key])
            elif c.id in ids:
                out.update(chain)

    walk(root, [])
    return out


def plan_layout(graph: Graph, budget: int = BUDGET, opened: Mapping[str, bool] | None = None,
                reveal: Iterable[int] = ()) -> Layout:
    """What to draw: every node when the whole graph fits the budget, else its hierarchy with
    as many groups open as fit, the user's choices (`opened`) and `reveal`'s nodes applied."""
    opened = dict(opened or {})
    total = count_nodes(graph)
    grouped = len(graph) > budget
    root = hierarchy(graph, budget) if grouped else Group((), list(graph.nodes))
    shown = set(reveal)
    planner = _Planner(opened, _ancestors(root, shown) | {f"n{i}" for i in shown}, budget)
    entries = planner.plan(root.children)
    item_of: dict[int, str] = {}

    def index(es: Iterable[Entry]) -> None:
        for e in es:
            if isinstance(e, Box):
                item_of[e.node.id] = e.key
            elif isinstance(e, Folded):
                item_of.update({n.id: e.key for n in e.nodes})
            else:
                index(e.entries)

    index(entries)
    if grouped:
        note = (f"{total} ops in {planner.boxes} boxes, grouped by scope, function and line:"
                " click a group to open it")
    elif planner.boxes < total:
        note = f"{total} ops in {planner.boxes} boxes: click a region to open its body"
    else:
        note = ""
    return Layout(entries, item_of, grouped, planner.boxes, note)
