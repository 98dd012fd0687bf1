// The what-if controls: a memory limit (a slider over the limits the split can meet, and a
// text box) and a pipeline editor (passes turned on and off and reordered, from the
// registered list). They write the `memory_limit` and `pipeline` traits; Python plans again
// and answers with the new stages and the `whatif` trait (explorer/view/whatif.py). A page
// with no kernel behind it shows the plan and says that changing it needs one.

import { clear, h } from "./dom";
import { formatBytes, formatSeconds } from "./format";
import type { WhatIf, WhatIfMessage } from "./schema.gen";
import type { Model } from "./types";
import "./whatif.css";

export const STEPS = 200;

/** Slider position `k` (0..STEPS) as a limit from `lo` to `hi`, evenly on a log scale. */
export function limitAt(k: number, lo: number, hi: number): number {
  if (!(hi > lo) || lo <= 0) return Math.max(lo, hi);
  return Math.round(lo * Math.pow(hi / lo, Math.min(Math.max(k, 0), STEPS) / STEPS));
}

/** The slider position of `limit` (clamped to the range). */
export function positionOf(limit: number | null, lo: number, hi: number): number {
  if (limit === null || limit >= hi) return STEPS;
  if (!(hi > lo) || lo <= 0 || limit <= lo) return 0;
  return Math.round((STEPS * Math.log(limit / lo)) / Math.log(hi / lo));
}

/** A slider's limit as the trait takes it: whole KiB, rounded up (never under the range). */
export function sliderText(limit: number): string {
  return limit >= 1024 ? `${Math.ceil(limit / 1024)}KiB` : String(limit);
}

/** A pass spec's name: "split{memory-limit=65536}" -> "split". */
export function passName(spec: string): string {
  return spec.split("{")[0].trim();
}

/** The pipeline with entry `k` moved by `delta` places (-1 up, +1 down). */
export function moved(pipeline: string[], k: number, delta: number): string[] {
  const j = k + delta;
  if (j < 0 || j >= pipeline.length) return pipeline;
  const out = [...pipeline];
  [out[k], out[j]] = [out[j], out[k]];
  return out;
}

/** One line on the plan: its limit, planned peak, split loops and latest run. */
export function planLine(w: WhatIf): string {
  const loops = Object.entries(w.chunks ?? {});
  const parts = [
    `limit ${w.limit === null ? "none" : formatBytes(w.limit)}`,
    `planned peak ${formatBytes(w.planned_peak)}`,
    loops.length ? `split loops ${loops.map(([id, n]) => `%${id} ×${n}`).join(", ")}` : "no split loop",
  ];
  if (w.measured) {
    const peak = w.measured_peak === null ? "peak not measured" : `measured peak ${formatBytes(w.measured_peak)}`;
    parts.push(`${peak}, ${w.seconds === null ? "" : formatSeconds(w.seconds)} (${w.measured})`);
  }
  return parts.join(" · ");
}

export interface WhatIfPanel {
  el: HTMLElement;
  update(): void;
}

