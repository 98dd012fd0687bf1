// The step-through pass widget: a bar of stage chips, before/after graphs, and tabs.
// It draws the model's traits and writes back only the user's choices (schema.Choice in schema.gen.ts).

import { clear, h } from "./dom";
import { PanZoom, type ViewOp } from "./panzoom";
import { sanitizeSvg } from "./sanitize";
import { findHits } from "./search";
import { stepIndex } from "./stepping";
import { type Choice, type RunMessage, type Tab, TRAIT_NAMES, type Traits } from "./schema.gen";
import type { Model } from "./types";
import { costPanel, diffTable, kernelsPanel, rewritesList, runPanel } from "./views";

export const TABS: [Tab, string][] = [
  ["diff", "IR diff"],
  ["rewrites", "rewrites"],
  ["cost", "cost"],
  ["kernels", "kernels"],
  ["run", "run"],
];

interface Pane {
  root: HTMLElement;
  label: HTMLElement;
  canvas: HTMLElement;
  svgText: string | null;
  svg: SVGSVGElement | null;
  panzoom: PanZoom | null;
  onView: ((op: ViewOp) => void) | null; // the user moved this pane's view
}

function makePane(side: string): Pane {
  const label = h("span", { class: "gx-pane-label" });
  const canvas = h("div", { class: "gx-canvas" });
  const pane: Pane = { root: h("div"), label, canvas, svgText: null, svg: null, panzoom: null, onView: null };
  const button = (text: string, title: string, fn: () => void) =>
    h("button", { class: "gx-zoom", title, on: { click: fn } }, text);
  pane.root = h(
    "div",
    { class: `gx-pane gx-pane-${side}` },
    h(
      "div",
      { class: "gx-pane-head" },
      label,
      h(
        "span",
        { class: "gx-zoombar" },
        button("−", "zoom out", () => pane.panzoom?.zoom(1 / 1.3)),
        button("+", "zoom in", () => pane.panzoom?.zoom(1.3)),
        button("fit", "fit the graph", () => pane.panzoom?.fit(true)),
      ),
    ),
    canvas,
  );
  return pane;
}

function showSvg(pane: Pane, text: string, placeholder: string): void {
  if (pane.svgText === text) return;
  pane.svgText = text;
  pane.panzoom?.destroy();
  pane.panzoom = null;
  clear(pane.canvas);
  pane.svg = sanitizeSvg(text);
  if (!pane.svg) {
    pane.canvas.appendChild(h("p", { class: "gx-empty" }, placeholder));
    return;
  }
  pane.canvas.appendChild(pane.svg);
  pane.panzoom = new PanZoom(pane.canvas, pane.svg);
  pane.panzoom.onChange = (op) => pane.onView?.(op);
}

function highlight(pane: Pane, keys: string[], searching: boolean): Element[] {
  if (!pane.svg) return [];
  for (const el of Array.from(pane.svg.querySelectorAll(".gx-hl"))) el.classList.remove("gx-hl");
  const found: Element[] = [];
  for (const key of keys) {
    if (!/^[A-Za-z0-9_]+$/.test(key)) continue;
    for (const el of Array.from(pane.svg.querySelectorAll(`.gx_${key}`))) {
      el.classList.add("gx-hl");
      found.push(el);
    }
  }
  pane.canvas.classList.toggle("gx-searching", searching && found.length > 0);
  return found;
}

