"""Graph -> DOT (the `graphviz` package) -> SVG, with diff colours, clusters and highlights.

Every box carries CSS classes the widget uses without knowing the graph: `gx_<key>` names the
element (key `n5` is node %5, `n7_n2` node %2 in the body of region %7, `n7_cond_n2` in its
`cond`, `g<hash>` a group of the hierarchy), `gx_added`/`gx_removed`/`gx_changed` its diff
status, `gx_hit` a highlight and `gx_toggle` (with `gx_open` when open) a group or region the
user can open or close by clicking.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import graphviz

from ..analysis.cost import node_bytes, node_flops
from ..ir.graph import Graph, Node, TensorType, TupleType, device_types
from ..ir.ops.regions import bodies
from ..ir.sharding import MeshSpec, Sharding
from ..units import format_bytes
from .collapse import BUDGET, Box, Cluster, Entry, Folded, Layout, body_prefix, plan_layout, region_prefix
from .graphdiff import ADDED, CHANGED, REMOVED, GraphDiff, graph_diff
from .search import matches, node_words

DEFAULT_MAX_NODES = BUDGET  # boxes on a graph's first view

# status -> (fill, border); also the legend's colours.
COLOURS = {ADDED: ("#c8e6c9", "#2e7d32"), REMOVED: ("#ffcdd2", "#c62828"),
           CHANGED: ("#ffe0b2", "#ef6c00")}
REGION_COLOUR = ("#e0f2f1", "#00897b")  # kernels, loops and control flow: never a diff colour
OPAQUE_COLOUR = ("#eceff1", "#455a64")  # a JAX primitive without a row, drawn dashed
GROUP_COLOUR = ("#f3f6fb", "#8c9bb5")  # an open group's frame
HIT_COLOUR = "#d500f9"
_PLAIN = ("#f7f7f7", "#555555")
_FONT = "Helvetica,Arial,sans-serif"


@dataclass(frozen=True)
class Rendered:
    """A drawn graph: the SVG, and how the graph's nodes map onto its elements."""

    svg: str
    element_of: dict[int, str]  # top-level node id -> element key
    words: dict[str, str] = field(default_factory=dict)  # element key -> search words
    note: str = ""  # what was grouped to keep the picture readable
    visible: dict[str, str] = field(default_factory=dict)  # any node's key -> its box's key
    lines: dict[str, list[str]] = field(default_factory=dict)  # box key -> its nodes' lines
    groups: dict[str, list[int]] = field(default_factory=dict)  # group key -> top-level ids

    def elements(self, node_ids: Iterable[int], region: str = "") -> list[str]:
        """The boxes drawing these nodes: top-level ids, or ids in the body `region` names
        (a Rewrite.region path); a node inside a closed group or region lights its box."""
        if not region:
            return sorted({self.element_of[i] for i in node_ids if i in self.element_of})
        prefix = region_prefix(region)
        return sorted({self.visible[f"{prefix}n{i}"] for i in node_ids
                       if f"{prefix}n{i}" in self.visible})

    def _repr_svg_(self) -> str:
        return self.svg


def _is_region(n: Node) -> bool:
    return bool(n.attrs) and bool(bodies(n))


def _esc(text: str) -> str:
    """User text inside a DOT string: backslashes are graphviz escapes, so double them."""
    return graphviz.nohtml(text.replace("\\", "\\\\"))


def _size(n: Node) -> str:
    return format_bytes(n.type.nbytes)


def _count(x: int) -> str:
    for unit, scale in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if x >= scale:
            return f"{x / scale:.3g}{unit}"
    return str(x)


def _per_device(n: Node) -> list[TensorType] | None:
    """A sharded node's per-device types, where they differ from its global ones."""
    per = device_types(n)
    whole = list(n.type.elements) if isinstance(n.type, TupleType) else [n.type]
    return per if per and per != whole else None


def _types(n: Node) -> str:
    """The node's global type; a sharded node's per-device type beside it, where it differs."""
    per = _per_device(n)
    return f"{n.type} · per device {', '.join(map(str, per))}" if per else str(n.type)


