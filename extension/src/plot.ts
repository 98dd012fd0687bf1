// Small inline SVG plots: the live-bytes timeline (the cost tab's, and the memory tab's with
// measured bytes, the peak and each buffer's lifetime), the roofline, and the run tab's bars.
// Elements with a `data-tip` show it on hover (widget.ts).

import { formatBytes, formatSeconds } from "./format";
import { svgEl } from "./dom";
import type { RooflineData, RooflinePoint, TimelineBuffer } from "./schema.gen";

/** The x of step `i` of `n` in a plot `width` wide (one step: the middle). */
export function stepX(i: number, n: number, width: number): number {
  return n > 1 ? (i * width) / (n - 1) : width / 2;
}

/** An SVG path through `values`, scaled into width x height (y grows downwards). */
export function timelinePath(values: number[], width: number, height: number, top?: number): string {
  if (values.length === 0) return "";
  const max = Math.max(top ?? 0, ...values) || 1;
  const dx = values.length > 1 ? width / (values.length - 1) : 0;
  const pts = values.map((v, i) => `${(i * dx).toFixed(1)},${(height - (v / max) * height).toFixed(1)}`);
  return (values.length === 1 ? `M0,${pts[0].split(",")[1]} L${width},${pts[0].split(",")[1]}` : "M" + pts.join(" L"));
}

/** The same for values with gaps (null: not measured there): a new stroke after each gap. */
export function gappedPath(values: (number | null)[], width: number, height: number, top: number): string {
  const max = top || 1;
  const parts: string[] = [];
  let pen = false;
  values.forEach((v, i) => {
    if (v === null || v === undefined) {
      pen = false;
      return;
    }
    const p = `${stepX(i, values.length, width).toFixed(1)},${(height - (v / max) * height).toFixed(1)}`;
    parts.push(`${pen ? "L" : "M"}${p}`);
    pen = true;
  });
  return parts.join(" ");
}

/** Axis ticks for 0..top bytes: multiples of a power-of-two step (whole KiB, MiB or GiB once
 * past them), at most `most` + 1 of them from 0 (explorer/units.py byte_ticks, the same rule). */
export function byteTicks(top: number, most = 5): number[] {
  if (!(top > 0)) return [0];
  let step = 1;
  while (top / step > most) step *= 2;
  const out: number[] = [];
  for (let k = 0; k * step <= top; k++) out.push(k * step);
  return out;
}

/** Ticks for steps 0..n-1: multiples of 1, 2 or 5 times a power of ten, at most `most` + 1. */
export function stepTicks(n: number, most = 6): number[] {
  const last = Math.max(0, n - 1);
  let step = 1;
  search: for (let p = 1; ; p *= 10) {
    for (const f of [1, 2, 5]) {
      step = f * p;
      if (last / step <= most) break search;
    }
  }
  const out: number[] = [];
  for (let k = 0; k * step <= last; k++) out.push(k * step);
  return out;
}

/** Room left of the memory charts for the byte axis (the lifetime bars keep it too, so that
 * both share their steps' x). */
export const BYTE_AXIS = 58;
const STEP_AXIS = 26;

export interface TimelineExtra {
  measured?: (number | null)[]; // measured bytes per step: a red line, with gaps
  measuredLabel?: string;
  peakStep?: number | null; // the planned peak's step, marked
  tips?: string[]; // hover text per step
}

/** Planned bytes along the schedule as an area, the memory limit as a dashed line; with
 * `extra`, the measured bytes, the planned peak marked and a hover text per step. */
