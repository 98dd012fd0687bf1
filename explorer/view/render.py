"""Graph -> DOT (the `graphviz` package) -> SVG, with diff colours, clusters and highlights.

Every box carries CSS classes the widget uses without knowing the graph: `gx_<key>` names the
element (key `n5` is node %5, `n7_2` is node %2 in the body of region %7, `g5` a collapsed
group), `gx_added`/`gx_removed`/`gx_changed` its diff status and `gx_hit` a highlight.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import graphviz

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
_FONT = "Helvetica,Arial,sans-serif"


@dataclass(frozen=True)
class Rendered:
    """A drawn graph: the SVG, and how the graph's nodes map onto its elements."""

    svg: str
    element_of: dict[int, str]  # top-level node id -> element key
    words: dict[str, str] = field(default_factory=dict)  # element key -> search words
    note: str = ""  # what was collapsed to keep the picture readable

    def elements(self, node_ids: Iterable[int]) -> list[str]:
        return sorted({self.element_of[i] for i in node_ids if i in self.element_of})

    def _repr_svg_(self) -> str:
        return self.svg


def _body(n: Node) -> Graph | None:
    body = n.attrs.get("body") if n.attrs else None
    return body if isinstance(body, Graph) else None


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
    head = n.op if _body(n) is None else f"{n.op} ({n.attrs.get('kind', 'region')})"
    return f"{head}\n{n.type}\n{_size(n)}"


def node_tooltip(n: Node) -> str:
    args = ", ".join(f"%{i}" for i in n.inputs)
    text = f"%{n.id} = {n.op}({args}) : {n.type} ({_size(n)})"
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
            status: str | None, shape: str = "box", output: bool = False) -> None:
        fill, border = COLOURS.get(status or "", _PLAIN)
        attrs = {"label": _esc(label), "tooltip": _esc(tooltip), "class": self.classes(key, status),
                 "fillcolor": fill, "color": border, "shape": shape}
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
            body = _body(n)
            if body is not None and self.layout.expand_regions:
                exits[n.id], entries[n.id] = self.region(target, n, key, body, status)
                continue
            shape = "ellipse" if n.op == "parameter" else "box3d" if body is not None else "box"
            label = node_label(n) + (f"\n{len(body)} ops" if body is not None else "")
            self.box(target, key, label, node_tooltip(n), status.get(n.id), shape,
                     n.id in g.outputs)
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

    def region(self, target: graphviz.Digraph, n: Node, key: str, body: Graph,
               status: Mapping[int, str]) -> tuple[list[str], list[str]]:
        st = status.get(n.id)
        inner = _body_status(body, st, self.other_bodies.get(key), self.side)
        fill, border = COLOURS.get(st or "", ("#fbfbff", "#7986cb"))
        with target.subgraph(name=f"cluster_{key}") as c:
            c.attr(label=_esc(f"%{n.id} {node_label(n).splitlines()[0]}"), style="rounded,filled",
                   fillcolor=fill, color=HIT_COLOUR if key in self.hits else border,
                   penwidth="3" if key in self.hits else "1.5", fontsize="10",
                   tooltip=_esc(node_tooltip(n)), **{"class": self.classes(key, st)})
            saved = self.other_bodies
            self.other_bodies = _nested_others(key, body, self.other_bodies.get(key))
            exits, _ = self.graph(c, body, f"{key}_", inner,
                                  [Item(f"n{m.id}", (m,)) for m in body.nodes])
            self.other_bodies = saved
        params = [f"{key}_n{p}" for p in body.params]
        outs = [name for o in body.outputs for name in exits[o]]
        return outs, params[: len(n.inputs)]

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


def _nested_others(key: str, body: Graph, other: Graph | None) -> dict[str, Graph | None]:
    """The bodies of the other stage's regions, keyed like ours, one level down."""
    if other is None:
        return {}
    return {f"{key}_n{m.id}": _body(other[m.id]) for m in body.nodes
            if _body(m) is not None and m.id in other}


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
        body = _body(n)
        if body is not None:
            key = f"{prefix}n{n.id}"
            out |= {f"{key}_n{m.id}" for m in body.nodes if matches(node_words(m), query)}
            out |= _body_hits(body, f"{key}_", query)
    return out


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
    others = {f"n{n.id}": _body(other[n.id]) for n in graph.nodes
              if other is not None and _body(n) is not None and n.id in other}
    builder = _Dot(layout, _hit_keys(graph, layout, highlight), side, others)
    builder.graph(builder.dot, graph, "", _statuses(graph, other, side), layout.items)
    svg = clean_svg(builder.dot.pipe(format="svg", encoding="utf-8"))
    words = {it.key: " ".join(node_words(n) for n in it.nodes) for it in layout.items}
    if layout.expand_regions:
        words.update(_body_words(graph, ""))
    return Rendered(svg, dict(layout.item_of), words, layout.note)


def _body_words(graph: Graph, prefix: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for n in graph.nodes:
        body = _body(n)
        if body is not None:
            key = f"{prefix}n{n.id}"
            out.update({f"{key}_n{m.id}": node_words(m) for m in body.nodes})
            out.update(_body_words(body, f"{key}_"))
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
