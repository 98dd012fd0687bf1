// The tab bodies: IR diff, rewrites, cost, kernels, run (the roofline and memory tabs are in
// measured.ts). Each is a pure function of the data.

import { h } from "./dom";
import { delta, formatBytes, formatCount, formatSeconds } from "./format";
import { profileTable, shareText, sortKernels } from "./measured";
import { barFractions, timelinePlot } from "./plot";
import type { CostView, DiffRow, KernelRow, ProfileData, RewriteRow, RunRow, RunState } from "./schema.gen";

const MARK: Record<string, string> = { equal: "", delete: "−", insert: "+", replace: "~", skip: "" };

/** Rows drawn at first: a long diff shows the rest on request (big graphs switch fast). */
export const FIRST_ROWS = 400;

/** The IR diff side by side; `single` shows one column (the traced stage has no "before"). */
export function diffTable(rows: DiffRow[], single = false, limit = FIRST_ROWS): HTMLElement {
  if (!rows.length) return h("p", { class: "gx-empty" }, "no IR");
  if (rows.length > limit) {
    const box = h("div", {}, diffTable(rows.slice(0, limit), single, limit));
    const more = h(
      "button",
      { class: "gx-more", on: { click: () => box.replaceChildren(diffTable(rows, single, Infinity)) } },
      `show all ${rows.length} rows`,
    );
    box.appendChild(h("p", { class: "gx-hint" }, `${rows.length - limit} more rows `, more));
    return box;
  }
  if (single) {
    const lines = rows.map(([, , , bn, b]) => h("tr", {}, h("td", { class: "gx-num" }, bn ?? ""), h("td", { class: "gx-code" }, b)));
    const cols = h("colgroup", {}, h("col", { class: "gx-col-num" }), h("col", { class: "gx-col-code" }));
    return h("div", { class: "gx-scroll" }, h("table", { class: "gx-irdiff gx-single" }, cols, h("tbody", {}, ...lines)));
  }
  const body = rows.map(([tag, an, a, bn, b]) =>
    tag === "skip"
      ? h("tr", { class: "gx-row-skip" }, h("td", { attrs: { colspan: "5" } }, `⋯ ${a}`))
      : h(
          "tr",
          { class: `gx-row-${tag}` },
          h("td", { class: "gx-num" }, an ?? ""),
          h("td", { class: "gx-code gx-left" }, a),
          h("td", { class: "gx-mark" }, MARK[tag] ?? ""),
          h("td", { class: "gx-num" }, bn ?? ""),
          h("td", { class: "gx-code gx-right" }, b),
        ),
  );
  const cols = h(
    "colgroup",
    {},
    ...["gx-col-num", "gx-col-code", "gx-col-mark", "gx-col-num", "gx-col-code"].map((c) => h("col", { class: c })),
  );
  return h("div", { class: "gx-scroll" }, h("table", { class: "gx-irdiff" }, cols, h("tbody", {}, ...body)));
}

/** The rewrites of the stage (or of the one firing shown: `first` is its number - 1). With
 * `onStep`, each row has a button that shows the graph just before and after that firing. */
export function rewritesList(rows: RewriteRow[], selected: number, onPick: (k: number) => void, onStep: ((k: number) => void) | null = null, first = 0): HTMLElement {
  if (!rows.length) return h("p", { class: "gx-empty" }, "no rewrites fired in this stage");
  const ids = (xs: number[]) => (xs.length ? xs.map((i) => `%${i}`).join(", ") : "∅");
  const items = rows.map((r, k) =>
    h(
      "tr",
      { class: `gx-rewrite${k === selected ? " gx-selected" : ""}`, title: "click to highlight its nodes", on: { click: () => onPick(k === selected ? -1 : k) } },
      h(
        "td",
        { class: "gx-numcell gx-rw-num" },
        onStep
          ? h("button", { class: "gx-zoom gx-step-firing", title: "show the graph just before and after this firing", on: { click: (ev: Event) => { ev.stopPropagation(); onStep(k); } } }, `${first + k + 1} ▸`)
          : String(first + k + 1),
      ),
      h("td", { class: "gx-rule" }, r.rule),
      h("td", { class: "gx-nodes" }, `${ids(r.before)} → ${ids(r.after)}`),
      h("td", { class: "gx-where" }, r.source || "—"),
      h("td", { class: "gx-region", title: r.region ? "the body of a region op this rewrite fired in" : "" }, r.region || ""),
      h("td", { class: "gx-code" }, r.line_text),
    ),
  );
  const head = h("tr", {}, h("th", { title: "the firing's number in the pass" }, "#"), h("th", {}, "rule"), h("th", {}, "nodes"), h("th", {}, "source"), h("th", { title: "the region body it fired in, when not the graph itself" }, "in"), h("th", {}, "line"));
  return h("div", { class: "gx-scroll" }, h("table", { class: "gx-rewrites" }, h("thead", {}, head), h("tbody", {}, ...items)));
}

