// The graphs' overlays and their legend: boxes coloured by time (a profile) or by numerical
// error (trace.numerics()), the slowest nodes outlined and ranked, the markers of nodes with a
// missed remark, and the selected box. Python holds the choices (show_heat, colour_by,
// heat_scale, show_missed, selected_node); this draws them.

import { h } from "./dom";
import { formatSeconds } from "./format";
import { boxErrors, boxKeys, boxOf, boxSeconds, ERROR_DECADES, ERROR_STOPS, errorLevel, type HeatCell, heatGradient, HEAT_STOPS, hottest, LOG_DECADES, markTop, type Paint, paintHeat, paintLevels, topNodes } from "./heat";
import { forStage, shareText, shortLine } from "./measured";
import { markMissed, missedBoxes } from "./remarks";
import type { Choice, ErrorsData, ProfileData, Traits } from "./schema.gen";

export type Get = <K extends keyof Traits>(k: K) => Traits[K];
export type Choose = <K extends Choice>(k: K, v: Traits[K]) => void;

/** How many of the slowest nodes are outlined. */
export const TOP = 5;

/** What hovering a heated box says: the node (or how many a group sums), its time and share. */
export function heatTip(p: ProfileData): (key: string, cell: HeatCell, label: string) => string {
  const rows = new Map(p.rows.map((r) => [`n${r.node}`, r]));
  return (key, cell, label) => {
    const r = rows.get(key);
    const what = r ? `${r.name} (${r.kind})` + (r.source ? `\n${shortLine(r.source)}` : "") : `${label ? `${label}: ` : ""}${cell.nodes} timed node${cell.nodes > 1 ? "s" : ""}`;
    return `${what}\n${formatSeconds(cell.seconds)} · ${shareText(cell.seconds, p.total)} of stage ${p.stage} ${p.stage_name} on ${p.backend}`;
  };
}

/** An error as the legend and hover texts print it. */
export function formatError(e: number | null): string {
  return e === null ? "not finite" : e === 0 ? "0 (exact)" : e.toExponential(1);
}

/** The slowest nodes' boxes in a pane: box key -> the ranks (1 = slowest) of the nodes it draws. */
export function topRanks(p: ProfileData, drawn: Set<string>, groups: Record<string, number[]>, n = TOP): Map<string, number[]> {
  const out = new Map<string, number[]>();
  topNodes(p, n).forEach((id, k) => {
    const key = boxOf(id, drawn, groups);
    if (key) out.set(key, [...(out.get(key) ?? []), k + 1]);
  });
  return out;
}

function stagesAround<T extends { stage: number }>(items: T[] | null | undefined, index: number): [T | null, T | null] {
  return [index > 0 ? forStage(items, index - 1) : null, forStage(items, index)];
}

/** What the boxes are coloured by: the user's choice where it was measured, else what was. */
export function colourMode(get: Get, index: number): "time" | "error" | null {
  const time = stagesAround(get("profiles"), index).some((x) => x);
  const error = stagesAround(get("errors"), index).some((x) => x);
  const want = get("colour_by") ?? "time";
  if (want === "error" && error) return "error";
  return time ? "time" : error ? "error" : null;
}

export interface PaneGraph {
  svg: SVGSVGElement | null;
  canvas: HTMLElement;
  groups: Record<string, number[]>;
  side: "before" | "after";
}

/** Draw the overlays on both panes (the whole pass's graphs only: a firing's intermediate
 * graphs were never measured). Time is scaled to each pane's hottest box (its stage's own
 * profile: two profiles need not be alike); error, an absolute figure, over six decades
 * below the largest of either pane. `legend` gets the scale's figures. */
