// The overlay: graph boxes coloured by their measured time (a profile, explorer/measure/
// profile.py) or by their numerical error (trace.numerics()). A node's box carries its own time
// (a kernel or a loop is timed whole), a group's box the sum of its nodes'; an open group's or
// region's frame is drawn in the colour of its sum. Time is scaled to the hottest box drawn
// (linearly, or over three decades: log), so a stage whose time is spread over many nodes
// still shows where it goes; the slowest nodes are outlined and ranked. Error is drawn on a
// log scale of six decades below the largest.

import type { ProfileData } from "./schema.gen";
import { keyOf } from "./source";

export interface HeatCell {
  seconds: number; // per run of the stage
  share: number; // of the stage's profiled time
  nodes: number; // the timed nodes it sums
}

/** Seconds per box key: `n<id>` for a timed node, and each group of `groups` (key -> the
 * graph's own node ids inside it: a view's `*_groups`) with the sum of its timed nodes. */
export function boxSeconds(profile: ProfileData, groups: Record<string, number[]>): Map<string, HeatCell> {
  const own = new Map<number, number>();
  for (const r of profile.rows) own.set(r.node, r.seconds);
  let summed = 0;
  for (const s of own.values()) summed += s;
  const total = profile.total > 0 ? profile.total : summed;
  const cell = (seconds: number, nodes: number): HeatCell => ({ seconds, share: total > 0 ? seconds / total : 0, nodes });
  const out = new Map<string, HeatCell>();
  for (const [id, s] of own) out.set(`n${id}`, cell(s, 1));
  for (const [key, ids] of Object.entries(groups)) {
    let s = 0;
    let n = 0;
    for (const id of ids) {
      const v = own.get(id);
      if (v !== undefined) {
        s += v;
        n += 1;
      }
    }
    if (n) out.set(key, cell(s, n));
  }
  return out;
}