export function renderWidget(model: Model, el: HTMLElement): () => void {
  const get = <K extends keyof Traits>(k: K): Traits[K] => model.get(k);
  const choose = <K extends Choice>(k: K, v: Traits[K]) => {
    model.set(k, v);
    model.save_changes();
  };
  const step = (delta: number) => {
    const next = stepIndex(get("stages") ?? [], get("index"), delta, get("hide_unchanged"));
    if (next !== get("index")) choose("index", next);
  };

  const title = h("span", { class: "gx-title" });
  const chips = h("div", { class: "gx-chips" });
  const hide = h("input", { attrs: { type: "checkbox" }, on: { change: () => choose("hide_unchanged", hide.checked) } }) as HTMLInputElement;
  const search = h("input", {
    class: "gx-search",
    attrs: { type: "search", placeholder: "search op, name, %id, line", spellcheck: "false" },
    on: { input: () => choose("search", search.value) },
  }) as HTMLInputElement;
  const hits = h("span", { class: "gx-hits" });
  const sync = h("input", { attrs: { type: "checkbox" }, on: { change: () => choose("sync_panes", sync.checked) } }) as HTMLInputElement;
  const heading = h("div", { class: "gx-heading" });
  const legend = h("div", { class: "gx-legend" });
  const before = makePane("before");
  const after = makePane("after");
  const graphs = h("div", { class: "gx-graphs" }, before.root, after.root);
  // the same move in the other pane, when synchronised (sync_panes, on by default)
  const mirror = (other: Pane) => (op: ViewOp) => {
    if (get("sync_panes") !== false && !graphs.classList.contains("gx-single")) other.panzoom?.perform(op);
  };
  before.onView = mirror(after);
  after.onView = mirror(before);
  const tabbar = h("div", { class: "gx-tabbar", attrs: { role: "tablist" } });
  const tabbody = h("div", { class: "gx-tabbody" });

  const root = h(
    "div",
    // data-lm-suppress-shortcuts: JupyterLab and Notebook 7 (lumino) read shortcuts on the
    // document in the capture phase, before our handler; with it they skip events from inside
    // the widget, so the arrow keys step stages instead of moving cells
    { class: "gx-root", attrs: { tabindex: "0", "data-lm-suppress-shortcuts": "true" } },
    h(
      "div",
      { class: "gx-top" },
      title,
      h("span", { class: "gx-keys" }, "← → step"),
      h("button", { class: "gx-prev", title: "previous stage (←)", on: { click: () => step(-1) } }, "◀"),
      h("button", { class: "gx-next", title: "next stage (→)", on: { click: () => step(1) } }, "▶"),
      h("label", { class: "gx-hide" }, hide, " hide unchanged"),
      h("label", { class: "gx-sync", title: "pan and zoom the before and after graphs together" }, sync, " sync pan/zoom"),
      search,
      hits,
    ),
    chips,
    heading,
    legend,
    graphs,
    tabbar,
    tabbody,
  );
  el.appendChild(root);

  const onKey = (ev: KeyboardEvent) => {
    const target = ev.target as HTMLElement | null;
    if (target && /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName)) return;
    if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") {
      step(ev.key === "ArrowRight" ? 1 : -1);
      ev.preventDefault();
      ev.stopPropagation();
    }
  };
  root.addEventListener("keydown", onKey);

  let dirty = new Set<keyof Traits>(TRAIT_NAMES);
  let scheduled = false;
  const schedule = (key: keyof Traits) => () => {
    dirty.add(key);
    if (!scheduled) {
      scheduled = true;
      queueMicrotask(update);
    }
  };
  const listeners = TRAIT_NAMES.map((k) => [`change:${k}`, schedule(k)] as [string, () => void]);
  for (const [ev, cb] of listeners) model.on(ev, cb);

  function renderChips(): void {
    const stages = get("stages") ?? [];
    const index = get("index");
    const hidden = get("hide_unchanged");
    clear(chips);
    for (const s of stages) {
      const cls = ["gx-chip", s.changed ? "" : "gx-unchanged", s.index === index ? "gx-current" : "", !s.changed && hidden ? "gx-hidden" : ""];
      chips.appendChild(
        h(
          "button",
          {
            class: cls.filter(Boolean).join(" "),
            title: `${s.name}: ${s.nodes} nodes, ${s.rewrites} rewrites${s.changed ? "" : " (changed nothing)"}`,
            attrs: { "data-index": String(s.index) },
            on: { click: () => choose("index", s.index) },
          },
          `${s.index} ${s.name}`,
        ),
      );
    }
  }

  function renderHeading(): void {
    const stages = get("stages") ?? [];
    const index = get("index");
    const s = stages[index];
    clear(heading);
    clear(legend);
    if (!s) return;
    const counts = get("diff_counts") ?? {};
    const what = index === 0 ? "the traced program" : s.changed ? `${s.rewrites} rewrites` : "changed nothing";
    heading.append(`stage ${index}/${stages.length - 1}: `, h("b", {}, s.name), ` · ${s.nodes} nodes · ${what}`);
    before.label.textContent = index > 0 ? `before: ${stages[index - 1].name}` : "before";
    after.label.textContent = index > 0 ? `after: ${s.name}` : "the traced program";
    if (loading()) {
      // the panels still hold the previous stage's view: say so, never show it as this one's
      legend.appendChild(h("span", { class: "gx-loading-note" }, `loading stage ${index}…`));
      return;
    }
    for (const k of ["added", "removed", "changed"] as const) {
      legend.appendChild(h("span", { class: `gx-swatch gx-swatch-${k}` }, `${k} ${counts[k] ?? 0}`));
    }
    legend.appendChild(h("span", { class: "gx-swatch gx-swatch-hl" }, "highlighted"));
    const note = get("note");
    if (note) legend.appendChild(h("span", { class: "gx-note" }, `(${note})`));
  }

  /** The view traits still describe another stage than the one chosen (a kernel computing it). */
  function loading(): boolean {
    const shown = get("view_index");
    return shown !== undefined && shown !== null && shown !== get("index");
  }

  function applyHighlights(reveal: boolean): void {
    const query = get("search") ?? "";
    const pick = get("selected_rewrite");
    const rw = (get("rewrites") ?? [])[pick];
    const hb = query ? findHits(get("before_words") ?? {}, query) : [];
    const ha = query ? findHits(get("after_words") ?? {}, query) : [];
    const fb = highlight(before, [...hb, ...(rw?.before_keys ?? [])], query.length > 0);
    const fa = highlight(after, [...ha, ...(rw?.after_keys ?? [])], query.length > 0);
    hits.textContent = query ? `${hb.length} before · ${ha.length} after` : "";
    if (reveal) {
      before.panzoom?.reveal(fb);
      after.panzoom?.reveal(fa);
    }
  }

  function renderTabs(): void {
    const tab = get("tab") || "diff";
    clear(tabbar);
    const nrw = (get("rewrites") ?? []).length;
    const nk = (get("kernels") ?? []).length;
    for (const [key, label] of TABS) {
      const extra = loading() ? "" : key === "rewrites" ? ` (${nrw})` : key === "kernels" && nk ? ` (${nk})` : "";
      tabbar.appendChild(
        h("button", { class: `gx-tab${key === tab ? " gx-active" : ""}`, attrs: { "data-tab": key, role: "tab" }, on: { click: () => choose("tab", key) } }, label + extra),
      );
    }
    clear(tabbody);
    const stages = get("stages") ?? [];
    const index = get("index");
    if (loading() && tab !== "run") tabbody.appendChild(h("p", { class: "gx-empty gx-loading-note" }, `loading stage ${index}…`));
    else if (tab === "diff") tabbody.appendChild(diffTable(get("ir_diff") ?? [], index === 0));
    else if (tab === "rewrites") tabbody.appendChild(rewritesList(get("rewrites") ?? [], get("selected_rewrite"), (k) => choose("selected_rewrite", k)));
    else if (tab === "cost") tabbody.appendChild(costPanel(get("cost")));
    else if (tab === "kernels") tabbody.appendChild(kernelsPanel(get("kernels") ?? []));
    else if (tab === "run") {
      tabbody.appendChild(
        runPanel({
          backends: get("backends") ?? [],
          chosen: get("run_backends") ?? get("backends") ?? [],
          baselines: get("run_baselines") !== false,
          onChoose: (backends, baselines) => {
            model.set("run_backends", backends);
            model.set("run_baselines", baselines);
            model.save_changes();
          },
          interactive: get("interactive") !== false,
          state: get("run_state") ?? { running: false, done: 0, total: 0, message: "", pending: [] },
          rows: get("run_rows") ?? [],
          stageName: stages[index]?.name ?? "",
          onRun: (backends, baselines) => model.send({ type: "run", backends, baselines, stage: index } satisfies RunMessage),
        }),
      );
    }
  }

  function update(): void {
    scheduled = false;
    const d = dirty;
    dirty = new Set();
    const any = (...keys: (keyof Traits)[]) => keys.some((k) => d.has(k));
    if (any("title")) title.textContent = `gambit-explorer · ${get("title") ?? ""}`;
    if (any("hide_unchanged")) hide.checked = !!get("hide_unchanged");
    if (any("sync_panes")) sync.checked = get("sync_panes") !== false;
    if (any("search") && document.activeElement !== search) search.value = get("search") ?? "";
    if (any("stages", "index", "hide_unchanged")) renderChips();
    if (any("stages", "index", "diff_counts", "note", "view_index")) renderHeading();
    root.classList.toggle("gx-loading", loading());
    const index = get("index");
    const single = !get("before_svg");
    const relayout = single !== graphs.classList.contains("gx-single");
    graphs.classList.toggle("gx-single", single);
    if (any("before_svg")) showSvg(before, get("before_svg") ?? "", index === 0 ? "the traced program: no earlier stage" : "no graph");
    if (any("after_svg")) showSvg(after, get("after_svg") ?? "", "no graph");
    else if (relayout) after.panzoom?.fit();
    if (any("before_svg", "after_svg", "search", "selected_rewrite", "rewrites", "before_words", "after_words")) {
      applyHighlights(d.has("selected_rewrite") && get("selected_rewrite") >= 0);
    }
    if (any("tab", "ir_diff", "rewrites", "selected_rewrite", "cost", "kernels", "run_rows", "run_state", "backends", "index", "interactive", "run_backends", "run_baselines", "view_index")) renderTabs();
  }
  update();

  return () => {
    for (const [ev, cb] of listeners) model.off(ev, cb);
    root.removeEventListener("keydown", onKey);
    before.panzoom?.destroy();
    after.panzoom?.destroy();
    root.remove();
  };
}