export function applyOverlay(get: Get, panes: [PaneGraph, PaneGraph], stale: boolean, legend: HTMLElement | null): void {
  const index = get("index");
  const on = get("show_heat") !== false && !stale && (get("shown_firing") ?? -1) < 1;
  const mode = on ? colourMode(get, index) : null;
  const scaleText = legend?.querySelector(".gx-overlay-scale");
  if (mode === "time") {
    const scale = get("heat_scale") ?? "hottest";
    const measured = stagesAround(get("profiles"), index).map((p, k) => (p && panes[k].svg ? { p, cells: boxSeconds(p, panes[k].groups), drawn: boxKeys(panes[k].svg) } : null));
    const tops = measured.map((m) => (m ? hottest(m.cells, m.drawn) : 0));
    panes.forEach((pane, k) => {
      const m = measured[k];
      if (!pane.svg) return;
      paintHeat(pane.svg, m?.cells ?? null, m ? heatTip(m.p) : () => "", tops[k], scale);
      markTop(pane.svg, m ? topRanks(m.p, boxKeys(pane.svg, "all"), pane.groups) : new Map());
      pane.canvas.classList.toggle("gx-heated", !!m);
    });
    const low = (t: number) => (t < 1e-6 ? `${(t * 1e9).toFixed(0)} ns` : formatSeconds(t));
    const range = (top: number) => (scale === "log" ? `${low(top / 10 ** LOG_DECADES)} → ${formatSeconds(top)}` : `0 → ${formatSeconds(top)}`);
    const each = tops.map((t, k) => (measured[k] ? `${index > 0 ? (k ? "after " : "before ") : ""}${range(t)}` : "")).filter(Boolean);
    if (scaleText) scaleText.textContent = `${scale === "log" ? "log, " : ""}to each stage's hottest box: ${each.join(" · ")}`;
  } else if (mode === "error") {
    const measured = stagesAround(get("errors"), index).map((e, k) => (e && panes[k].svg ? { e, cells: boxErrors(e.nodes, panes[k].groups), drawn: boxKeys(panes[k].svg) } : null));
    let top = 0;
    for (const m of measured) for (const [key, v] of m?.cells ?? []) if (m!.drawn.has(key) && v !== null && v > top) top = v;
    panes.forEach((pane, k) => {
      const m = measured[k];
      if (!pane.svg) return;
      markTop(pane.svg, new Map());
      pane.canvas.classList.toggle("gx-heated", !!m);
      if (!m) return void paintLevels(pane.svg, null);
      const paints = new Map<string, Paint>();
      for (const [key, v] of m.cells) paints.set(key, { level: errorLevel(v, top), tip: errorTip(key, v, m.e) });
      paintLevels(pane.svg, paints, ERROR_STOPS);
    });
    if (scaleText) scaleText.textContent = top > 0 ? `log: ${formatError(top / 10 ** ERROR_DECADES)} → ${formatError(top)} (the largest)` : "every node exact";
  } else {
    for (const pane of panes) {
      if (!pane.svg) continue;
      paintLevels(pane.svg, null);
      markTop(pane.svg, new Map());
      pane.canvas.classList.remove("gx-heated");
    }
  }
  const remarks = stale ? [] : (get("remarks") ?? []);
  const show = get("show_missed") !== false;
  for (const pane of panes) if (pane.svg) markMissed(pane.svg, show ? missedBoxes(remarks, pane.side) : new Map());
}

function errorTip(key: string, e: number | null, data: ErrorsData): string {
  const id = /^n(\d+)$/.exec(key)?.[1];
  const what = id !== undefined && id in data.nodes ? `%${id}` : "its worst node";
  return `${what}: largest relative error ${formatError(e)} against float64\nstage ${data.stage} ${data.stage_name}`;
}

/** Mark the selected box (`key`; "" none) in both panes. */
export function selectBoxes(svgs: (SVGSVGElement | null)[], key: string): void {
  for (const svg of svgs) {
    if (!svg) continue;
    for (const el of Array.from(svg.querySelectorAll(".gx-picked"))) el.classList.remove("gx-picked");
    if (key && /^[A-Za-z0-9_]+$/.test(key)) for (const el of Array.from(svg.querySelectorAll(`.gx_${key}`))) el.classList.add("gx-picked");
  }
}