/** Light yellow through orange to dark red (ColorBrewer's YlOrRd): time. */
export const HEAT_STOPS = ["#ffffcc", "#ffeda0", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#bd0026"];
/** Pale blue through purple (ColorBrewer's BuPu): numerical error. */
export const ERROR_STOPS = ["#f7fcfd", "#e0ecf4", "#bfd3e6", "#9ebcda", "#8c96c6", "#8c6bb1", "#88419d", "#6e016b"];

/** How time maps onto the ramp (schema.HeatScale). */
export type HeatScale = "hottest" | "log";
/** The log scale's span below the top: three decades (a thousandth of the hottest is pale). */
export const LOG_DECADES = 3;

/** Where `value` falls on the ramp, in [0, 1], against the largest value `top`: linearly
 * ("hottest": the hottest box is the darkest) or over `decades` below it ("log"). */
export function scaledLevel(value: number, top: number, scale: HeatScale, decades = LOG_DECADES): number {
  if (!(value > 0) || !(top > 0)) return 0;
  const t = scale === "log" ? 1 + Math.log10(value / top) / decades : value / top;
  return Math.min(1, Math.max(0, t));
}

function mix(a: string, b: string, t: number): string {
  const channel = (hex: string, k: number) => parseInt(hex.slice(1 + 2 * k, 3 + 2 * k), 16);
  const out = [0, 1, 2].map((k) => Math.round(channel(a, k) + (channel(b, k) - channel(a, k)) * t));
  return "#" + out.map((v) => v.toString(16).padStart(2, "0")).join("");
}

/** The fill at `level` (in [0, 1]) of a ramp, and whether its text needs to be light. */
export function rampColour(level: number, stops: string[] = HEAT_STOPS): { colour: string; dark: boolean } {
  const t = Math.min(1, Math.max(0, level || 0)) * (stops.length - 1);
  const k = Math.min(stops.length - 2, Math.floor(t));
  return { colour: mix(stops[k], stops[k + 1], t - k), dark: t >= 0.7 * (stops.length - 1) };
}

/** The CSS gradient of a legend's ramp. */
export function heatGradient(stops: string[] = HEAT_STOPS): string {
  return `linear-gradient(to right, ${stops.join(", ")})`;
}

/** A box's paint: its place on the ramp and its hover text. */
export interface Paint {
  level: number;
  tip: string;
}

/** The keys of what a drawn graph draws: its boxes and the frames of open regions (a kernel
 * or loop, timed whole: "nodes"), and with "all" the frames of open groups too (a group's frame
 * sums its boxes: the top of a scale leaves it out, or it would pale them all). */
export function boxKeys(svg: SVGSVGElement | null, which: "nodes" | "all" = "nodes"): Set<string> {
  const out = new Set<string>();
  for (const g of Array.from(svg?.querySelectorAll(which === "all" ? "g.node, g.cluster" : "g.node, g.cluster.gx_region") ?? [])) {
    const key = keyOf(g);
    if (key) out.add(key);
  }
  return out;
}

/** The largest value among `drawn` (boxKeys): the top of a scale. */
export function hottest(cells: Map<string, { seconds: number }> | null, drawn: Set<string>): number {
  let top = 0;
  for (const [key, c] of cells ?? []) if (drawn.has(key) && c.seconds > top) top = c.seconds;
  return top;
}

/** The `n` slowest nodes of a profile, slowest first. */
export function topNodes(profile: ProfileData, n = 5): number[] {
  return [...profile.rows].sort((a, b) => b.seconds - a.seconds || a.node - b.node).filter((r) => r.seconds > 0).slice(0, n).map((r) => r.node);
}

/** The box drawing node `id` (its own box, or its open region's frame), else the smallest
 * drawn group holding it. */
export function boxOf(id: number, drawn: Set<string>, groups: Record<string, number[]>): string | null {
  if (drawn.has(`n${id}`)) return `n${id}`;
  let best: string | null = null;
  for (const [key, ids] of Object.entries(groups)) {
    if (drawn.has(key) && ids.includes(id) && (best === null || ids.length < groups[best].length)) best = key;
  }
  return best;
}

/** Each node's (and drawn group's: its worst node's) error, for colouring by error: node id
 * (string) -> largest relative error, null where not finite. */
export function boxErrors(nodes: Record<string, number | null>, groups: Record<string, number[]>): Map<string, number | null> {
  const out = new Map<string, number | null>();
  for (const [id, e] of Object.entries(nodes)) out.set(`n${id}`, e);
  const worse = (a: number | null | undefined, b: number | null) => (a === null || b === null ? null : Math.max(a ?? 0, b));
  for (const [key, ids] of Object.entries(groups)) {
    let w: number | null | undefined;
    for (const id of ids) if (String(id) in nodes) w = worse(w, nodes[String(id)]);
    if (w !== undefined) out.set(key, w);
  }
  return out;
}

/** The span a log scale of errors shows: `decades` below the largest finite error. */
export const ERROR_DECADES = 6;

export function errorLevel(e: number | null, top: number): number {
  return e === null ? 1 : scaledLevel(e, top, "log", ERROR_DECADES);
}

/** The shape a box or frame is filled by: graphviz draws it first, before its label. */
function shapeOf(g: Element): SVGElement | null {
  for (const el of Array.from(g.querySelectorAll("path, polygon, ellipse"))) {
    if (el.getAttribute("fill") !== "none") return el as SVGElement;
  }
  return null;
}

/** A box's or frame's name as drawn: its label's first line, less the open/closed mark. */
export function labelOf(g: Element): string {
  return (g.querySelector("text")?.textContent ?? "").replace(/^[▸▾]\s*/, "").trim();
}

/** The corners of a box or frame's shape, from its drawn points (no layout needed). */
export type Bounds = { x0: number; y0: number; x1: number; y1: number };

export function shapeBounds(g: Element): Bounds | null {
  const xs: number[] = [];
  const ys: number[] = [];
  for (const el of Array.from(g.querySelectorAll("path, polygon, ellipse"))) {
    const tag = el.tagName.toLowerCase();
    if (tag === "ellipse") {
      const [cx, cy, rx, ry] = ["cx", "cy", "rx", "ry"].map((a) => Number(el.getAttribute(a) ?? 0));
      xs.push(cx - rx, cx + rx);
      ys.push(cy - ry, cy + ry);
    } else if (tag === "polygon" || tag === "path") {
      const nums = (el.getAttribute(tag === "path" ? "d" : "points") ?? "").match(/-?\d+(?:\.\d+)?(?:e-?\d+)?/gi) ?? [];
      for (let k = 0; k + 1 < nums.length; k += 2) {
        xs.push(Number(nums[k]));
        ys.push(Number(nums[k + 1]));
      }
    }
  }
  if (!xs.length) return null;
  return { x0: Math.min(...xs), y0: Math.min(...ys), x1: Math.max(...xs), y1: Math.max(...ys) };
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svgEl(tag: string, attrs: Record<string, string | number>, text = ""): SVGElement {
  const el = document.createElementNS(SVG_NS, tag) as SVGElement;
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text) el.textContent = text;
  return el;
}

/** Decorate the boxes of a drawn graph whose key `marks` holds: `draw(value, bounds)` makes
 * the decoration (class `mark`), appended to the box, which gets class `boxClass`. The earlier
 * decorations of that class go first (an empty map takes them all off). Returns how many. */
export function markBoxes<T>(svg: SVGSVGElement, marks: Map<string, T>, mark: string, boxClass: string, draw: (value: T, b: Bounds) => SVGElement): number {
  for (const el of Array.from(svg.querySelectorAll(`.${mark}`))) el.remove();
  for (const el of Array.from(svg.querySelectorAll(`.${boxClass}`))) el.classList.remove(boxClass);
  let marked = 0;
  for (const g of Array.from(svg.querySelectorAll("g.node, g.cluster"))) {
    const key = keyOf(g);
    const value = key ? marks.get(key) : undefined;
    const b = value !== undefined ? shapeBounds(g) : null;
    if (value === undefined || !b) continue;
    const el = draw(value, b);
    el.classList.add(mark);
    g.appendChild(el);
    g.classList.add(boxClass);
    marked += 1;
  }
  return marked;
}

/** Outline the top boxes: `ranks` maps a box key to the ranks (1 = slowest) of the nodes it
 * draws; each gets a ring around its shape and a tag with its ranks. Returns how many. */
export function markTop(svg: SVGSVGElement, ranks: Map<string, number[]>): number {
  return markBoxes(svg, ranks, "gx-top-mark", "gx-topnode", (r, b) => {
    const label = r.map((k) => `#${k}`).join(" ");
    const ring = svgEl("g", {});
    ring.appendChild(svgEl("rect", { class: "gx-top-ring", x: b.x0 - 4, y: b.y0 - 4, width: b.x1 - b.x0 + 8, height: b.y1 - b.y0 + 8, rx: 6 }));
    const w = 7 * label.length + 6;
    ring.appendChild(svgEl("rect", { class: "gx-top-tag", x: b.x0 - 4, y: b.y0 - 15, width: w, height: 12, rx: 3 }));
    ring.appendChild(svgEl("text", { class: "gx-top-text", x: b.x0 - 1, y: b.y0 - 5.5 }, label));
    return ring;
  });
}

/** Colour the boxes of a drawn graph by `cells` (null: take the overlay off), on `stops`.
 * Boxes with no value of their own (inputs, the nodes inside an open region's body) are
 * drawn plain white. Returns how many boxes were coloured. */
export function paintLevels(svg: SVGSVGElement, cells: Map<string, Paint> | null, stops: string[] = HEAT_STOPS): number {
  let painted = 0;
  for (const g of Array.from(svg.querySelectorAll("g.node, g.cluster"))) {
    const shape = shapeOf(g);
    const wasPainted = g.classList.contains("gx-heat") || g.classList.contains("gx-heat-none");
    if (wasPainted) {
      g.classList.remove("gx-heat", "gx-heat-dark", "gx-heat-none");
      g.removeAttribute("data-tip");
      (g as SVGElement).style.removeProperty("--gx-heat");
      shape?.style.removeProperty("fill");
    }
    if (!cells) continue;
    const key = keyOf(g);
    const cell = key ? cells.get(key) : undefined;
    const frame = g.classList.contains("cluster");
    if (!cell) {
      if (!frame) g.classList.add("gx-heat-none");
      continue;
    }
    const { colour, dark } = rampColour(cell.level, stops);
    g.classList.add("gx-heat");
    if (frame) (g as SVGElement).style.setProperty("--gx-heat", colour);
    else {
      shape?.style.setProperty("fill", colour);
      if (dark) g.classList.add("gx-heat-dark");
    }
    g.setAttribute("data-tip", cell.tip);
    painted += 1;
  }
  return painted;
}

/** Colour the boxes by their time (`cells`), against the hottest box `top` on `scale`, each
 * with a hover text from `tip`. Returns how many boxes were coloured. */
export function paintHeat(svg: SVGSVGElement, cells: Map<string, HeatCell> | null, tip: (key: string, cell: HeatCell, label: string) => string, top = 0, scale: HeatScale = "hottest"): number {
  if (!cells) return paintLevels(svg, null);
  const labels = new Map<string, string>();
  for (const g of Array.from(svg.querySelectorAll("g.node, g.cluster"))) {
    const key = keyOf(g);
    if (key) labels.set(key, labelOf(g));
  }
  const paints = new Map<string, Paint>();
  const max = top > 0 ? top : hottest(cells, boxKeys(svg));
  for (const [key, c] of cells) paints.set(key, { level: scaledLevel(c.seconds, max, scale), tip: tip(key, c, labels.get(key) ?? "") });
  return paintLevels(svg, paints);
}
