// The heat overlay: graph boxes coloured by their share of the stage's measured time
// (a profile, explorer/measure/profile.py). A node's box carries its own time (a kernel or a loop is
// timed whole), a group's box the sum of its nodes'; an open group's or region's frame is
// drawn in the colour of its sum.

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

/** Light yellow through orange to dark red (ColorBrewer's YlOrRd). */
export const HEAT_STOPS = ["#ffffcc", "#ffeda0", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#bd0026"];

/** Where a share falls on the ramp, in [0, 1]: the square root spreads the small shares (1%
 * is a tenth of the way, 25% half) so that a stage's few hot boxes stand out from the rest. */
export function heatLevel(share: number): number {
  return Math.sqrt(Math.min(1, Math.max(0, share || 0)));
}

function mix(a: string, b: string, t: number): string {
  const channel = (hex: string, k: number) => parseInt(hex.slice(1 + 2 * k, 3 + 2 * k), 16);
  const out = [0, 1, 2].map((k) => Math.round(channel(a, k) + (channel(b, k) - channel(a, k)) * t));
  return "#" + out.map((v) => v.toString(16).padStart(2, "0")).join("");
}

/** The fill of a box with this share, and whether its text needs to be light to be read. */
export function heatColour(share: number): { colour: string; dark: boolean } {
  const t = heatLevel(share) * (HEAT_STOPS.length - 1);
  const k = Math.min(HEAT_STOPS.length - 2, Math.floor(t));
  return { colour: mix(HEAT_STOPS[k], HEAT_STOPS[k + 1], t - k), dark: t >= 0.75 * (HEAT_STOPS.length - 1) };
}

/** The CSS gradient of the legend's ramp. */
export function heatGradient(): string {
  return `linear-gradient(to right, ${HEAT_STOPS.join(", ")})`;
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

/** Colour the boxes of a drawn graph by `cells` (null: take the overlay off). Boxes with no
 * time of their own (inputs, the nodes inside an open region's body) are drawn plain white;
 * each coloured box gets a hover text from `tip`. Returns how many boxes were coloured. */
export function paintHeat(svg: SVGSVGElement, cells: Map<string, HeatCell> | null, tip: (key: string, cell: HeatCell, label: string) => string): number {
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
    const { colour, dark } = heatColour(cell.share);
    g.classList.add("gx-heat");
    if (frame) (g as SVGElement).style.setProperty("--gx-heat", colour);
    else {
      shape?.style.setProperty("fill", colour);
      if (dark) g.classList.add("gx-heat-dark");
    }
    g.setAttribute("data-tip", tip(key!, cell, labelOf(g)));
    painted += 1;
  }
  return painted;
}
