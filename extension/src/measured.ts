// What a profile measured, as panels: the profile controls (run tab), where the time goes
// (kernels tab), the roofline tab and the memory tab. Each is a pure function of the data.

import { h } from "./dom";
import { formatBytes, formatCount, formatSeconds } from "./format";
import { barFractions, lifetimeBars, placeable, rooflinePlot, timelinePlot } from "./plot";
import type { KernelRow, ProfileData, ProfileRowData, ProfileState, RooflineData, RooflinePoint, TimelineBuffer, TimelineData } from "./schema.gen";

/** The one of `items` measured on stage `index`, if any. */
export function forStage<T extends { stage: number }>(items: T[] | null | undefined, index: number): T | null {
  return (items ?? []).find((x) => x.stage === index) ?? null;
}

/** "file.py:12" for "/a/long/path/file.py:12" (the hover and the table keep it short). */
export function shortLine(loc: string): string {
  return loc.replace(/\\/g, "/").split("/").pop() ?? loc;
}

/** The profile's nodes by time, slowest first. */
export function byTime(rows: ProfileRowData[]): ProfileRowData[] {
  return [...rows].sort((a, b) => b.seconds - a.seconds || a.node - b.node);
}

/** The nodes of region `node`'s own bodies (not those nested deeper), timed apart. */
export function innerOf(p: ProfileData, node: number): ProfileRowData[] {
  const own = new RegExp(`^[a-z_]+_${node}/((tail|cond|branches\\d*)/)?$`);
  return (p.inner ?? []).filter((r) => own.test(r.place ?? ""));
}

/** "12% of the stage" */
export function shareText(seconds: number, total: number): string {
  if (!(total > 0)) return "";
  const pct = (100 * seconds) / total;
  return `${pct < 1 ? pct.toFixed(1) : pct.toFixed(0)}%`;
}

export interface SortedKernel {
  row: KernelRow;
  seconds: number; // the time it is sorted by
  profiled: boolean; // from the stage's profile (else the run's own kernel timing)
}

/** The kernels tab's order: each backend's program first (what calls the kernels), then the
 * kernels by time, slowest first: profiled seconds where the stage's profile on that backend
 * has the kernel (by name), else the kernel's measured seconds. */
export function sortKernels(kernels: KernelRow[], profile: ProfileData | null): SortedKernel[] {
  const timed = new Map<string, number>();
  for (const r of profile?.rows ?? []) timed.set(r.name, r.seconds);
  const out = kernels.map((row) => {
    const same = profile !== null && profile.backend === row.backend && timed.has(row.name);
    return { row, seconds: same ? timed.get(row.name)! : row.seconds, profiled: same };
  });
  const program = (k: SortedKernel) => (k.row.name === "the program" ? 0 : 1);
  return out.sort((a, b) => program(a) - program(b) || b.seconds - a.seconds);
}

function heading(text: string, ...rest: (Node | string)[]): HTMLElement {
  return h("div", { class: "gx-measured-head" }, h("b", {}, text), ...rest);
}

function notes(items: string[]): HTMLElement | null {
  return items.length ? h("ul", { class: "gx-notes" }, ...items.map((n) => h("li", {}, n))) : null;
}

function rate(v: number | null, scale = 1e9): string {
  return v === null ? "" : (v / scale).toFixed(v / scale < 10 ? 2 : 1);
}

/** Where the time goes: the profile's nodes slowest first, with their share of the stage,
 * achieved rates and, for kernels, a reproducer to download. */