export function costPanel(cost: CostView | null): HTMLElement {
  if (!cost || cost.flops === undefined) return h("p", { class: "gx-empty" }, "no cost");
  const prev = cost.prev;
  const metric = (name: string, key: "flops" | "bytes" | "peak_bytes", fmt: (n: number) => string) => {
    const d = delta(cost[key], prev ? prev[key] : null);
    const cls = d.sign > 0 ? "gx-worse" : d.sign < 0 ? "gx-better" : "";
    return h(
      "tr",
      {},
      h("td", {}, name),
      h("td", { class: "gx-numcell" }, fmt(cost[key])),
      h("td", { class: "gx-numcell" }, prev ? fmt(prev[key]) : "—"),
      h("td", { class: `gx-numcell ${cls}` }, d.text || "—"),
    );
  };
  const table = h(
    "table",
    { class: "gx-cost" },
    h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, "this stage"), h("th", {}, "previous"), h("th", {}, "Δ"))),
    h(
      "tbody",
      {},
      metric("FLOPs", "flops", formatCount),
      metric("bytes moved", "bytes", formatBytes),
      metric(cost.devices !== null ? "planned peak, all devices" : "planned peak", "peak_bytes", formatBytes),
      cost.devices !== null && cost.device_peak_bytes !== null
        ? h(
            "tr",
            { class: "gx-perdevice" },
            h("td", { title: "what one device holds at its planned peak (a shard_map body once, its share of each sharded value)" }, `planned peak per device (${cost.devices} devices)`),
            h("td", { class: "gx-numcell" }, formatBytes(cost.device_peak_bytes)),
            h("td", { class: "gx-numcell" }, "—"),
            h("td", { class: "gx-numcell" }, "—"),
          )
        : null,
    ),
  );
  // a per-device limit bounds one device's peak, not the all-devices timeline drawn here
  const limitLine = cost.per_device_limit ? null : cost.memory_limit;
  const caption = `planned bytes at each step${cost.devices !== null ? ", all devices together" : ""} (${cost.timeline.length} steps; the highest is the planned peak)` +
    (cost.peak_node !== null ? `, peak at %${cost.peak_node}` : "") +
    (cost.memory_limit && !cost.per_device_limit ? `; the line is the memory limit, ${formatBytes(cost.memory_limit)}` : "") +
    (cost.memory_limit && cost.per_device_limit ? `; the memory limit, ${formatBytes(cost.memory_limit)} per device, bounds the planned peak per device` : "");
  return h("div", { class: "gx-costpanel" }, table, h("figure", { class: "gx-figure" }, timelinePlot(cost.timeline, limitLine), h("figcaption", {}, caption)));
}

export interface SavedFile {
  filename: string; // what was asked for (the reply names it)
  url: string; // a blob: link to save it again ("" until it arrives)
  error: string;
  pending: boolean;
}

export interface KernelsOptions {
  kernels: KernelRow[];
  profile: ProfileData | null; // this stage's, if profiled
  stage: number;
  stageName: string;
  onReproducer: ((kernel: number | string | null) => void) | null; // null: no kernel to ask
  saved: SavedFile | null; // the last reproducer asked for
}

/** The kernels tab: the stage's reproducer, where the time goes (a profile), and the kernels
 * the backends generated, slowest first. */
