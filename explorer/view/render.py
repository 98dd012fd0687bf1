"""Graph -> DOT (the `graphviz` package) -> SVG, with diff colours, clusters and highlights.

Every box carries CSS classes the widget uses without knowing the graph: `gx_<key>` names the
element (key `n5` is node %5, `n7_2` is node %2 in the body of region %7, `g5` a collapsed
group), `gx_added`/`gx_removed`/`gx_changed` its diff status and `gx_hit` a highlight.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import graphviz

from ..ir.control_ops import bodies
from ..ir.graph import Graph, Node, TensorType
from ..units import format_bytes
from .collapse import Item, Layout, plan_layout
from .graphdiff import ADDED, CHANGED, REMOVED, GraphDiff, graph_diff
from .search import match_nodes, matches, node_words

DEFAULT_MAX_NODES = 1200

# status -> (fill, border); also the legend's colours.
COLOURS = {ADDED: ("#c8e6c9", "#2e7d32"), REMOVED: ("#ffcdd2", "#c62828"),
           CHANGED: ("#ffe0b2", "#ef6c00")}
HIT_COLOUR = "#d500f9"
_PLAIN = ("#f7f7f7", "#555555")
OPAQUE = ("#eceff1", "#37474f")  # a primitive without a row: runs through JAX, passes skip it
KERNEL = ("#e1f5fe", "#0277bd")  # a fused kernel's cluster
REGION = ("#fbfbff", "#7986cb")  # any other region's (loops, control flow, calls)
_FONT = "Helvetica,Arial,sans-serif"


@dataclass(frozen=True)
class Rendered:
    """A drawn graph: the SVG, and how the graph's nodes map onto its elements."""

    svg: str
    element_of: dict[int, str]  # top-level node id -> element key
    words: dict[str, str] = field(default_factory=dict)  # element key -> search words
    note: str = ""  # what was collapsed to keep the picture readable
    dot: str = ""  # the DOT source drawn (for other formats: summary.py's PNG)

    def elements(self, node_ids: Iterable[int]) -> list[str]:
        return sorted({self.element_of[i] for i in node_ids if i in self.element_of})

    def _repr_svg_(self) -> str:
        return self.svg


def _regions(n: Node) -> list[tuple[str, str, Graph]]:
    """Every body of a region node: (key suffix, label, graph). The main body's suffix is ""
    (keys n7_2), the others' name them: n7_cond_1, n7_tail_3, n7_branches1_4."""
    if not n.attrs:
        return []
    out = []
    for (attr, index), g in bodies(n):
        if attr == "body" and index is None:
            out.append(("", "body", g))
        else:
            tag = f"{attr}{'' if index is None else index}"
            label = f"branch {index}" if attr == "branches" else attr
            out.append((f"{tag}_", label, g))
    return out


def _esc(text: str) -> str:
    """User text inside a DOT string: backslashes are graphviz escapes, so double them."""
    return graphviz.nohtml(text.replace("\\", "\\\\"))


def _size(n: Node) -> str:
    return format_bytes(n.type.nbytes)


def node_label(n: Node) -> str:
    if n.op == "parameter":
        return f"{n.attrs.get('name', f'%{n.id}')}\n{n.type}\n{_size(n)}"
    if n.op == "constant" and isinstance(n.type, TensorType) and n.type.size == 1:
        value = n.attrs["value"].array.reshape(()).item()
        return f"constant {value:g}\n{n.type}" if isinstance(value, float) else \
            f"constant {value}\n{n.type}"
    if n.op == "opaque":
        return f"{n.attrs.get('opcode', '?')} (opaque)\n{n.type}\n{_size(n)}"
    head = n.op if not _regions(n) else f"{n.op} ({n.attrs.get('kind', 'region')})"
    return f"{head}\n{n.type}\n{_size(n)}"