export function profileTable(p: ProfileData, onReproducer: ((node: number) => void) | null, limit = 25): HTMLElement {
  const rows = byTime(p.rows);
  const box = h("div", { class: "gx-profile" });
  const draw = (n: number) => {
    const shown = rows.slice(0, n);
    const bars = barFractions(shown.map((r) => r.seconds));
    const line = (r: ProfileRowData, bar: number, inner: boolean) =>
      h(
        "tr",
        inner ? { class: "gx-profile-inner", attrs: { "data-place": r.place ?? "" } } : { attrs: { "data-node": String(r.node) } },
        h("td", { class: "gx-code" }, inner ? `  ${r.place}${r.name}` : r.name),
        h(
          "td",
          { class: `gx-kind gx-kind-${r.kind}`, title: r.timed === "apart" ? "its body's nodes are timed too (the interpreter core runs them)" : r.timed === "whole" ? "timed whole: its body is generated code, one statement of the program" : "" },
          // (a fused kernel is always one call: said only for the loops, and what is timed apart)
          r.timed === "apart" || (r.timed === "whole" && r.kind === "loop") ? `${r.kind} · timed ${r.timed}` : r.kind,
        ),
        h("td", { class: "gx-where", title: r.source }, shortLine(r.source)),
        h("td", { class: "gx-numcell" }, formatSeconds(r.seconds)),
        h(
          "td",
          { title: "share of the stage's profiled time" },
          h("div", { class: "gx-barcell" }, h("div", { class: "gx-track" }, h("div", { class: "gx-bar gx-bar-heat", attrs: { style: `width:${(100 * bar).toFixed(1)}%` } })), h("span", {}, shareText(r.seconds, p.total))),
        ),
        h("td", { class: "gx-numcell" }, rate(r.gflops, 1)),
        h("td", { class: "gx-numcell" }, rate(r.gbs, 1)),
        h(
          "td",
          {},
          !inner && onReproducer && r.op === "kernel"
            ? h("button", { class: "gx-zoom gx-repro-kernel", title: "download a standalone script that runs this kernel and checks it against the reference interpreter", on: { click: () => onReproducer(r.node) } }, "⤓ .py")
            : "",
        ),
      );
    const body = shown.flatMap((r, k) => [
      line(r, bars[k], false),
      ...(r.timed === "apart" ? byTime(innerOf(p, r.node)).slice(0, 3).map((b) => line(b, bars[k] * (r.seconds > 0 ? b.seconds / r.seconds : 0), true)) : []),
    ]);
    const head = h("tr", {}, ...["node", "kind", "line", "time", "share", "GFLOP/s", "GB/s", ""].map((t) => h("th", {}, t)));
    const outside = p.outside ?? null;
    const rest = rows.slice(n).reduce((a, r) => a + r.seconds, 0);
    const tail = [
      ...(rows.length > n ? [h("tr", { class: "gx-profile-rest" }, h("td", {}, `(${rows.length - n} other nodes)`), h("td", {}), h("td", {}), h("td", { class: "gx-numcell" }, formatSeconds(rest)), h("td", {}, shareText(rest, p.total)), h("td", {}), h("td", {}), h("td", {}))] : []),
      ...(outside !== null ? [h("tr", { class: "gx-profile-outside", title: "the run's time between nodes: the hook that reads the clock, the program's own lines" }, h("td", {}, "(outside the nodes)"), h("td", {}), h("td", {}), h("td", { class: "gx-numcell" }, formatSeconds(outside)), h("td", {}, shareText(outside, p.total)), h("td", {}), h("td", {}), h("td", {}))] : []),
    ];
    const table = h("table", { class: "gx-runs gx-profile-table" }, h("thead", {}, head), h("tbody", {}, ...body, ...tail));
    const spread = p.spread ?? null;
    const noisy = p.noisy
      ? h("p", { class: "gx-warning gx-noisy" }, `noisy: the repeats varied more than these figures can resolve (spread ${spread === null ? "?" : (100 * spread).toFixed(0)}% of the median run); profile again on a quieter machine or with more repeats`)
      : null;
    const more = rows.length > n ? h("p", { class: "gx-hint" }, `${rows.length - n} more nodes `, h("button", { class: "gx-more", on: { click: () => draw(rows.length) } }, `show all ${rows.length}`)) : null;
    box.replaceChildren(
      heading(`where the time goes: stage ${p.stage} ${p.stage_name} on ${p.backend}`, ` · ${formatSeconds(p.total)} profiled (the median of ${p.repeats} runs${spread === null ? "" : `, spread ${(100 * spread).toFixed(0)}%`}), ${formatSeconds(p.unprofiled)} bare`),
      ...[noisy, notes(p.notes)].filter((x): x is HTMLElement => x !== null),
      h("div", { class: "gx-runscroll" }, table),
      ...(more ? [more] : []),
    );
  };
  draw(limit);
  return box;
}

