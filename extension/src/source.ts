// The user's source beside the graphs, linked both ways: a line lights the boxes drawing its
// nodes, a box picks its line. Boxes name their lines in the view's `*_lines` maps.

import { h } from "./dom";
import type { SourceLine } from "./schema.gen";

/** The boxes (element keys) drawing nodes of line `loc`, from a view's key -> lines map. */
export function boxesOfLine(lines: Record<string, string[]>, loc: string): string[] {
  if (!loc) return [];
  return Object.keys(lines).filter((key) => lines[key].includes(loc));
}

/** Every line some box of these maps draws, so the panel can mark the lines on show. */
export function linesOnShow(...maps: Record<string, string[]>[]): Set<string> {
  const out = new Set<string>();
  for (const m of maps) for (const locs of Object.values(m)) for (const loc of locs) out.add(loc);
  return out;
}

/** The element key of a drawn box, group or region: its `gx_<key>` class (render.py). */
export function keyOf(g: Element): string | null {
  const cls = Array.from(g.classList).find((c) => /^gx_(n[0-9][A-Za-z0-9_]*|g[0-9a-f]{10})$/.test(c));
  return cls ? cls.slice(3) : null;
}

/** The element key of the graph box under `el`, if any. */
export function boxKey(el: Element | null): string | null {
  const g = el?.closest?.("g.node, g.cluster");
  return g ? keyOf(g) : null;
}

export interface SourceOptions {
  rows: SourceLine[];
  selected: string;
  onShow: Set<string>; // lines whose nodes the graphs draw now
  rewritten: Map<string, number>; // line -> rewrites of this stage (or firing) at it
  missed?: Map<string, number>; // line -> missed remarks of this stage's pass at it
  onPick: (loc: string) => void;
}

/** The panel: line numbers, text, a mark where rewrites fired; used lines are clickable. */
export function sourcePanel(o: SourceOptions): HTMLElement {
  if (!o.rows.length) return h("p", { class: "gx-empty" }, "no source lines: the graph's nodes name none");
  const rows = o.rows.map((r) => {
    if (r.kind === "file") return h("div", { class: "gx-src-file", title: r.text }, r.text);
    if (r.kind === "fold") return h("div", { class: "gx-src-fold" }, r.text);
    const n = o.rewritten.get(r.loc) ?? 0;
    const m = o.missed?.get(r.loc) ?? 0;
    const cls = ["gx-src-line", r.used ? "gx-src-used" : "", o.onShow.has(r.loc) ? "gx-src-shown" : "", r.loc === o.selected ? "gx-src-selected" : ""];
    const props = r.used
      ? { class: cls.filter(Boolean).join(" "), title: `${r.loc}: click to light its nodes`, attrs: { "data-loc": r.loc }, on: { click: () => o.onPick(r.loc === o.selected ? "" : r.loc) } }
      : { class: cls.filter(Boolean).join(" "), attrs: { "data-loc": r.loc } };
    return h(
      "div",
      props,
      h("span", { class: "gx-src-num" }, r.line),
      h("span", { class: "gx-src-mark", title: n ? `${n} rewrite${n > 1 ? "s" : ""} fired at this line` : "" }, n ? `⟲${n > 1 ? n : ""}` : ""),
      h("span", { class: "gx-src-why", title: m ? `${m} missed remark${m > 1 ? "s" : ""} at this line (the why tab)` : "" }, m ? "?" : ""),
      h("span", { class: "gx-src-text" }, r.text),
    );
  });
  return h("div", { class: "gx-src-body" }, ...rows);
}

/** Scroll the panel (only the panel, never the page) so that the selected line shows. */
export function scrollToSelected(panel: HTMLElement): void {
  const row = panel.querySelector(".gx-src-selected") as HTMLElement | null;
  if (!row) return;
  const top = row.offsetTop - panel.offsetTop;
  if (top < panel.scrollTop || top + row.offsetHeight > panel.scrollTop + panel.clientHeight) {
    panel.scrollTop = Math.max(0, top - panel.clientHeight / 3);
  }
}