export function kernelsPanel(o: KernelsOptions): HTMLElement {
  const ask = o.onReproducer;
  const repro = ask
    ? h(
        "div",
        { class: "gx-runbar gx-reprobar" },
        h("button", { class: "gx-repro-stage", title: "download a standalone Python script that rebuilds this stage from its IR text, runs it on random inputs and checks it against the reference interpreter", on: { click: () => ask(null) } }, `⤓ reproducer of stage ${o.stage} ${o.stageName} (.py)`),
        savedNote(o.saved),
      )
    : h("p", { class: "gx-hint gx-reprobar" }, "reproducer scripts: in a live notebook, or stage.reproducer() in Python");
  const sorted = sortKernels(o.kernels, o.profile);
  const kernels = sorted.map((k, i) => {
    const button = ask && k.row.name !== "the program"
      ? h("button", { class: "gx-zoom gx-repro-kernel", title: "download this kernel's reproducer", on: { click: (ev: Event) => { ev.preventDefault(); ev.stopPropagation(); ask(k.row.name); } } }, "⤓ .py")
      : null;
    const time = k.seconds ? ` · ${formatSeconds(k.seconds)}${k.profiled && o.profile ? ` profiled, ${shareText(k.seconds, o.profile.total)} of the stage` : ""}` : "";
    return h(
      "details",
      { class: "gx-kernel", attrs: i < 3 ? { open: "" } : {} },
      h("summary", {}, `${k.row.backend} · ${k.row.name}${time} `, button),
      h("pre", { class: "gx-source" }, k.row.source),
    );
  });
  const table = o.profile ? profileTable(o.profile, ask ? (node) => ask(node) : null) : null;
  const empty = !kernels.length && o.profile
    ? h("p", { class: "gx-hint" }, "the generated kernels' sources appear here after the stage runs on a backend that generates them (the run tab)")
    : !kernels.length
    ? h(
        "div",
        { class: "gx-empty" },
        h("p", {}, "no kernels in this stage"),
        h("p", { class: "gx-hint" }, "kernels appear here after the stage runs on a backend that generates them (CPU, GPU); profile it (the run tab) to see where its time goes"),
      )
    : null;
  return h("div", { class: "gx-kernels" }, repro, table, empty, ...kernels);
}

function savedNote(s: SavedFile | null): HTMLElement | null {
  if (!s) return null;
  if (s.pending) return h("span", { class: "gx-progress gx-running" }, `making ${s.filename}…`);
  if (s.error) return h("span", { class: "gx-profile-error" }, `no reproducer: ${s.error}`);
  return h("span", { class: "gx-hint" }, "saved ", h("a", { class: "gx-saved", attrs: { href: s.url, download: s.filename } }, s.filename), " (click to save again)");
}

export interface RunControls {
  backends: string[];
  chosen: string[]; // run_backends: the user's choice, kept by Python across redraws
  baselines: boolean; // run_baselines
  onChoose: (backends: string[], baselines: boolean) => void;
  interactive: boolean;
  state: RunState;
  rows: RunRow[];
  stageName: string;
  onRun: (backends: string[], baselines: boolean) => void;
  profile?: HTMLElement | null; // the profile action, next to the backend choice
}

const BASELINES = "NumPy, JAX eager, jax.jit";

export function runPanel(c: RunControls): HTMLElement {
  const report = () => c.onChoose(boxes.filter((x) => x.input.checked).map((x) => x.b), base.checked);
  const boxes = c.backends.map((b) => {
    const input = h("input", { attrs: { type: "checkbox", value: b }, on: { change: report } }) as HTMLInputElement;
    input.checked = c.chosen.includes(b);
    return { b, input, label: h("label", { class: "gx-backend" }, input, ` ${b}`) };
  });
  const base = h("input", { attrs: { type: "checkbox" }, on: { change: report } }) as HTMLInputElement;
  base.checked = c.baselines;
  const button = h(
    "button",
    {
      class: "gx-run",
      on: { click: () => c.onRun(boxes.filter((x) => x.input.checked).map((x) => x.b), base.checked) },
    },
    `run ${c.stageName}`,
  ) as HTMLButtonElement;
  button.disabled = !c.interactive || c.state.running || (c.chosen.length === 0 && !c.baselines);
  const controls = c.interactive
    ? h(
        "div",
        { class: "gx-runbar" },
        h("span", { class: "gx-hint" }, "backends:"),
        ...boxes.map((x) => x.label),
        h("label", { class: "gx-baselines", title: "measured once; they do not depend on the stage" }, base, ` against ${BASELINES}`),
        button,
      )
    : h("p", { class: "gx-hint" }, "exported page: running a stage needs a Jupyter kernel");
  const progress = c.state.total
    ? h(
        "div",
        { class: `gx-progress${c.state.running ? " gx-running" : ""}` },
        h("progress", { attrs: { max: String(c.state.total), value: String(c.state.done) } }),
        ` ${c.state.message}`,
      )
    : null;
  const pending = c.state.running ? c.state.pending ?? [] : [];
  return h("div", { class: "gx-runpanel" }, controls, c.profile ?? null, progress, runBars(c.rows, pending));
}