def node_tooltip(n: Node) -> str:
    args = ", ".join(f"%{i}" for i in n.inputs)
    text = f"%{n.id} = {n.op}({args}) : {n.type} ({_size(n)})"
    if n.op == "opaque":
        text += (f"\nJAX primitive {n.attrs.get('opcode', '?')} without a row: run through JAX; "
                 f"passes leave it alone")
        if n.attrs.get("text"):
            text += f"\n{n.attrs['text']}"
    if n.source is not None:
        where = f"{n.source} in {n.source.function}" if n.source.function else str(n.source)
        text += f"\n{where}"
        if n.source.line_text:
            text += f"\n{n.source.line_text}"
    return text


class _Dot:
    """Writes one graph (and the bodies of its regions) into a graphviz.Digraph."""

    def __init__(self, layout: Layout, hits: set[str], side: str,
                 other_bodies: dict[str, Graph | None]) -> None:
        self.layout = layout
        self.hits = hits
        self.side = side
        self.other_bodies = other_bodies  # element key of a region -> the other stage's body
        self.dot = graphviz.Digraph(
            graph_attr={"rankdir": "TB", "fontname": _FONT, "fontsize": "10", "nodesep": "0.25",
                        "ranksep": "0.3", "bgcolor": "transparent"},
            node_attr={"shape": "box", "style": "rounded,filled", "fontname": _FONT,
                       "fontsize": "10", "margin": "0.08,0.03", "height": "0.3"},
            edge_attr={"color": "#777777", "arrowsize": "0.6"})

    def classes(self, key: str, status: str | None) -> str:
        out = [f"gx_{key}"] + ([f"gx_{status}"] if status else [])
        return " ".join(out + (["gx_hit"] if key in self.hits else []))

    def box(self, target: graphviz.Digraph, key: str, label: str, tooltip: str,
            status: str | None, shape: str = "box", output: bool = False,
            opaque: bool = False) -> None:
        fill, border = COLOURS.get(status or "", OPAQUE if opaque else _PLAIN)
        classes = self.classes(key, status) + (" gx_opaque" if opaque else "")
        attrs = {"label": _esc(label), "tooltip": _esc(tooltip), "class": classes,
                 "fillcolor": fill, "color": border, "shape": shape}
        if opaque:
            attrs["style"] = "rounded,filled,dashed"
        if key in self.hits:
            attrs.update(color=HIT_COLOUR, penwidth="3")
        elif output:
            attrs["penwidth"] = "2"
        target.node(key, **attrs)

    def graph(self, target: graphviz.Digraph, g: Graph, prefix: str,
              status: Mapping[int, str], items: Iterable[Item]) -> tuple[dict, dict]:
        """Draw `g`; returns node id -> DOT names its value leaves from / its inputs enter."""
        exits: dict[int, list[str]] = {}
        entries: dict[int, list[str]] = {}
        for item in items:
            if item.is_group:
                self.group(target, item, status)
                for n in item.nodes:
                    exits[n.id] = [item.key]
                    entries[n.id] = [item.key] * len(n.inputs)
                continue
            n = item.nodes[0]
            key = f"{prefix}{item.key}"
            regions = _regions(n)
            if regions and self.layout.expand_regions:
                exits[n.id], entries[n.id] = self.region(target, n, key, regions, status)
                continue
            shape = "ellipse" if n.op == "parameter" else "box3d" if regions else "box"
            ops = sum(len(b) for _, _, b in regions)
            label = node_label(n) + (f"\n{ops} ops" if regions else "")
            self.box(target, key, label, node_tooltip(n), status.get(n.id), shape,
                     n.id in g.outputs, opaque=n.op == "opaque")
            exits[n.id] = [key]
            entries[n.id] = [key] * len(n.inputs)
        # a collapsed group gets one edge per neighbour, not one per node pair inside it
        groups = {item.key for item in items if item.is_group}
        drawn: set[tuple[str, str]] = set()
        for n in g.nodes:
            for pos, i in enumerate(n.inputs):
                dst = entries[n.id][pos]
                for src in exits[i]:
                    if src == dst or (src, dst) in drawn:
                        continue
                    if src in groups or dst in groups:
                        drawn.add((src, dst))
                    target.edge(src, dst)
        return exits, entries

    def region(self, target: graphviz.Digraph, n: Node, key: str,
               regions: list[tuple[str, str, Graph]],
               status: Mapping[int, str]) -> tuple[list[str], list[str]]:
        """A region as a cluster holding its bodies. The main body's parameters take the
        region's inputs and its results leave it (a loop, scan, kernel, call or while); a
        region without one (a conditional) gets a head box its inputs enter and its users
        read. Other bodies (a while's cond, a loop's tail, each branch) sit beside, labelled."""
        st = status.get(n.id)
        # a region keeps its own fill (a kernel its own colour, never the diff's orange); its
        # diff status is the border's colour
        fill, border = KERNEL if n.op == "kernel" else REGION
        border = COLOURS[st][1] if st in COLOURS else border
        with target.subgraph(name=f"cluster_{key}") as c:
            c.attr(label=_esc(f"%{n.id} {node_label(n).splitlines()[0]}"), style="rounded,filled",
                   fillcolor=fill, color=HIT_COLOUR if key in self.hits else border,
                   penwidth="3" if key in self.hits else "2.5" if st else "1.5", fontsize="10",
                   tooltip=_esc(node_tooltip(n)), **{"class": self.classes(key, st)})
            saved = self.other_bodies
            wired: tuple[list[str], list[str]] | None = None
            for suffix, label, body in regions:
                inner_key = f"{key}_{suffix}"
                other = self.other_bodies.get(inner_key.rstrip("_") if suffix else key)
                inner = _body_status(body, st, other, self.side)
                self.other_bodies = _nested_others(inner_key, body, other)
                main = suffix == "" and len(body.params) >= len(n.inputs)
                if main:
                    exits, _ = self.graph(c, body, inner_key, inner,
                                          [Item(f"n{m.id}", (m,)) for m in body.nodes])
                    params = [f"{inner_key}n{p}" for p in body.params]
                    wired = ([name for o in body.outputs for name in exits[o]],
                             params[: len(n.inputs)])
                else:
                    with c.subgraph(name=f"cluster_{inner_key}") as sub:
                        sub.attr(label=_esc(label), style="rounded,dashed", color=border,
                                 fillcolor="transparent", fontsize="9")
                        self.graph(sub, body, inner_key, inner,
                                   [Item(f"n{m.id}", (m,)) for m in body.nodes])
                self.other_bodies = saved
            if wired is None:
                head = f"{key}_head"
                self.box(c, head, node_label(n), node_tooltip(n), st, "box3d")
                wired = ([head], [head] * len(n.inputs))
        return wired

    def group(self, target: graphviz.Digraph, item: Item, status: Mapping[int, str]) -> None:
        states = {status[n.id] for n in item.nodes if n.id in status}
        st = None if not states else states.pop() if len(states) == 1 else CHANGED
        first = item.nodes[0]
        where = str(first.source) if first.source else f"%{first.id}…%{item.nodes[-1].id}"
        label = f"{where} · {len(item.nodes)} ops\n{item.summary()}"
        tooltip = label + (f"\n{first.source.line_text}" if first.source else "")
        self.box(target, item.key, label, tooltip, st, "box3d")