export interface ProfileControls {
  backends: string[];
  chosen: string; // profile_backend
  onChoose: (backend: string) => void;
  interactive: boolean;
  state: ProfileState;
  stageName: string;
  prevName: string | null; // the stage before, profiled with it
  onProfile: (backend: string) => void;
}

/** The run tab's profile action: a backend, a button, and progress or why it could not run. */
export function profileBar(c: ProfileControls): HTMLElement {
  if (!c.interactive) return h("p", { class: "gx-hint gx-profilebar" }, "exported page: profiling needs a Jupyter kernel");
  const select = h("select", { class: "gx-profile-backend", on: { change: () => c.onChoose(select.value) } }) as HTMLSelectElement;
  // the choice Python holds is shown even when it is no backend this machine lists (then
  // profiling it says why it cannot run)
  const names = c.chosen && !c.backends.includes(c.chosen) ? [...c.backends, c.chosen] : c.backends;
  for (const b of names) select.appendChild(h("option", { attrs: { value: b } }, b));
  if (c.chosen) select.value = c.chosen;
  const what = c.prevName ? `${c.stageName} and ${c.prevName}` : c.stageName;
  const button = h(
    "button",
    {
      class: "gx-profile-run",
      title: "time every node of this stage and of the stage before it (the graphs' heat overlay, the kernels tab), and take the stage's roofline and memory timeline",
      on: { click: () => c.onProfile(select.value) },
    },
    `profile ${what}`,
  ) as HTMLButtonElement;
  button.disabled = c.state.running || names.length === 0;
  const status = c.state.error
    ? h("span", { class: "gx-profile-error" }, c.state.error)
    : c.state.message
      ? h("span", { class: c.state.running ? "gx-progress gx-running" : "gx-progress" }, c.state.message)
      : null;
  return h("div", { class: "gx-runbar gx-profilebar" }, h("span", { class: "gx-hint" }, "where the time goes:"), select, button, status);
}

export interface MeasuredContext {
  index: number;
  stageName: string;
  taken: { stage: number; name: string }[]; // the stages that have one
  onGo: (stage: number) => void;
  onProfile: (() => void) | null; // null: no kernel
  backend: string;
}

function nothingYet(what: string, c: MeasuredContext): HTMLElement {
  const go = c.taken.length
    ? h("p", { class: "gx-hint" }, `taken for: `, ...c.taken.map((t) => h("button", { class: "gx-zoom gx-measured-go", on: { click: () => c.onGo(t.stage) } }, `${t.stage} ${t.name}`)))
    : null;
  const action = c.onProfile
    ? h("p", {}, h("button", { class: "gx-profile-run", on: { click: () => c.onProfile!() } }, `profile ${c.stageName} on ${c.backend}`))
    : h("p", { class: "gx-hint" }, "profile the stage in a live notebook (the run tab), or take it in Python before saving the page");
  return h("div", { class: "gx-empty" }, h("p", {}, `no ${what} of stage ${c.index} ${c.stageName} yet`), action, go);
}