/** The overlay's controls: colour by time or error (where measured), the time scale, the
 * ramp with its figures (filled in by applyOverlay), the outlined top nodes, and the missed
 * markers' switch (where the stage's pass missed something). */
export function overlayLegend(get: Get, choose: Choose, index: number, stale: boolean): HTMLElement | null {
  const mode = colourMode(get, index);
  const missed = stale ? 0 : (get("remarks") ?? []).filter((r) => r.kind === "missed").length;
  if (!mode && !missed) return null;
  const out = h("span", { class: "gx-overlays" });
  if (mode) {
    const box = h("input", { attrs: { type: "checkbox" }, on: { change: () => choose("show_heat", box.checked) } }) as HTMLInputElement;
    box.checked = get("show_heat") !== false;
    const [pb, pa] = stagesAround(get("profiles"), index);
    const [eb, ea] = stagesAround(get("errors"), index);
    const by = h("select", { class: "gx-colour-by", title: "what the boxes are coloured by", on: { change: () => choose("colour_by", by.value as "time" | "error") } }) as HTMLSelectElement;
    if (pb || pa) by.appendChild(h("option", { attrs: { value: "time" } }, "time"));
    if (eb || ea) by.appendChild(h("option", { attrs: { value: "error" } }, "error"));
    by.value = mode;
    const parts: (HTMLElement | string)[] = [h("label", { class: "gx-heat-toggle", title: "colour the boxes (hover one for its figures)" }, box, " colour by"), by];
    if (mode === "time") {
      const scale = h("select", { class: "gx-heat-scale", title: "linear up to the hottest box, or a log scale over three decades below it", on: { change: () => choose("heat_scale", scale.value as "hottest" | "log") } }) as HTMLSelectElement;
      scale.append(h("option", { attrs: { value: "hottest" } }, "to the hottest"), h("option", { attrs: { value: "log" } }, "log"));
      scale.value = get("heat_scale") ?? "hottest";
      const times = [pb ? `before ${formatSeconds(pb.total)}` : "", pa ? `${index > 0 ? "after " : ""}${formatSeconds(pa.total)}` : ""].filter(Boolean).join(" · ");
      const backends = Array.from(new Set([pb?.backend, pa?.backend].filter(Boolean))).join(", ");
      const firing = (get("firing") ?? -1) >= 1 ? " (the whole pass's graphs only)" : "";
      parts.push(scale, h("span", { class: "gx-heat-ramp", attrs: { style: `background:${heatGradient(HEAT_STOPS)}` } }), h("span", { class: "gx-note gx-overlay-scale" }), h("span", { class: "gx-swatch gx-swatch-top", title: `the ${TOP} slowest nodes, ranked (#1 the slowest)` }, `top ${TOP}`), h("span", { class: "gx-note" }, `${times} on ${backends}${firing}`));
    } else {
      const names = [eb, ea].filter((x): x is ErrorsData => !!x).map((x) => x.stage_name).join(" · ");
      parts.push(h("span", { class: "gx-heat-ramp", attrs: { style: `background:${heatGradient(ERROR_STOPS)}` } }), h("span", { class: "gx-note gx-overlay-scale" }), h("span", { class: "gx-note" }, `each node's largest relative error against float64 (trace.numerics): ${names}`));
    }
    out.appendChild(h("span", { class: "gx-heatlegend", title: "time: a node its own, a group the sum of its nodes', a kernel or loop its whole body's; error: a node its own, a group its worst node's" }, ...parts));
  }
  if (missed) {
    const box = h("input", { attrs: { type: "checkbox" }, on: { change: () => choose("show_missed", box.checked) } }) as HTMLInputElement;
    box.checked = get("show_missed") !== false;
    out.appendChild(h("label", { class: "gx-missed-toggle", title: "mark the boxes of nodes the pass left as they were, with a reason (the why tab lists them)" }, box, h("span", { class: "gx-missed-swatch" }, "?"), ` missed (${missed})`));
  }
  return out;
}
