// Small inline SVG plots: the live-bytes timeline and the run tab's bars.

import { formatBytes } from "./format";
import { svgEl } from "./dom";

/** An SVG path through `values`, scaled into width x height (y grows downwards). */
export function timelinePath(values: number[], width: number, height: number, top?: number): string {
  if (values.length === 0) return "";
  const max = Math.max(top ?? 0, ...values) || 1;
  const dx = values.length > 1 ? width / (values.length - 1) : 0;
  const pts = values.map((v, i) => `${(i * dx).toFixed(1)},${(height - (v / max) * height).toFixed(1)}`);
  return (values.length === 1 ? `M0,${pts[0].split(",")[1]} L${width},${pts[0].split(",")[1]}` : "M" + pts.join(" L"));
}

export function timelinePlot(values: number[], limit: number | null, width = 420, height = 90): SVGElement {
  const pad = 4;
  const svg = svgEl("svg", { class: "gx-timeline", width: width + 2 * pad, height: height + 2 * pad, viewBox: `${-pad} ${-pad} ${width + 2 * pad} ${height + 2 * pad}` });
  const top = Math.max(limit ?? 0, ...values, 1);
  svg.appendChild(svgEl("rect", { x: 0, y: 0, width, height, class: "gx-plot-bg" }));
  const area = timelinePath(values, width, height, top);
  if (area) {
    svg.appendChild(svgEl("path", { d: `${area} L${width},${height} L0,${height} Z`, class: "gx-plot-area" }));
    svg.appendChild(svgEl("path", { d: area, class: "gx-plot-line" }));
  }
  if (limit) {
    const y = height - (limit / top) * height;
    svg.appendChild(svgEl("line", { x1: 0, x2: width, y1: y, y2: y, class: "gx-plot-limit" }));
  }
  const peak = Math.max(0, ...values);
  const label = svgEl("text", { x: 4, y: 12, class: "gx-plot-label" });
  label.textContent = `peak ${formatBytes(peak)}`;
  svg.appendChild(label);
  return svg;
}

/** Bar lengths in [0, 1] relative to the largest value; missing values give 0. */
export function barFractions(values: (number | null)[]): number[] {
  const max = Math.max(0, ...values.map((v) => v ?? 0));
  return values.map((v) => (v && max > 0 ? v / max : 0));
}