def _sizes(n: Node) -> str:
    per = _per_device(n)
    return f"{_size(n)} · {format_bytes(sum(t.nbytes for t in per))} per device" if per else \
        _size(n)


def spec_label(s: Sharding, rank: int) -> str:
    """A sharding as a JAX user writes its PartitionSpec: `P("data", None)` (one entry per
    dimension), `P()` for a value whole on every device."""
    if not s.spec:
        return "P() replicated"
    parts = ["None" if not e else f'"{e[0]}"' if len(e) == 1 else
             "(" + ", ".join(f'"{a}"' for a in e) + ")" for e in
             (s.entry(d) for d in range(max(rank, len(s.spec))))]
    return f"P({', '.join(parts)})"


def mesh_label(m: MeshSpec) -> str:
    """`mesh data=4` or `mesh data=2 × model=2`."""
    return "mesh " + " × ".join(f"{name}={size}" for name, size in m.axes)


def _sharding_line(n: Node) -> str:
    s = n.attrs.get("sharding")
    if isinstance(s, Sharding):
        rank = n.type.rank if isinstance(n.type, TensorType) else len(s.spec)
        return f"\n{spec_label(s, rank)}"
    m = n.attrs.get("mesh")
    return f"\n{mesh_label(m)}" if isinstance(m, MeshSpec) else ""


def node_label(n: Node) -> str:
    if n.op == "parameter":
        return f"{n.attrs.get('name', f'%{n.id}')}\n{_types(n)}{_sharding_line(n)}\n{_sizes(n)}"
    if n.op == "constant" and isinstance(n.type, TensorType) and n.type.size == 1:
        value = n.attrs["value"].array.reshape(()).item()
        return f"constant {value:g}\n{n.type}" if isinstance(value, float) else \
            f"constant {value}\n{n.type}"
    if n.op == "opaque":
        return f"{n.attrs.get('opcode', '?')} (opaque)\n{n.type}\n{_size(n)}"
    head = f"{n.op} ({n.attrs.get('kind', 'region')})" if _is_region(n) else n.op
    return f"{head}\n{_types(n)}{_sharding_line(n)}\n{_sizes(n)}"


def _frame_mesh(n: Node) -> str:
    """What an open region's frame adds to its name: the mesh a shard_map runs over, and that
    the shapes inside are one device's."""
    m = n.attrs.get("mesh")
    return f" · {mesh_label(m)} · shapes inside per device" if isinstance(m, MeshSpec) else ""


def _sharding_tip(n: Node) -> str:
    s, m = n.attrs.get("sharding"), n.attrs.get("mesh")
    per = device_types(n)
    text = f"\nper device: {', '.join(map(str, per))}" if per else ""
    if isinstance(s, Sharding):
        rank = n.type.rank if isinstance(n.type, TensorType) else len(s.spec)
        text += f"\nsharding {spec_label(s, rank)} over {mesh_label(s.mesh)}"
        if n.attrs.get("origin"):
            text += f" (from {n.attrs['origin']})"
    elif isinstance(m, MeshSpec):
        specs = [f"{k} {', '.join(map(str, n.attrs[k]))}" for k in ("in_specs", "out_specs")
                 if isinstance(n.attrs.get(k), tuple)]
        text += f"\n{mesh_label(m)}" + "".join(f"\n{t}" for t in specs)
    return text


def node_tooltip(n: Node) -> str:
    args = ", ".join(f"%{i}" for i in n.inputs)
    text = f"%{n.id} = {n.op}({args}) : {n.type} ({_size(n)})" + _sharding_tip(n)
    if n.op == "opaque" and "impl" in n.attrs:
        text += (f"\nJAX primitive {n.attrs.get('opcode', '?')} without a row in the op table:"
                 f" runs through JAX\n{n.attrs.get('text', '')}")
    elif n.op == "opaque":  # an HLO instruction (xla_pipeline, from_hlo): shown, not run
        text += (f"\nHLO {n.attrs.get('opcode', '?')} without a row in the op table: shown, "
                 f"not run\n{n.attrs.get('text', '')}")
    if n.source is not None:
        where = f"{n.source} in {n.source.function}" if n.source.function else str(n.source)
        text += f"\n{where}"
        if n.source.scope:
            text += f" (scope {n.source.scope})"
        if n.source.line_text:
            text += f"\n{n.source.line_text}"
    return text