export function whatIfPanel(model: Model): WhatIfPanel {
  const summary = h("summary", { class: "gx-whatif-summary" });
  const body = h("div", { class: "gx-whatif-body" });
  const el = h("details", { class: "gx-whatif" }, summary, body) as HTMLDetailsElement;
  let asked = ""; // the pipeline whose limits were asked for
  const live = () => model.get("interactive") !== false;
  const choose = (k: "memory_limit" | "pipeline", v: string | string[]) => {
    model.set(k, v);
    model.save_changes();
  };
  const ask = () => {
    const w: WhatIf | undefined = model.get("whatif");
    const key = JSON.stringify(model.get("pipeline") ?? []);
    if (!el.open || !live() || !w || w.smallest_limit !== null || w.working || asked === key) return;
    asked = key;
    model.send({ type: "whatif" } satisfies WhatIfMessage);
  };
  el.addEventListener("toggle", ask);
  // one text box for the panel's life: a redraw while the user types keeps what is typed
  const commit = () => {
    if (text.value.trim() !== (model.get("memory_limit") ?? "")) choose("memory_limit", text.value.trim());
  };
  const text = h("input", {
    class: "gx-whatif-text",
    attrs: { type: "text", placeholder: "none, 16MiB, 16MiB/device or bytes", spellcheck: "false" },
    on: { change: commit, keydown: (ev: KeyboardEvent) => ev.key === "Enter" && text.blur() }, // blur: change
  }) as HTMLInputElement;

  function limitRow(w: WhatIf, on: boolean): HTMLElement {
    const lo = w.smallest_limit;
    const hi = w.unsplit_limit;
    if (on) text.removeAttribute("disabled");
    else text.setAttribute("disabled", "true");
    if (document.activeElement !== text) text.value = model.get("memory_limit") ?? "";
    const row = h("div", { class: "gx-whatif-row" }, h("span", { class: "gx-whatif-label" }, "memory limit"));
    if (lo !== null && hi !== null && hi > lo) {
      const readout = h("span", { class: "gx-whatif-readout" });
      const slider = h("input", {
        class: "gx-whatif-slider",
        attrs: { type: "range", min: "0", max: String(STEPS), step: "1", ...(on ? {} : { disabled: "true" }) },
        on: {
          input: () => (readout.textContent = formatBytes(limitAt(Number(slider.value), lo, hi))),
          change: () => choose("memory_limit", sliderText(limitAt(Number(slider.value), lo, hi))),
        },
      }) as HTMLInputElement;
      slider.value = String(positionOf(w.limit, lo, hi));
      readout.textContent = w.limit === null ? "none" : formatBytes(w.limit);
      row.append(h("span", { class: "gx-note" }, formatBytes(lo)), slider, h("span", { class: "gx-note" }, formatBytes(hi)), readout);
    }
    row.append(text, h("button", { class: "gx-zoom", title: "no memory limit", attrs: on ? {} : { disabled: "true" }, on: { click: () => choose("memory_limit", "") } }, "none"));
    return row;
  }

  function rangeLine(w: WhatIf): HTMLElement | null {
    if (w.smallest_limit === null) return live() && el.open ? h("div", { class: "gx-note" }, "finding the limits the split can meet…") : null;
    const top = w.unsplit_limit === null ? "" : `; from ${formatBytes(w.unsplit_limit)} nothing needs splitting`;
    return h("div", { class: "gx-note gx-whatif-range" }, `smallest feasible limit ${formatBytes(w.smallest_limit)} (${w.smallest_limit.toLocaleString("en")} bytes), needed by `, h("code", {}, w.needed_by), top);
  }

  function pipelineRow(on: boolean): HTMLElement {
    const pipeline: string[] = model.get("pipeline") ?? [];
    const names: string[] = model.get("pass_names") ?? [];
    const off = names.filter((n) => !pipeline.some((s) => passName(s) === n));
    const dis: Record<string, string> = on ? {} : { disabled: "true" };
    const button = (text: string, title: string, fn: () => void) => h("button", { class: "gx-zoom", title, attrs: dis, on: { click: fn } }, text);
    const row = h("div", { class: "gx-whatif-row gx-whatif-pipeline" }, h("span", { class: "gx-whatif-label" }, "pipeline"));
    pipeline.forEach((spec, k) => {
      const box = h("input", { attrs: { type: "checkbox", checked: "true", ...dis }, on: { change: () => choose("pipeline", pipeline.filter((_, j) => j !== k)) } });
      row.appendChild(
        h("span", { class: "gx-whatif-pass", attrs: { "data-pass": spec } }, h("label", { title: "turn this pass off" }, box, ` ${spec}`), button("◀", "run it earlier", () => choose("pipeline", moved(pipeline, k, -1))), button("▶", "run it later", () => choose("pipeline", moved(pipeline, k, 1)))),
      );
    });
    for (const name of off) {
      const box = h("input", { attrs: { type: "checkbox", ...dis }, on: { change: () => choose("pipeline", [...pipeline, name]) } });
      row.appendChild(h("span", { class: "gx-whatif-pass gx-whatif-off", attrs: { "data-pass": name } }, h("label", { title: "turn this pass on (at the end)" }, box, ` ${name}`)));
    }
    const add = h("select", { attrs: { title: "add a registered pass at the end (again)", ...dis }, on: { change: () => add.value && choose("pipeline", [...pipeline, add.value]) } }) as HTMLSelectElement;
    add.append(h("option", { attrs: { value: "" } }, "add…"), ...names.map((n) => h("option", { attrs: { value: n } }, n)));
    row.appendChild(add);
    return row;
  }

  function update(): void {
    const w: WhatIf | undefined = model.get("whatif");
    clear(summary);
    clear(body);
    summary.append(h("b", {}, "what if"), " · ", w ? planLine(w) : "");
    if (!w) return;
    const on = live() && !w.working;
    body.append(limitRow(w, on));
    const range = rangeLine(w);
    if (range) body.append(range);
    if (w.error) body.append(h("div", { class: "gx-whatif-error" }, w.error));
    if (live()) body.append(pipelineRow(on));
    if (w.working) body.append(h("div", { class: "gx-note gx-whatif-working" }, w.working));
    if (!live()) body.append(h("div", { class: "gx-note gx-whatif-kernel" }, "changing the memory limit or the pipeline needs a kernel: run this in a live notebook"));
    ask();
  }

  update();
  return { el, update };
}