export function timelinePlot(values: number[], limit: number | null, width = 420, height = 90, extra: TimelineExtra = {}): SVGElement {
  const pad = 4;
  const left = BYTE_AXIS;
  const svg = svgEl("svg", { class: "gx-timeline", width: width + left + pad, height: height + pad + STEP_AXIS, viewBox: `${-left} ${-pad} ${width + left + pad} ${height + pad + STEP_AXIS}` });
  const measured = extra.measured ?? [];
  const highest = Math.max(limit ?? 0, ...values, ...measured.map((v) => v ?? 0), 1);
  const ticks = byteTicks(highest);
  const top = Math.max(highest, ticks[ticks.length - 1]);
  svg.appendChild(svgEl("rect", { x: 0, y: 0, width, height, class: "gx-plot-bg" }));
  const text = (x: number, y: number, s: string, cls: string, attrs: Record<string, string | number> = {}) => {
    const t = svgEl("text", { x, y, class: cls, ...attrs });
    t.textContent = s;
    svg.appendChild(t);
  };
  // the byte axis: a grid line and a KiB/MiB/GiB label per tick
  const axisY = svgEl("g", { class: "gx-axis gx-axis-bytes" });
  svg.appendChild(axisY);
  for (const v of ticks) {
    const y = height - (v / top) * height;
    axisY.appendChild(svgEl("line", { x1: 0, x2: width, y1: y, y2: y, class: "gx-grid" }));
    axisY.appendChild(svgEl("line", { x1: -3, x2: 0, y1: y, y2: y, class: "gx-tick" }));
    const t = svgEl("text", { x: -5, y: y + 3, class: "gx-axis-label", "text-anchor": "end" });
    t.textContent = formatBytes(v);
    axisY.appendChild(t);
  }
  // the step axis: the schedule's steps
  const axisX = svgEl("g", { class: "gx-axis gx-axis-steps" });
  svg.appendChild(axisX);
  for (const i of stepTicks(values.length)) {
    const x = stepX(i, values.length, width);
    axisX.appendChild(svgEl("line", { x1: x, x2: x, y1: height, y2: height + 3, class: "gx-tick" }));
    const t = svgEl("text", { x, y: height + 13, class: "gx-axis-label", "text-anchor": "middle" });
    t.textContent = String(i);
    axisX.appendChild(t);
  }
  text(width, height + 24, "step", "gx-axis-title", { "text-anchor": "end" });
  const area = timelinePath(values, width, height, top);
  if (area) {
    svg.appendChild(svgEl("path", { d: `${area} L${width},${height} L0,${height} Z`, class: "gx-plot-area" }));
    svg.appendChild(svgEl("path", { d: area, class: "gx-plot-line" }));
  }
  if (measured.some((v) => v !== null && v !== undefined)) {
    svg.appendChild(svgEl("path", { d: gappedPath(measured, width, height, top), class: "gx-plot-measured" }));
  }
  if (limit) {
    const y = height - (limit / top) * height;
    svg.appendChild(svgEl("line", { x1: 0, x2: width, y1: y, y2: y, class: "gx-plot-limit" }));
  }
  const peak = Math.max(0, ...values);
  if (extra.peakStep !== undefined && extra.peakStep !== null) {
    const x = stepX(extra.peakStep, values.length, width);
    svg.appendChild(svgEl("line", { x1: x, x2: x, y1: 0, y2: height, class: "gx-plot-peak" }));
  }
  const tips = extra.tips ?? [];
  if (tips.length) {
    const half = values.length > 1 ? width / (values.length - 1) / 2 : width / 2;
    tips.forEach((tip, i) => {
      const x = Math.max(0, stepX(i, values.length, width) - half);
      const col = svgEl("rect", { x, y: 0, width: Math.min(width, stepX(i, values.length, width) + half) - x, height, class: "gx-plot-col" });
      col.setAttribute("data-tip", tip);
      svg.appendChild(col);
    });
  }
  const label = svgEl("text", { x: 4, y: 12, class: "gx-plot-label" });
  const most = Math.max(0, ...measured.map((v) => v ?? 0));
  label.textContent = `peak ${formatBytes(peak)}` + (measured.length && most ? ` planned · ${formatBytes(most)} ${extra.measuredLabel ?? "measured"}` : "");
  svg.appendChild(label);
  return svg;
}

/** Each buffer's lifetime as a bar along the same steps as timelinePlot (the `max` largest,
 * in the order they are made); those live at step `at` (the peak) drawn in orange. */