# the latest graphs' node costs, node id -> (FLOPs, bytes), by the graph's identity (graphs
# are immutable; the graph is kept with them so that its id is not reused meanwhile)
_COSTS: dict[int, tuple[Graph, dict[int, tuple[int, int]]]] = {}


def group_cost(graph: Graph, nodes: Iterable[Node]) -> tuple[int, int]:
    """Summed FLOPs and bytes moved of a group's nodes (the cost model's per-node figures)."""
    if id(graph) not in _COSTS:
        while len(_COSTS) >= 64:
            _COSTS.pop(next(iter(_COSTS)))
        _COSTS[id(graph)] = (graph, {})
    costs = _COSTS[id(graph)][1]
    flops = moved = 0
    for n in nodes:
        if n.id not in costs:
            costs[n.id] = (node_flops(graph, n), node_bytes(graph, n))
        f, b = costs[n.id]
        flops += f
        moved += b
    return flops, moved


def _other_bodies(n: Node, other: Graph | None) -> dict[tuple[str, int | None], Graph]:
    if other is None or n.id not in other or other[n.id].op != n.op:
        return {}
    return dict(bodies(other[n.id]))


class _Dot:
    """Writes one graph (groups, and the bodies of open regions) into a graphviz.Digraph."""

    def __init__(self, graph: Graph, hits: set[str], side: str) -> None:
        self.top = graph
        self.hits = hits
        self.side = side
        self.dot = graphviz.Digraph(
            graph_attr={"rankdir": "TB", "fontname": _FONT, "fontsize": "10", "nodesep": "0.25",
                        "ranksep": "0.3", "bgcolor": "transparent"},
            node_attr={"shape": "box", "style": "rounded,filled", "fontname": _FONT,
                       "fontsize": "10", "margin": "0.08,0.03", "height": "0.3"},
            edge_attr={"color": "#777777", "arrowsize": "0.6"})

    def classes(self, key: str, status: str | None, extra: str = "") -> str:
        out = [f"gx_{key}"] + ([f"gx_{status}"] if status else []) + extra.split()
        return " ".join(out + (["gx_hit"] if key in self.hits else []))

    def box(self, target: graphviz.Digraph, key: str, label: str, tooltip: str,
            status: str | None, shape: str = "box", output: bool = False,
            colour: tuple[str, str] | None = None, extra: str = "", dashed: bool = False) -> None:
        fill, border = COLOURS.get(status or "", colour or _PLAIN)
        if colour is REGION_COLOUR:  # a region keeps its colour; its diff status is its border
            fill, border = colour[0], COLOURS[status][1] if status else colour[1]
        attrs = {"label": _esc(label), "tooltip": _esc(tooltip),
                 "class": self.classes(key, status, extra), "fillcolor": fill, "color": border,
                 "shape": shape}
        if dashed:
            attrs["style"] = "rounded,filled,dashed"
        if key in self.hits:
            attrs.update(color=HIT_COLOUR, penwidth="3")
        elif output or (status and colour is REGION_COLOUR):
            attrs["penwidth"] = "2"
        target.node(key, **attrs)

    def draw(self, target: graphviz.Digraph, g: Graph, other: Graph | None,
             entries: Iterable[Entry], status: Mapping[int, str], depth: int,
             exits: dict[int, list[str]], ins: dict[int, list[str]]) -> None:
        """Draw `entries` (nodes of `g`) into `target`; record where each node's value leaves
        from and where its inputs enter."""
        for e in entries:
            if isinstance(e, Folded):
                self.folded(target, g, e, status, depth)
                for n in e.nodes:
                    exits[n.id], ins[n.id] = [e.key], [e.key] * len(n.inputs)
            elif isinstance(e, Cluster):
                self.cluster(target, g, other, e, status, depth, exits, ins)
            elif e.open_bodies:
                exits[e.node.id], ins[e.node.id] = self.region(target, g, other, e, status)
            else:
                self.single(target, g, e, status)
                exits[e.node.id], ins[e.node.id] = [e.key], [e.key] * len(e.node.inputs)

    def single(self, target: graphviz.Digraph, g: Graph, e: Box, status: Mapping[int, str]) -> None:
        n = e.node
        region = _is_region(n)
        shape = "ellipse" if n.op == "parameter" else "box3d" if region else "box"
        label = node_label(n)
        if region:
            inner = sum(len(b) for _, b in bodies(n))
            label += f"\n{inner} ops inside"
        self.box(target, e.key, label, node_tooltip(n) + ("\n(click to open)" if region else ""),
                 status.get(n.id), shape, n.id in g.outputs,
                 REGION_COLOUR if region else OPAQUE_COLOUR if n.op == "opaque" else None,
                 "gx_toggle" if region else "gx_opaque" if n.op == "opaque" else "",
                 dashed=n.op == "opaque")

    def edges(self, target: graphviz.Digraph, g: Graph, exits: dict[int, list[str]],
              ins: dict[int, list[str]]) -> None:
        drawn: set[tuple[str, str]] = set()
        for n in g.nodes:
            for pos, i in enumerate(n.inputs):
                dst = ins[n.id][pos]
                for src in exits[i]:
                    if src != dst and (src, dst) not in drawn:
                        drawn.add((src, dst))  # one edge per pair of boxes
                        target.edge(src, dst)

    def cluster(self, target: graphviz.Digraph, g: Graph, other: Graph | None, e: Cluster,
                status: Mapping[int, str], depth: int, exits: dict, ins: dict) -> None:
        name = "/".join(e.group.path[depth:]) or e.group.name
        with target.subgraph(name=f"cluster_{e.key}") as c:
            c.attr(label=_esc(f"▾ {name}"), style="rounded,filled", fillcolor=GROUP_COLOUR[0],
                   color=HIT_COLOUR if e.key in self.hits else GROUP_COLOUR[1],
                   fontsize="10", labeljust="l",
                   tooltip=_esc(f"{e.group.name} · {len(e.group.nodes())} ops (click to close)"),
                   **{"class": self.classes(e.key, None, "gx_toggle gx_open")})
            self.draw(c, g, other, e.entries, status, len(e.group.path), exits, ins)

    def folded(self, target: graphviz.Digraph, g: Graph, e: Folded, status: Mapping[int, str],
               depth: int) -> None:
        states = [status[n.id] for n in e.nodes if n.id in status]
        kinds = set(states)
        st = None if not kinds else kinds.pop() if len(kinds) == 1 else CHANGED
        name = "/".join(e.group.path[depth:]) or e.group.name
        flops, moved = group_cost(g, e.nodes)
        label = (f"▸ {name} · {len(e.nodes)} ops\n{_count(flops)} FLOPs · "
                 f"{format_bytes(moved)} moved\n{e.group.summary()}")
        if states:
            label += f"\n{len(states)} changed inside"
        tooltip = f"{e.group.name} · {len(e.nodes)} ops (click to open)"
        self.box(target, e.key, label, tooltip, st, "box3d", extra="gx_toggle gx_group")

    def region(self, target: graphviz.Digraph, g: Graph, other: Graph | None, e: Box,
               status: Mapping[int, str]) -> tuple[list[str], list[str]]:
        n = e.node
        st = status.get(n.id)
        others = _other_bodies(n, other)
        fill, border = REGION_COLOUR
        if st:
            border = COLOURS[st][1]
        body_of = dict(bodies(n))
        names = list(body_of)
        direct = len(e.open_bodies) == 1 and len(body_of[names[0]].params) == len(n.inputs)
        with target.subgraph(name=f"cluster_{e.key}") as c:
            c.attr(label=_esc(f"▾ %{n.id} {node_label(n).splitlines()[0]}{_frame_mesh(n)}"),
                   style="rounded,filled",
                   fillcolor=fill, color=HIT_COLOUR if e.key in self.hits else border,
                   penwidth="3" if e.key in self.hits else "1.5", fontsize="10",
                   tooltip=_esc(node_tooltip(n) + "\n(click to close)"),
                   **{"class": self.classes(e.key, st, "gx_toggle gx_open gx_region")})
            if not direct:  # where the region's operands enter and its results leave
                self.box(c, e.key, node_label(n), node_tooltip(n), st, "box", n.id in g.outputs,
                         REGION_COLOUR, "gx_region_head")
            outs: list[str] = []
            params: list[str] = []
            for (prefix, name, body, entries), which in zip(e.open_bodies, names):
                inner = _body_status(body, st, others.get(which), self.side)
                bx: dict[int, list[str]] = {}
                bi: dict[int, list[str]] = {}
                if len(e.open_bodies) == 1:
                    self.draw(c, body, others.get(which), entries, inner, 0, bx, bi)
                    self.edges(c, body, bx, bi)
                else:
                    with c.subgraph(name=f"cluster_{prefix}") as b:
                        b.attr(label=_esc(name), style="rounded,dashed", color=border,
                               fillcolor="white", fontsize="9")
                        self.draw(b, body, others.get(which), entries, inner, 0, bx, bi)
                        self.edges(b, body, bx, bi)
                outs += [k for o in body.outputs for k in bx[o]]
                params += [k for p in body.params for k in bx[p]]
        if direct:
            return outs, params[: len(n.inputs)]
        return [e.key], [e.key] * len(n.inputs)