/** The roofline tab: the plot, the machine's peaks, and the points as a table. */
export function rooflinePanel(data: RooflineData | null, c: MeasuredContext): HTMLElement {
  if (!data) return nothingYet("roofline", c);
  const pk = data.peaks;
  const drawn = placeable(data);
  const all: RooflinePoint[] = [...data.points, ...(data.xla ? [data.xla] : [])];
  const left = all.length - drawn.length;
  const caption =
    `${drawn.length} points: each kernel, dot and loop at its arithmetic intensity (the cost model's FLOPs over the bytes it reads and writes) and achieved rate (its profiled time)` +
    (data.xla ? "; the star is jax.jit's whole program (XLA's cost analysis over its measured time)" : "") +
    (left ? `; ${left} without arithmetic or measurable time are not drawn` : "") +
    ". Hover a point for its line and rates.";
  const rows = [...all].sort((a, b) => b.seconds - a.seconds).map((p) =>
    h(
      "tr",
      { class: p.kind === "xla" ? "gx-run-baseline" : "" },
      h("td", { class: "gx-code" }, p.name),
      h("td", { class: `gx-kind gx-kind-${p.kind}` }, p.kind === "xla" ? "jax.jit" : p.kind),
      h("td", { class: "gx-where", title: p.source }, shortLine(p.source)),
      h("td", { class: "gx-numcell" }, p.intensity === null ? "" : p.intensity.toFixed(2)),
      h("td", { class: "gx-numcell" }, formatSeconds(p.seconds)),
      h("td", { class: "gx-numcell" }, rate(p.rate)),
      h("td", { class: "gx-numcell" }, rate(p.bandwidth)),
      h("td", { class: p.above ? "gx-numcell gx-above" : "gx-numcell" }, (p.rate !== null && p.bound ? `${((100 * p.rate) / p.bound).toFixed(0)}%` : "") + (p.above ? " ABOVE" : "")),
    ),
  );
  const above = all.filter((p) => p.above);
  const warning = above.length
    ? h("p", { class: "gx-warning gx-roof-warning" }, `${above.length} point(s) above the roof${data.remeasured ? ", even after measuring the peaks again" : ""} (${above.slice(0, 5).map((p) => p.name).join(", ")}${above.length > 5 ? `, and ${above.length - 5} more` : ""}): the peaks or the cost model's counts are off; read the shares of the roof with care`)
    : null;
  const head = h("tr", {}, ...["point", "kind", "line", "FLOPs/byte", "time", "GFLOP/s", "GB/s", "of roof"].map((t) => h("th", {}, t)));
  return h(
    "div",
    { class: "gx-rooflinepanel" },
    heading(`roofline of stage ${data.stage} ${data.stage_name} on ${data.backend}`, data.stage !== c.index ? " (not the stage shown)" : ""),
    ...(warning ? [warning] : []),
    h("p", { class: "gx-hint gx-peaks" }, `peaks of ${pk.machine}: ${(pk.flops / 1e9).toFixed(1)} GFLOP/s, ${(pk.bandwidth / 1e9).toFixed(1)} GB/s, ridge at ${(pk.flops / pk.bandwidth).toFixed(1)} FLOPs/byte; measured ${pk.measured_at} (${pk.how})`),
    h("div", { class: "gx-plotrow" }, h("figure", { class: "gx-figure" }, rooflinePlot(data), h("figcaption", {}, caption)), h("div", { class: "gx-scroll gx-roof-table" }, h("table", { class: "gx-runs" }, h("thead", {}, head), h("tbody", {}, ...rows)))),
    notes(data.notes),
  );
}

function stepTip(t: TimelineData, k: number): string {
  const [node, op, src, live, planned, mLive, mPeak] = t.steps[k];
  const measured = mPeak === null ? "" : `\nmeasured: ${formatBytes(mLive ?? 0)} live after, ${formatBytes(mPeak)} peak while it ran`;
  return `step ${k}: ${op} %${node}` + (src ? `\n${shortLine(src)}` : "") + `\nplanned: ${formatBytes(planned)} (${formatBytes(live)} live after)` + measured;
}