export function lifetimeBars(buffers: TimelineBuffer[], steps: number, at: number | null, tip: (b: TimelineBuffer) => string, width = 420, max = 40): SVGElement {
  const pad = 4;
  const shown = [...buffers].sort((a, b) => b[3] - a[3]).slice(0, max).sort((a, b) => a[4] - b[4] || b[3] - a[3]);
  const row = Math.max(7, Math.min(16, Math.floor(160 / Math.max(1, shown.length)))); // few buffers: thicker bars
  const height = Math.max(row, shown.length * row);
  const left = BYTE_AXIS; // (the timeline's byte axis: the same steps at the same x)
  const svg = svgEl("svg", { class: "gx-lifetimes", width: width + left + pad, height: height + 2 * pad, viewBox: `${-left} ${-pad} ${width + left + pad} ${height + 2 * pad}` });
  svg.appendChild(svgEl("rect", { x: 0, y: 0, width, height, class: "gx-plot-bg" }));
  const half = steps > 1 ? width / (steps - 1) / 2 : width / 2;
  shown.forEach((b, k) => {
    const x0 = Math.max(0, stepX(b[4], steps, width) - half);
    const x1 = Math.min(width, stepX(b[5], steps, width) + half);
    const live = at !== null && b[4] <= at && at <= b[5];
    const bar = svgEl("rect", { x: x0, y: k * row + 1, width: Math.max(1, x1 - x0), height: row - 2, class: live ? "gx-life gx-life-peak" : "gx-life" });
    bar.setAttribute("data-tip", tip(b));
    svg.appendChild(bar);
  });
  if (at !== null) {
    const x = stepX(at, steps, width);
    svg.appendChild(svgEl("line", { x1: x, x2: x, y1: 0, y2: height, class: "gx-plot-peak" }));
  }
  return svg;
}

/** Bar lengths in [0, 1] relative to the largest value; missing values give 0. */
export function barFractions(values: (number | null)[]): number[] {
  const max = Math.max(0, ...values.map((v) => v ?? 0));
  return values.map((v) => (v && max > 0 ? v / max : 0));
}

// ------------------------------------------------------------ log-log axes and the roofline

export interface Extent {
  lo: number;
  hi: number;
}

/** Whole decades holding every value with room around it (a factor `pad` each side). */
export function logExtent(values: number[], pad = 2): Extent {
  const ok = values.filter((v) => v > 0 && Number.isFinite(v));
  if (!ok.length) return { lo: 1, hi: 10 };
  const lo = 10 ** Math.floor(Math.log10(Math.min(...ok) / pad));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...ok) * pad));
  return { lo, hi: hi > lo ? hi : lo * 10 };
}

/** Where `v` falls on a log axis `size` long (0 at e.lo). */
export function logPos(v: number, e: Extent, size: number): number {
  return (Math.log10(v / e.lo) / Math.log10(e.hi / e.lo)) * size;
}

/** The powers of ten from e.lo to e.hi. */
export function decades(e: Extent): number[] {
  const out: number[] = [];
  for (let k = Math.round(Math.log10(e.lo)); k <= Math.round(Math.log10(e.hi)); k++) out.push(10 ** k);
  return out;
}

/** A power of ten as an axis label: 0.01, 1, 100, 10k, 1M, 1e-5. */
export function formatDecade(v: number): string {
  const k = Math.round(Math.log10(v));
  if (k >= 9) return `${10 ** (k - 9)}G`;
  if (k >= 6) return `${10 ** (k - 6)}M`;
  if (k >= 3) return `${10 ** (k - 3)}k`;
  if (k >= -3) return String(Number((10 ** k).toFixed(Math.max(0, -k))));
  return `1e${k}`;
}

/** The roof in data units (FLOPs/byte, GFLOP/s) inside the plot's extents: the bandwidth's
 * slope up to the ridge, then the peak. */
export function roofPoints(peakFlops: number, bandwidth: number, x: Extent, y: Extent): [number, number][] {
  const peak = peakFlops / 1e9;
  const slope = bandwidth / 1e9; // GFLOP/s per FLOP/byte
  const ridge = peak / slope;
  const start = Math.max(x.lo, y.lo / slope);
  const out: [number, number][] = [];
  if (start < ridge && start < x.hi) {
    out.push([start, start * slope]);
    const end = Math.min(ridge, x.hi);
    out.push([end, end * slope]);
  }
  if (ridge < x.hi) {
    if (!out.length) out.push([Math.max(x.lo, ridge), peak]);
    out.push([x.hi, peak]);
  }
  return out;
}