def _body_status(body: Graph, st: str | None, other: Graph | None, side: str) -> dict[int, str]:
    """A new or deleted region is new or deleted throughout; a kept one is diffed inside."""
    if st in (ADDED, REMOVED):
        return {m.id: st for m in body.nodes}
    return _statuses(body, other, side)


def _statuses(graph: Graph, other: Graph | None, side: str) -> dict[int, str]:
    if other is None:
        return {}
    d = graph_diff(graph, other) if side == "before" else graph_diff(other, graph)
    return d.status_before() if side == "before" else d.status_after()


def _keys(n: Node, key: str) -> Iterable[tuple[str, Node]]:
    """`n`'s key and the keys of every node in its bodies, at any depth."""
    yield key, n
    for (attr, idx), b in bodies(n):
        prefix = body_prefix(key, attr, idx)
        for m in b.nodes:
            yield from _keys(m, f"{prefix}n{m.id}")


def _visible(entries: Iterable[Entry]) -> dict[str, tuple[str, Node]]:
    """Every node's key (top level and bodies) -> the key of the box drawing it, and the node."""
    out: dict[str, tuple[str, Node]] = {}
    for e in entries:
        if isinstance(e, Cluster):
            out.update(_visible(e.entries))
        elif isinstance(e, Folded):
            for n in e.nodes:
                out.update({k: (e.key, m) for k, m in _keys(n, f"n{n.id}")})
        elif e.open_bodies:
            out[e.key] = (e.key, e.node)
            for _, _, _, inner in e.open_bodies:
                out.update(_visible(inner))
        else:
            out.update({k: (e.key, m) for k, m in _keys(e.node, e.key)})
    return out