def _body_status(body: Graph, st: str | None, other: Graph | None, side: str) -> dict[int, str]:
    """A new or deleted region is new or deleted throughout; a kept one is diffed inside."""
    if st in (ADDED, REMOVED):
        return {m.id: st for m in body.nodes}
    return _statuses(body, other, side)


def _other_bodies(prefix: str, graph: Graph, other: Graph | None) -> dict[str, Graph | None]:
    """The bodies of the other stage's regions, keyed as ours are drawn: the main body by its
    region's key (n7), the others by theirs (n7_cond)."""
    if other is None:
        return {}
    out: dict[str, Graph | None] = {}
    for m in graph.nodes:
        if m.id in other and _regions(m):
            theirs = {suffix: b for suffix, _, b in _regions(other[m.id])}
            for suffix, _, _ in _regions(m):
                out[f"{prefix}n{m.id}" + (f"_{suffix.rstrip('_')}" if suffix else "")] = \
                    theirs.get(suffix)
    return out


def _nested_others(key: str, body: Graph, other: Graph | None) -> dict[str, Graph | None]:
    """The bodies of the other stage's regions, keyed like ours, one level down (`key` ends
    in "_")."""
    return _other_bodies(key, body, other)


def _statuses(graph: Graph, other: Graph | None, side: str) -> dict[int, str]:
    if other is None:
        return {}
    d = graph_diff(graph, other) if side == "before" else graph_diff(other, graph)
    return d.status_before() if side == "before" else d.status_after()