export const KIND_COLOURS: Record<string, string> = { kernel: "#1f77b4", dot: "#d62728", loop: "#2ca02c", xla: "#9467bd" };
const KIND_LABELS: Record<string, string> = { kernel: "fused kernel", dot: "dot (BLAS)", loop: "loop", xla: "jax.jit (XLA), whole" };

/** What hovering a roofline point says. */
export function pointTip(p: RooflinePoint): string {
  const num = (v: number | null, scale: number, digits = 2) => (v === null ? "–" : (v / scale).toFixed(digits));
  const roof = (p.rate !== null && p.bound ? ` · ${((100 * p.rate) / p.bound).toFixed(0)}% of the roof` : "") +
    (p.above ? "\nABOVE THE ROOF, even after measuring the peaks again" : "");
  return `${p.name} (${p.kind === "xla" ? "jax.jit's whole program" : p.kind})` + (p.source ? `\n${p.source}` : "") +
    `\n${num(p.rate, 1e9)} GFLOP/s · ${num(p.bandwidth, 1e9)} GB/s · ${num(p.intensity, 1)} FLOPs/byte` +
    `\n${formatSeconds(p.seconds)}${roof}`;
}

function marker(kind: string, x: number, y: number): SVGElement {
  const colour = KIND_COLOURS[kind] ?? "#555";
  if (kind === "dot") return svgEl("rect", { x: x - 4, y: y - 4, width: 8, height: 8, fill: colour, class: "gx-roof-mark" });
  if (kind === "loop") return svgEl("path", { d: `M${x},${y - 5.5} L${x + 5.5},${y} L${x},${y + 5.5} L${x - 5.5},${y} Z`, fill: colour, class: "gx-roof-mark" });
  if (kind === "xla") {
    const pts = Array.from({ length: 10 }, (_, k) => {
      const r = k % 2 ? 4 : 10;
      const a = (Math.PI / 5) * k - Math.PI / 2;
      return `${(x + r * Math.cos(a)).toFixed(1)},${(y + r * Math.sin(a)).toFixed(1)}`;
    });
    return svgEl("polygon", { points: pts.join(" "), fill: colour, class: "gx-roof-mark gx-roof-star" });
  }
  return svgEl("circle", { cx: x, cy: y, r: 4.5, fill: colour, class: "gx-roof-mark" });
}

/** The points a roofline can place: those with both an intensity and a rate. */
export function placeable(data: RooflineData): RooflinePoint[] {
  return [...data.points, ...(data.xla ? [data.xla] : [])].filter((p) => p.intensity !== null && p.rate !== null && p.intensity > 0 && p.rate > 0);
}

/** The roofline, log-log: FLOPs per byte across, GFLOP/s up; the roof from the machine's
 * measured peaks; a point per kernel, dot and loop (by kind) and jax.jit's program as a star. */