def _group_members(entries: Iterable[Entry]) -> dict[str, list[int]]:
    """Every group drawn among the graph's own entries, closed or open, -> the ids of the
    nodes inside it (a profile's times add up along these; region bodies are not entered:
    their nodes' ids are another graph's)."""
    out: dict[str, list[int]] = {}
    for e in entries:
        if isinstance(e, Folded):
            out[e.key] = [n.id for n in e.nodes]
        elif isinstance(e, Cluster):
            out[e.key] = [n.id for n in e.group.nodes()]
            out.update(_group_members(e.entries))
    return out


def _group_words(entries: Iterable[Entry]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in entries:
        if isinstance(e, Folded):
            out[e.key] = [e.group.name.lower()]
        elif isinstance(e, Cluster):
            out.update(_group_words(e.entries))
    return out


_SVG_NOISE = re.compile(r'<\?xml[^>]*>\s*|<!DOCTYPE[^>]*>\s*|<!--.*?-->\s*| id="[^"]*"', re.S)


def clean_svg(svg: str) -> str:
    """Drop the prolog, comments and graphviz's ids (two pictures on a page would share them)."""
    return _SVG_NOISE.sub("", svg)


def render(graph: Graph, *, other: Graph | None = None, side: str = "after",
           highlight: str | Iterable[int] | None = None,
           max_nodes: int = DEFAULT_MAX_NODES, opened: Mapping[str, bool] | None = None,
           reveal: Iterable[int] = ()) -> Rendered:
    """Draw `graph`; with `other` (the stage before, or after when side="before") colour the
    diff; `highlight` is a search query (op, name, %id, source) or a collection of node ids.
    At most about `max_nodes` boxes are drawn at first (collapse.py): `opened` holds the
    user's choices of groups and regions to open or close, `reveal` nodes to show."""
    layout = plan_layout(graph, max_nodes, opened, reveal)
    visible = _visible(layout.entries)
    hits = _hits(graph, visible, layout, highlight)
    builder = _Dot(graph, hits, side)
    exits: dict[int, list[str]] = {}
    ins: dict[int, list[str]] = {}
    builder.draw(builder.dot, graph, other, layout.entries, _statuses(graph, other, side), 0,
                 exits, ins)
    builder.edges(builder.dot, graph, exits, ins)
    svg = clean_svg(builder.dot.pipe(format="svg", encoding="utf-8"))
    words = _group_words(layout.entries)
    for box, n in visible.values():
        words.setdefault(box, []).append(node_words(n))
    lines: dict[str, set[str]] = {}
    for box, n in visible.values():
        if n.source is not None and n.source.line > 0:
            lines.setdefault(box, set()).add(str(n.source))
    return Rendered(svg, dict(layout.item_of), {k: " ".join(v) for k, v in words.items()},
                    layout.note, {k: box for k, (box, _) in visible.items()},
                    {k: sorted(v) for k, v in lines.items()}, _group_members(layout.entries))


def _hits(graph: Graph, visible: Mapping[str, tuple[str, Node]], layout: Layout,
          highlight: str | Iterable[int] | None) -> set[str]:
    if highlight is None:
        return set()
    if not isinstance(highlight, str):
        return {layout.item_of[i] for i in highlight if i in layout.item_of}
    return {box for box, n in visible.values() if matches(node_words(n), highlight)}


def search_reveal(graph: Graph, query: str, limit: int = 20) -> set[int]:
    """The top-level nodes to reveal for a search: those matching it, or holding a match in
    their bodies; none when there are more than `limit` (then their groups light up)."""
    found = {k for k, n in _keys_of(graph) if matches(node_words(n), query)} if query else set()
    return found if len(found) <= limit else set()


def _keys_of(graph: Graph) -> Iterable[tuple[int, Node]]:
    for n in graph.nodes:
        for _, m in _keys(n, f"n{n.id}"):
            yield n.id, m


@dataclass(frozen=True)
class DiffView:
    """Two stages side by side, the changes coloured, with a legend (for notebooks)."""

    before: Rendered
    after: Rendered
    diff: GraphDiff

    def _repr_html_(self) -> str:
        counts = self.diff.counts()
        legend = " ".join(
            f'<span style="display:inline-block;margin-right:10px"><span style="display:inline-'
            f'block;width:11px;height:11px;background:{fill};border:1.5px solid {border};'
            f'border-radius:3px"></span> {status} {counts[status]}</span>'
            for status, (fill, border) in COLOURS.items())
        cell = '<div style="flex:1;min-width:0;overflow:auto">{}</div>'
        return (f'<div class="gx-diffview"><div>{legend}</div><div style="display:flex;gap:8px">'
                f"{cell.format(self.before.svg)}{cell.format(self.after.svg)}</div></div>")


def render_diff(before: Graph, after: Graph, *, highlight: str | Iterable[int] | None = None,
                max_nodes: int = DEFAULT_MAX_NODES) -> DiffView:
    return DiffView(
        render(before, other=after, side="before", highlight=highlight, max_nodes=max_nodes),
        render(after, other=before, side="after", highlight=highlight, max_nodes=max_nodes),
        graph_diff(before, after))