export function bufferTip(b: TimelineBuffer, at: number | null): string {
  const [node, op, src, bytes, start, end] = b;
  const peak = at !== null && start <= at && at <= end ? "\nlive at the planned peak" : "";
  return `${op} %${node} · ${formatBytes(bytes)}` + (src ? `\n${shortLine(src)}` : "") + `\nsteps ${start}–${end}` + peak;
}

/** The memory tab: planned and measured bytes along the schedule, the buffers' lifetimes
 * under it, the peak marked with what is live there, and the memory limit. */
export function memoryPanel(data: TimelineData | null, c: MeasuredContext, width = 640): HTMLElement {
  if (!data) return nothingYet("memory timeline", c);
  const n = data.steps.length;
  const at = data.peak_step;
  const plot = timelinePlot(data.steps.map((s) => s[4]), data.memory_limit, width, 130, {
    measured: data.steps.map((s) => s[6]),
    measuredLabel: `measured (${data.peak_how})`,
    peakStep: at,
    tips: data.steps.map((_, k) => stepTip(data, k)),
  });
  const bars = lifetimeBars(data.buffers, n, at, (b) => bufferTip(b, at), width);
  const peakStep = at === null ? null : data.steps[at];
  const live = at === null ? [] : data.buffers.filter((b) => b[4] <= at && at <= b[5]).sort((a, b) => b[3] - a[3]);
  const head =
    `${n} steps, ${data.buffers.length} temporary buffers; planned peak ${formatBytes(data.planned_peak)}` +
    (peakStep ? ` at step ${at} (${peakStep[1]} %${peakStep[0]}${peakStep[2] ? `, ${shortLine(peakStep[2])}` : ""})` : "") +
    (data.measured_peak !== null ? `; measured peak ${formatBytes(data.measured_peak)} (${data.peak_how})` : "") +
    (data.memory_limit ? `; memory limit ${formatBytes(data.memory_limit)}` : "");
  const legend = h(
    "div",
    { class: "gx-legend gx-memlegend" },
    h("span", { class: "gx-swatch gx-swatch-planned" }, "planned (live buffers + the step's workspace)"),
    data.measured_peak !== null ? h("span", { class: "gx-swatch gx-swatch-measured" }, `measured peak per step (${data.peak_how})`) : null,
    h("span", { class: "gx-swatch gx-swatch-peak" }, "planned peak; buffers live there"),
    data.memory_limit ? h("span", { class: "gx-swatch gx-swatch-limit" }, "memory limit") : null,
  );
  const liveList = live.length
    ? h(
        "div",
        { class: "gx-atpeak" },
        h("b", {}, `live at the planned peak (${live.length}):`),
        h("table", { class: "gx-runs" }, h("tbody", {}, ...live.slice(0, 12).map((b) => h("tr", {}, h("td", { class: "gx-numcell" }, formatBytes(b[3])), h("td", { class: "gx-code" }, `${b[1]} %${b[0]}`), h("td", { class: "gx-where", title: b[2] }, shortLine(b[2])), h("td", { class: "gx-hint" }, `steps ${b[4]}–${b[5]}`))))),
        live.length > 12 ? h("p", { class: "gx-hint" }, `and ${live.length - 12} more`) : null,
      )
    : null;
  return h(
    "div",
    { class: "gx-memorypanel" },
    heading(`memory timeline of stage ${data.stage} ${data.stage_name} on ${data.backend}`, data.stage !== c.index ? " (not the stage shown)" : ""),
    h("p", { class: "gx-hint" }, head),
    legend,
    h(
      "div",
      { class: "gx-plotrow" },
      h(
        "figure",
        { class: "gx-figure gx-memfigure" },
        plot,
        bars,
        h("figcaption", {}, `top: bytes at each of the ${formatCount(n)} steps of the schedule; below: the ${Math.min(40, data.buffers.length)} largest temporary buffers, each from the step that makes it to the last that reads it. Hover for the node, its line and its size.`),
      ),
      liveList,
    ),
    notes(data.notes),
  );
}