def _hit_keys(graph: Graph, layout: Layout, highlight: str | Iterable[int] | None) -> set[str]:
    hits = {layout.item_of[i] for i in match_nodes(graph, highlight) if i in layout.item_of}
    if isinstance(highlight, str) and layout.expand_regions:
        hits |= _body_hits(graph, "", highlight)
    return hits


def _body_hits(graph: Graph, prefix: str, query: str) -> set[str]:
    out: set[str] = set()
    for n in graph.nodes:
        for suffix, _, body in _regions(n):
            key = f"{prefix}n{n.id}_{suffix}"
            out |= {f"{key}n{m.id}" for m in body.nodes if matches(node_words(m), query)}
            out |= _body_hits(body, key, query)
    return out


# DOT source -> SVG: the same picture is drawn again when a stage is revisited, exported or
# shown by a second widget; graphviz's layout is the slow part (seconds at 300 nodes)
_DRAWN: OrderedDict[str, str] = OrderedDict()
_DRAWN_SIZE = 128
_DRAWN_LOCK = threading.Lock()


def _layout(dot: graphviz.Digraph) -> str:
    key = hashlib.sha1(dot.source.encode()).hexdigest()
    with _DRAWN_LOCK:
        if key in _DRAWN:
            _DRAWN.move_to_end(key)
            return _DRAWN[key]
    svg = clean_svg(dot.pipe(format="svg", encoding="utf-8"))
    with _DRAWN_LOCK:
        _DRAWN[key] = svg
        while len(_DRAWN) > _DRAWN_SIZE:
            _DRAWN.popitem(last=False)
    return svg


_SVG_NOISE = re.compile(r'<\?xml[^>]*>\s*|<!DOCTYPE[^>]*>\s*|<!--.*?-->\s*| id="[^"]*"', re.S)


def clean_svg(svg: str) -> str:
    """Drop the prolog, comments and graphviz's ids (two pictures on a page would share them)."""
    return _SVG_NOISE.sub("", svg)


def render(graph: Graph, *, other: Graph | None = None, side: str = "after",
           highlight: str | Iterable[int] | None = None,
           max_nodes: int = DEFAULT_MAX_NODES) -> Rendered:
    """Draw `graph`; with `other` (the stage before, or after when side="before") colour the
    diff; `highlight` is a search query (op, name, %id, source) or a collection of node ids."""
    layout = plan_layout(graph, max_nodes)
    others = _other_bodies("", graph, other)
    builder = _Dot(layout, _hit_keys(graph, layout, highlight), side, others)
    builder.graph(builder.dot, graph, "", _statuses(graph, other, side), layout.items)
    svg = _layout(builder.dot)
    words = {it.key: " ".join(node_words(n) for n in it.nodes) for it in layout.items}
    if layout.expand_regions:
        words.update(_body_words(graph, ""))
    return Rendered(svg, dict(layout.item_of), words, layout.note, builder.dot.source)


def _body_words(graph: Graph, prefix: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for n in graph.nodes:
        for suffix, _, body in _regions(n):
            key = f"{prefix}n{n.id}_{suffix}"
            out.update({f"{key}n{m.id}": node_words(m) for m in body.nodes})
            out.update(_body_words(body, key))
    return out


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