/** "2.1× slower" / "1.5× faster" than a reference time; "" when either is missing. */
export function versus(seconds: number | null, reference: number | null | undefined): string {
  if (!seconds || !reference) return "";
  const r = seconds / reference;
  if (Math.abs(r - 1) < 0.005) return "same";
  return r > 1 ? `${r.toFixed(2)}× slower` : `${(1 / r).toFixed(2)}× faster`;
}

function barCell(fraction: number, cls: string, text: string, title: string): HTMLElement {
  const bar = h("div", { class: `gx-bar ${cls}`, attrs: { style: `width:${(100 * fraction).toFixed(1)}%` } });
  return h("div", { class: "gx-barcell", title }, h("div", { class: "gx-track" }, bar), h("span", {}, text));
}

function runRow(r: RunRow, time: number, mem: number, jit: number | null): HTMLElement {
  const tag = r.kind === "baseline" ? h("span", { class: "gx-tag" }, "baseline") : null;
  const cluster = r.dashboard
    ? h("a", { class: "gx-dashboard", attrs: { href: r.dashboard, target: "_blank", rel: "noopener", title: "the Dask cluster's dashboard" } }, `${r.workers} workers · dashboard`)
    : null;
  const label = h("td", { class: "gx-runlabel" }, r.label, tag ? " " : "", tag, cluster ? " " : "", cluster);
  if (r.error) {
    const cls = r.kind === "baseline" ? "gx-run-unavailable" : "gx-run-error";
    return h("tr", { class: cls, attrs: { "data-key": r.key ?? "" } }, label, h("td", { attrs: { colspan: "4" } }, r.error));
  }
  const timeText = r.seconds === null ? "" : formatSeconds(r.seconds);
  // what a stage row times: one call of the executable gx.compile calls too
  const what = r.kind === "baseline" ? "runs" : "calls of the stage's compiled executable (cpu: its generated program; jax: one jax.jit call)";
  const timeTitle = r.seconds === null ? "" : `median of ${r.repeats} ${what}` + (r.min_seconds !== null ? `; fastest ${formatSeconds(r.min_seconds)}` : "");
  const memText = r.peak_bytes === null ? `n/a${r.peak_how ? ` (${r.peak_how})` : ""}` : formatBytes(r.peak_bytes) + (r.devices !== null ? " per device" : "");
  const memTitle = r.peak_how ? `peak temporaries, measured by ${r.peak_how}` : "peak temporaries";
  const check = r.ok === null ? r.check : `${r.ok ? "✓" : "✗"} ${r.check}`;
  return h(
    "tr",
    { class: r.kind === "baseline" ? "gx-run-baseline" : r.ok === false ? "gx-run-bad" : "", attrs: { "data-key": r.key ?? "" } },
    label,
    h("td", {}, barCell(time, "gx-bar-time", timeText, timeTitle)),
    h("td", { class: "gx-versus" }, r.backend === "jax-jit" ? "" : versus(r.seconds, jit)),
    h("td", {}, barCell(mem, r.peak_bytes === null ? "gx-bar-none" : "gx-bar-mem", memText, memTitle)),
    h("td", { class: "gx-check" }, check),
  );
}

export function runBars(rows: RunRow[], pending: string[] = []): HTMLElement {
  if (!rows.length && !pending.length) return h("p", { class: "gx-empty" }, "no runs yet");
  const time = barFractions(rows.map((r) => (r.error ? null : r.seconds)));
  const mem = barFractions(rows.map((r) => (r.error ? null : r.peak_bytes)));
  const jitRow = rows.find((r) => r.backend === "jax-jit" && r.kind === "baseline" && !r.error);
  const jit = jitRow ? jitRow.seconds : null;
  const body = rows.map((r, k) => runRow(r, time[k], mem[k], jit));
  const waiting = pending.map((label, k) =>
    h("tr", { class: "gx-run-pending" }, h("td", {}, label), h("td", { attrs: { colspan: "4" } }, k === 0 ? "running…" : "waiting")),
  );
  const head = h(
    "tr",
    {},
    h("th", {}, "run"),
    h("th", {}, "time (median)"),
    h("th", {}, "vs jax.jit"),
    h("th", {}, "peak memory"),
    h("th", { title: "against the reference interpreter's values of the traced program" }, "numeric check"),
  );
  return h("div", { class: "gx-runscroll" }, h("table", { class: "gx-runs" }, h("thead", {}, head), h("tbody", {}, ...body, ...waiting)));
}
