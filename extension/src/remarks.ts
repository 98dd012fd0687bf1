// Remarks (explorer/ir/remarks.py): what the stage's pass did not do, or decided, and why.
// The why tab lists the selected box's remarks (or the stage's, with none selected); boxes of
// nodes with a missed remark carry a marker; a remark's line picks it in the source panel.

import { h } from "./dom";
import { markBoxes, svgEl } from "./heat";
import { shortLine } from "./measured";
import type { RemarkRow } from "./schema.gen";

/** The remarks about box `key` in either pane ("": all of them); explorer/view/payload.py's
 * remarks_at. */
export function remarksAt(rows: RemarkRow[], key: string): RemarkRow[] {
  return rows.filter((r) => !key || r.before_keys.includes(key) || r.after_keys.includes(key));
}

/** The boxes of one pane with missed remarks: key -> those remarks. */
export function missedBoxes(rows: RemarkRow[], side: "before" | "after"): Map<string, RemarkRow[]> {
  const out = new Map<string, RemarkRow[]>();
  for (const r of rows) {
    if (r.kind !== "missed") continue;
    for (const key of side === "before" ? r.before_keys : r.after_keys) out.set(key, [...(out.get(key) ?? []), r]);
  }
  return out;
}

/** A line of text naming a remark: "[fuse] rule: reason". */
export function remarkText(r: RemarkRow): string {
  return `[${r.pass || "?"}] ${r.rule}: ${r.reason}`;
}

/** "%4, %5 in %7.body" */
export function remarkNodes(r: RemarkRow): string {
  const ids = r.nodes.map((i) => `%${i}`).join(", ") || "—";
  return r.region ? `${ids} in ${r.region}` : ids;
}

/** Mark the boxes of `boxes` (missedBoxes) with a "?" badge at their top right corner, whose
 * hover text gives the remarks (empty map: take the markers off). Returns how many. */
export function markMissed(svg: SVGSVGElement, boxes: Map<string, RemarkRow[]>): number {
  return markBoxes(svg, boxes, "gx-missed-badge", "gx-missed", (rows, b) => {
    const lines = rows.slice(0, 4).map((r) => `missed ${remarkText(r)}`);
    if (rows.length > 4) lines.push(`and ${rows.length - 4} more`);
    const badge = svgEl("g", { "data-tip": [...lines, "click the box, then the why tab"].join("\n") });
    const cx = b.x1 - 1;
    const cy = b.y0 + 1;
    badge.append(svgEl("circle", { cx, cy, r: 7 }), svgEl("text", { x: cx, y: cy + 3.5, "text-anchor": "middle" }, "?"));
    return badge;
  });
}

export interface WhyOptions {
  rows: RemarkRow[]; // the stage's
  selected: string; // the selected box's key ("": none)
  selectedLabel: string; // how to name it
  stageName: string;
  traced: boolean; // the traced stage: no pass ran
  onSelect: (key: string) => void; // pick a box ("": back to the stage's list)
  onLine: (loc: string) => void; // show a line in the source panel
}

/** The why tab: the remarks about the selected box, or all of the stage's. */
export function whyPanel(o: WhyOptions): HTMLElement {
  if (o.traced) return h("div", { class: "gx-why" }, h("p", { class: "gx-empty" }, "the traced program: no pass ran yet, so nothing to explain; step to a stage"));
  const rows = remarksAt(o.rows, o.selected);
  const missed = rows.filter((r) => r.kind === "missed").length;
  const counts = `${rows.length} remark${rows.length === 1 ? "" : "s"}${rows.length ? ` (${missed} missed, ${rows.length - missed} analysis)` : ""}`;
  const head = o.selected
    ? h(
        "div",
        { class: "gx-measured-head gx-why-head" },
        h("b", {}, `why: ${o.selectedLabel}`),
        ` · ${counts} of ${o.stageName} `,
        h("button", { class: "gx-zoom gx-why-all", title: "every remark of the stage", on: { click: () => o.onSelect("") } }, `all ${o.rows.length} of the stage`),
      )
    : h(
        "div",
        { class: "gx-measured-head gx-why-head" },
        h("b", {}, `why: what ${o.stageName} did not do, and why`),
        ` · ${counts}`,
        h("span", { class: "gx-hint" }, " · click a box in the graphs (or a row) for its own"),
      );
  if (!rows.length) {
    const none = o.selected
      ? `${o.stageName} made no remark about ${o.selectedLabel}`
      : `${o.stageName} made no remarks: it did all it set out to do here, or says nothing about what it did not`;
    return h("div", { class: "gx-why" }, head, h("p", { class: "gx-empty" }, none));
  }
  const order = [...rows].sort((a, b) => (a.kind === b.kind ? 0 : a.kind === "missed" ? -1 : 1));
  const body = order.map((r) => {
    const key = r.after_keys[0] ?? r.before_keys[0] ?? "";
    const line = r.source
      ? h(
          "a",
          { class: "gx-remark-line", attrs: { href: "#", title: `show ${r.source} in the source panel`, "data-loc": r.source }, on: { click: (ev: Event) => { ev.preventDefault(); ev.stopPropagation(); o.onLine(r.source!); } } },
          shortLine(r.source),
        )
      : h("span", { class: "gx-hint" }, "—");
    return h(
      "tr",
      { class: `gx-remark gx-remark-${r.kind}`, title: key && !o.selected ? "click to select its box" : "", on: { click: () => key && !o.selected && o.onSelect(key) } },
      h("td", {}, h("span", { class: `gx-kindtag gx-kindtag-${r.kind}` }, r.kind)),
      h("td", { class: "gx-code" }, r.pass),
      h("td", { class: "gx-rule" }, r.rule),
      h("td", { class: "gx-nodes" }, remarkNodes(r)),
      h("td", { class: "gx-reason" }, r.reason),
      h("td", { class: "gx-where" }, line, r.line_text ? h("code", { class: "gx-remark-code" }, ` ${r.line_text.trim()}`) : ""),
    );
  });
  const th = h("tr", {}, ...["", "pass", "rule", "nodes", "why", "line"].map((t) => h("th", {}, t)));
  return h("div", { class: "gx-why" }, head, h("div", { class: "gx-scroll" }, h("table", { class: "gx-rewrites gx-remarks" }, h("thead", {}, th), h("tbody", {}, ...body))));
}

/** Lines with missed remarks: "file:line" -> how many (the source panel marks them). */
export function missedLines(rows: RemarkRow[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of rows) if (r.kind === "missed" && r.source) out.set(r.source, (out.get(r.source) ?? 0) + 1);
  return out;
}