export function rooflinePlot(data: RooflineData, width = 600, height = 340): SVGElement {
  const m = { left: 50, right: 14, top: 12, bottom: 38 };
  const w = width - m.left - m.right;
  const hgt = height - m.top - m.bottom;
  const pts = placeable(data);
  const peak = data.peaks.flops / 1e9;
  const ridge = data.peaks.flops / data.peaks.bandwidth;
  const x = logExtent([...pts.map((p) => p.intensity!), ridge]);
  const y = logExtent([...pts.map((p) => p.rate! / 1e9), peak]);
  const px = (v: number) => m.left + logPos(v, x, w);
  const py = (v: number) => m.top + hgt - logPos(v, y, hgt);
  const svg = svgEl("svg", { class: "gx-roofline", width, height, viewBox: `0 0 ${width} ${height}` });
  svg.appendChild(svgEl("rect", { x: m.left, y: m.top, width: w, height: hgt, class: "gx-plot-bg" }));
  const text = (tx: number, ty: number, s: string, cls: string, extra: Record<string, string | number> = {}) => {
    const t = svgEl("text", { x: tx, y: ty, class: cls, ...extra });
    t.textContent = s;
    svg.appendChild(t);
    return t;
  };
  for (const v of decades(x)) {
    svg.appendChild(svgEl("line", { x1: px(v), x2: px(v), y1: m.top, y2: m.top + hgt, class: "gx-grid" }));
    text(px(v), m.top + hgt + 13, formatDecade(v), "gx-axis-label", { "text-anchor": "middle" });
  }
  for (const v of decades(y)) {
    svg.appendChild(svgEl("line", { x1: m.left, x2: m.left + w, y1: py(v), y2: py(v), class: "gx-grid" }));
    text(m.left - 4, py(v) + 3, formatDecade(v), "gx-axis-label", { "text-anchor": "end" });
  }
  text(m.left + w / 2, height - 6, "arithmetic intensity (FLOPs per byte moved)", "gx-axis-title", { "text-anchor": "middle" });
  text(12, m.top + hgt / 2, "GFLOP/s", "gx-axis-title", { "text-anchor": "middle", transform: `rotate(-90 12 ${m.top + hgt / 2})` });
  const roof = roofPoints(data.peaks.flops, data.peaks.bandwidth, x, y);
  if (roof.length) {
    const line = svgEl("path", { d: "M" + roof.map(([a, b]) => `${px(a).toFixed(1)},${py(b).toFixed(1)}`).join(" L"), class: "gx-roof" });
    line.setAttribute("data-tip", `the roof: this machine's measured peaks\n${peak.toFixed(1)} GFLOP/s, ${(data.peaks.bandwidth / 1e9).toFixed(1)} GB/s, ridge at ${ridge.toFixed(1)} FLOPs/byte\n${data.peaks.how}`);
    svg.appendChild(line);
    const flat = roof.filter(([, b]) => b === peak);
    if (flat.length) text(px(flat[flat.length - 1][0]) - 4, py(peak) - 5, `peak ${peak.toFixed(1)} GFLOP/s`, "gx-roof-label", { "text-anchor": "end" });
    const slope = roof.filter(([a]) => a <= ridge);
    if (slope.length >= 2 && slope[1][0] > slope[0][0]) {
      const [[a0, b0], [a1, b1]] = slope;
      const angle = (Math.atan2(py(b1) - py(b0), px(a1) - px(a0)) * 180) / Math.PI;
      const cx = (px(a0) + px(a1)) / 2;
      const cy = (py(b0) + py(b1)) / 2 - 5;
      text(cx, cy, `${(data.peaks.bandwidth / 1e9).toFixed(1)} GB/s`, "gx-roof-label", { "text-anchor": "middle", transform: `rotate(${angle.toFixed(1)} ${cx.toFixed(1)} ${cy.toFixed(1)})` });
    }
  }
  for (const p of pts) {
    const g = svgEl("g", { class: `gx-roof-pt gx-roof-${p.kind}` });
    g.setAttribute("data-tip", pointTip(p));
    if (p.above) g.appendChild(svgEl("circle", { cx: px(p.intensity!), cy: py(p.rate! / 1e9), r: 9, class: "gx-roof-above" }));
    g.appendChild(marker(p.kind, px(p.intensity!), py(p.rate! / 1e9)));
    if (p.kind === "xla") {
      const t = svgEl("text", { x: px(p.intensity!) + 11, y: py(p.rate! / 1e9) + 4, class: "gx-roof-label" });
      t.textContent = "jax.jit";
      g.appendChild(t);
    }
    svg.appendChild(g);
  }
  const kinds = ["kernel", "dot", "loop", "xla"].filter((k) => pts.some((p) => p.kind === k));
  kinds.forEach((k, i) => {
    const ly = m.top + 12 + i * 15;
    svg.appendChild(marker(k, m.left + 12, ly));
    text(m.left + 22, ly + 4, KIND_LABELS[k], "gx-legend-label");
  });
  return svg;
}
