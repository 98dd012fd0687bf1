// The step-through pass widget: a bar of stage chips, before/after graphs, and tabs.
// It draws the model's traits and writes back only the user's choices (schema.Choice in
// schema.gen.ts) and its requests (a run, a profile, a reproducer script).

import { clear, h } from "./dom";
import { formatSeconds } from "./format";
import { applyOverlay, overlayLegend, selectBoxes } from "./overlay";
import { missedLines, remarksAt, whyPanel } from "./remarks";
import { forStage, type MeasuredContext, memoryPanel, profileBar, rooflinePanel, shareText, shortLine } from "./measured";
import { PanZoom, type ViewOp } from "./panzoom";
import { sanitizeSvg } from "./sanitize";
import { findHits } from "./search";
import { labelOf } from "./heat";
import { boxesOfLine, boxKey, keyOf, linesOnShow, scrollToSelected, sourcePanel } from "./source";
import { stepFiring, stepIndex } from "./stepping";
import { type Choice, type ProfileData, type ProfileMessage, type ReproducerFile, type ReproducerMessage, type RunMessage, type Tab, TRAIT_NAMES, type Traits } from "./schema.gen";
import type { Model } from "./types";
import { costPanel, diffTable, kernelsPanel, rewritesList, runPanel, type SavedFile } from "./views";
import { whatIfPanel } from "./whatif";

export const TABS: [Tab, string][] = [
  ["diff", "IR diff"],
  ["rewrites", "rewrites"],
  ["why", "why"],
  ["cost", "cost"],
  ["kernels", "kernels"],
  ["run", "run"],
  ["roofline", "roofline"],
  ["memory", "memory"],
];

interface Pane {
  root: HTMLElement;
  label: HTMLElement;
  canvas: HTMLElement;
  minimap: HTMLElement;
  svgText: string | null;
  svg: SVGSVGElement | null;
  panzoom: PanZoom | null;
  onView: ((op: ViewOp) => void) | null; // the user moved this pane's view
  onToggle: ((key: string, open: boolean) => void) | null; // the user clicked a group or region
  onPick: ((key: string) => void) | null; // the user clicked a box that is no group
}

/** The element key of a clickable group or region (its `gx_<key>` class) and whether it is open. */
export function toggleTarget(el: Element | null): { key: string; open: boolean } | null {
  const g = el?.closest?.(".gx_toggle");
  const key = g ? keyOf(g) : null;
  return g && key ? { key, open: g.classList.contains("gx_open") } : null;
}

function makePane(side: string): Pane {
  const label = h("span", { class: "gx-pane-label" });
  const canvas = h("div", { class: "gx-canvas" });
  const minimap = h("div", { class: "gx-minimap", title: "the whole graph: click to go there" });
  const pane: Pane = { root: h("div"), label, canvas, minimap, svgText: null, svg: null, panzoom: null, onView: null, onToggle: null, onPick: null };
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
        button("fit", "show the whole graph", () => {
          pane.panzoom?.fit(true, true);
        }),
      ),
    ),
    h("div", { class: "gx-canvaswrap" }, canvas, minimap),
  );
  minimap.addEventListener("pointerdown", (ev: PointerEvent) => {
    const svg = minimap.querySelector("svg");
    const pz = pane.panzoom;
    if (!svg || !pz) return;
    const r = svg.getBoundingClientRect();
    const vb = svg.viewBox.baseVal;
    const s = Math.min(r.width / vb.width, r.height / vb.height) || 1;
    const ox = (r.width - vb.width * s) / 2;
    const oy = (r.height - vb.height * s) / 2;
    pz.centre(vb.x + (ev.clientX - r.left - ox) / s, vb.y + (ev.clientY - r.top - oy) / s);
    ev.stopPropagation();
  });
  return pane;
}

function showSvg(pane: Pane, text: string, placeholder: string): void {
  if (pane.svgText === text) return;
  pane.svgText = text;
  pane.panzoom?.destroy();
  pane.panzoom = null;
  clear(pane.canvas);
  pane.svg = sanitizeSvg(text);
  clear(pane.minimap);
  if (!pane.svg) {
    pane.canvas.appendChild(h("p", { class: "gx-empty" }, placeholder));
    return;
  }
  pane.canvas.appendChild(pane.svg);
  drawMinimap(pane);
  pane.panzoom = new PanZoom(pane.canvas, pane.svg);
  pane.panzoom.onChange = (op) => pane.onView?.(op);
  pane.panzoom.onTap = (target) => {
    const t = toggleTarget(target);
    if (t) pane.onToggle?.(t.key, t.open);
    else {
      const key = boxKey(target);
      if (key) pane.onPick?.(key);
    }
  };
  pane.panzoom.onView = (v) => moveMinimap(pane, v);
  moveMinimap(pane, pane.panzoom.view);
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** A copy of the graph at thumbnail size, with a frame where the view is; shown only when
 * the graph does not fit its pane. */
function drawMinimap(pane: Pane): void {
  clear(pane.minimap);
  if (!pane.svg) return;
  const copy = pane.svg.cloneNode(true) as SVGSVGElement;
  copy.removeAttribute("width");
  copy.removeAttribute("height");
  copy.setAttribute("preserveAspectRatio", "xMidYMid meet");
  // a picture only: no classes (searches and tests count the pane's own nodes), no text
  for (const el of Array.from(copy.querySelectorAll("[class], text, title"))) {
    if (el.tagName.toLowerCase() === "g") el.removeAttribute("class");
    else el.remove();
  }
  const frame = document.createElementNS(SVG_NS, "rect");
  frame.setAttribute("class", "gx-minimap-frame");
  copy.appendChild(frame);
  pane.minimap.appendChild(copy);
}

function moveMinimap(pane: Pane, v: { x: number; y: number; w: number; h: number }): void {
  const copy = pane.minimap.querySelector("svg");
  const frame = copy?.querySelector(".gx-minimap-frame");
  if (!copy || !frame) return;
  const vb = copy.viewBox.baseVal;
  const whole = !vb || !vb.width || (v.x <= vb.x + 1 && v.y <= vb.y + 1 && v.x + v.w >= vb.x + vb.width - 1 && v.y + v.h >= vb.y + vb.height - 1);
  pane.minimap.classList.toggle("gx-hidden", whole);
  frame.setAttribute("x", String(v.x));
  frame.setAttribute("y", String(v.y));
  frame.setAttribute("width", String(v.w));
  frame.setAttribute("height", String(v.h));
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

/** Save `text` as a file named `filename` (a download through a blob: link); returns the
 * link's address, which stays valid so the user can save it again. */
export function saveFile(filename: string, text: string): string {
  const url = URL.createObjectURL(new Blob([text], { type: "text/x-python" }));
  const a = h("a", { attrs: { href: url, download: filename } });
  a.style.display = "none";
  document.body.appendChild(a);
  a.click();
  a.remove();
  return url;
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
  const firingsHere = () => {
    const s = (get("stages") ?? [])[get("index")];
    return s?.steppable ? s.rewrites : 0;
  };
  const canStepFirings = () => get("interactive") !== false && firingsHere() > 0;
  const stepFirings = (delta: number) => {
    if (!canStepFirings()) return;
    const next = stepFiring(get("firing") ?? -1, firingsHere(), delta);
    if (next !== get("firing")) choose("firing", next);
  };
  const wholePass = () => {
    if ((get("firing") ?? -1) >= 1) choose("firing", -1);
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
  const showSource = h("input", { attrs: { type: "checkbox" }, on: { change: () => choose("show_source", showSource.checked) } }) as HTMLInputElement;
  const source = h("div", { class: "gx-src", attrs: { "aria-label": "source" } });
  const heading = h("div", { class: "gx-heading" });
  const legend = h("div", { class: "gx-legend" });
  const before = makePane("before");
  const after = makePane("after");
  const graphs = h("div", { class: "gx-graphs" }, before.root, after.root);
  const board = h("div", { class: "gx-board" }, source, graphs);
  // the same move in the other pane, when synchronised (sync_panes, on by default)
  const mirror = (other: Pane) => (op: ViewOp) => {
    if (get("sync_panes") !== false && !graphs.classList.contains("gx-single")) other.panzoom?.perform(op);
  };
  before.onView = mirror(after);
  after.onView = mirror(before);
  const toggle = (key: string, open: boolean) => {
    if (get("selected_node") !== key) choose("selected_node", key);
    if (get("interactive") === false) {
      legendHint.textContent = "open and close groups in a live notebook";
      return;
    }
    choose("opened", { ...(get("opened") ?? {}), [key]: !open });
    graphs.classList.add("gx-loading");
    focusKey = key; // when the redrawn graph arrives, centre on what was clicked
  };
  let focusKey: string | null = null;
  const focus = () => {
    if (!focusKey || !/^[A-Za-z0-9_]+$/.test(focusKey)) return;
    for (const pane of [before, after]) {
      const found = pane.svg ? Array.from(pane.svg.querySelectorAll(`.gx_${focusKey}`)) : [];
      if (found.length) pane.panzoom?.reveal(found);
    }
    focusKey = null;
  };
  before.onToggle = toggle;
  after.onToggle = toggle;
  // a box picks its line in the source panel (the panel scrolls to it; the graphs stay put)
  let lineFromPanel = false;
  const pickLine = (loc: string, fromPanel: boolean) => {
    lineFromPanel = fromPanel;
    choose("selected_line", loc);
  };
  // a box (or a region or group, as it opens) is selected too: the why tab lists its remarks
  const pickBox = (key: string, loc: string) => {
    lineFromPanel = false;
    model.set("selected_node", key === get("selected_node") ? "" : key);
    model.set("selected_line", loc);
    model.save_changes();
  };
  before.onPick = (key) => pickBox(key, (get("before_lines") ?? {})[key]?.[0] ?? "");
  after.onPick = (key) => pickBox(key, (get("after_lines") ?? {})[key]?.[0] ?? "");
  const legendHint = h("span", { class: "gx-note gx-legend-hint" });
  // a saved page: where the live controls would be, say that they need a kernel
  const liveOnly = h("span", { class: "gx-live-only", title: "this page has no Python behind it" }, "saved page: the what-if controls (memory limit, pipeline), runs and profiles need a Jupyter kernel");
  const loading = h("div", { class: "gx-loading-note" }, "loading…");
  const tabbar = h("div", { class: "gx-tabbar", attrs: { role: "tablist" } });
  const tabbody = h("div", { class: "gx-tabbody" });
  const tip = h("div", { class: "gx-tip", attrs: { role: "tooltip" } });
  const whatif = whatIfPanel(model); // the memory limit and pipeline controls (whatif.ts)

  const root = h(
    "div",
    // Lumino (JupyterLab, Notebook 7) ignores shortcuts from inside this element: the arrow
    // keys step stages here instead of moving between cells
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
      h("label", { class: "gx-showsrc", title: "the source beside the graphs: click a line to light its nodes, a node to find its line" }, showSource, " source"),
      search,
      hits,
      liveOnly,
    ),
    chips,
    whatif.el,
    heading,
    legend,
    board,
    tabbar,
    tabbody,
    tip,
  );
  board.appendChild(loading);
  el.appendChild(root);

  // hover texts: any element with a data-tip (heated boxes, plot points, bars, steps)
  const onHover = (ev: PointerEvent) => {
    const target = (ev.target as Element | null)?.closest?.("[data-tip]");
    if (!target || !root.contains(target)) {
      tip.style.display = "none";
      return;
    }
    tip.textContent = target.getAttribute("data-tip");
    tip.style.display = "block";
    const r = root.getBoundingClientRect();
    let x = ev.clientX - r.left + 14;
    if (x + tip.offsetWidth > r.width) x = Math.max(0, ev.clientX - r.left - tip.offsetWidth - 10);
    // below the pointer, or above it where the window or the widget (its output area clips it) ends first
    const below = ev.clientY + 16 + tip.offsetHeight <= Math.min(window.innerHeight || Infinity, r.bottom);
    tip.style.left = `${x}px`;
    tip.style.top = `${below ? ev.clientY - r.top + 16 : ev.clientY - r.top - tip.offsetHeight - 10}px`;
  };
  const hideTip = () => (tip.style.display = "none");
  root.addEventListener("pointermove", onHover);
  root.addEventListener("pointerleave", hideTip);

  // requests to Python: a profile, a reproducer script (answered by a message)
  const live = () => get("interactive") !== false;
  const profileNow = (backend: string) => {
    if (backend && backend !== get("profile_backend")) choose("profile_backend", backend);
    model.send({ type: "profile", backend, stage: get("index") } satisfies ProfileMessage);
  };
  let saved: SavedFile | null = null;
  const askReproducer = (kernel: number | string | null) => {
    const index = get("index");
    saved = { filename: kernel === null ? `the reproducer of stage ${index}` : `the reproducer of ${typeof kernel === "number" ? `%${kernel}` : kernel}`, url: "", error: "", pending: true };
    model.send({ type: "reproducer", stage: index, ...(kernel === null ? {} : { kernel }) } satisfies ReproducerMessage);
    renderTabs();
  };
  const onCustom = (content: unknown) => {
    const msg = content as ReproducerFile | null;
    if (!msg || msg.type !== "reproducer") return;
    if (saved?.url) URL.revokeObjectURL(saved.url);
    saved = msg.error
      ? { filename: msg.filename, url: "", error: msg.error, pending: false }
      : { filename: msg.filename, url: saveFile(msg.filename, msg.text), error: "", pending: false };
    renderTabs();
  };
  model.on("msg:custom", onCustom);

  const onKey = (ev: KeyboardEvent) => {
    const target = ev.target as HTMLElement | null;
    if (target && /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName)) return;
    if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") {
      const delta = ev.key === "ArrowRight" ? 1 : -1;
      if (ev.shiftKey) stepFirings(delta); // shift: firing by firing inside the stage's pass
      else step(delta);
      ev.preventDefault();
      ev.stopPropagation();
    } else if (ev.key === "Escape" && (get("firing") ?? -1) >= 1) {
      wholePass();
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
    const stale = isStale();
    const counts: Record<string, number | string> = stale ? { added: "…", removed: "…", changed: "…" } : { ...(get("diff_counts") ?? {}) };
    const what = index === 0 ? "the traced program" : s.changed ? `${s.rewrites} rewrites` : "changed nothing";
    heading.append(`stage ${index}/${stages.length - 1}: `, h("b", {}, s.name), ` · ${s.nodes} nodes · ${what}`);
    if (s.steppable) heading.appendChild(firingBar(s.rewrites));
    for (const k of ["added", "removed", "changed"] as const) {
      legend.appendChild(h("span", { class: `gx-swatch gx-swatch-${k}` }, `${k} ${counts[k] ?? 0}`));
    }
    legend.appendChild(h("span", { class: "gx-swatch gx-swatch-hl" }, "highlighted"));
    legend.appendChild(h("span", { class: "gx-swatch gx-swatch-region", title: "kernels, loops and control flow: click to open or close" }, "region"));
    legend.appendChild(h("span", { class: "gx-swatch gx-swatch-opaque", title: "a JAX primitive without a row in the op table: it runs through JAX" }, "opaque"));
    legend.appendChild(h("span", { class: "gx-swatch gx-swatch-group", title: "nodes of one scope, function or line: click to open or close" }, "group"));
    const note = stale ? "" : get("note");
    if (note) legend.appendChild(h("span", { class: "gx-note" }, `(${note})`));
    const overlay = overlayLegend(get, choose, index, isStale());
    if (overlay) legend.appendChild(overlay);
    legend.appendChild(legendHint);
    before.label.textContent = index > 0 ? `before: ${stages[index - 1].name}` : "before";
    after.label.textContent = index > 0 ? `after: ${s.name}` : "the traced program";
  }

  /** How the why tab names a selected box: "%5 add", else its label. */
  function boxName(key: string): string {
    for (const pane of [after, before]) {
      const g = key && /^[A-Za-z0-9_]+$/.test(key) ? pane.svg?.querySelector(`.gx_${key}`) : null;
      if (g) {
        const id = /^n(\d+)$/.exec(key)?.[1];
        const label = labelOf(g);
        return id && !label.startsWith("%") ? `%${id} ${label}` : label;
      }
    }
    return key;
  }

  function isStale(): boolean {
    const index = get("index");
    const stage = get("stage");
    return (stage !== undefined && stage !== index) || (get("shown_firing") ?? -1) !== (get("firing") ?? -1);
  }

  /** Step the stage's pass firing by firing (a rule-driven pass that fired): ◀ k/n ▶. */
  function firingBar(n: number): HTMLElement {
    const k = get("firing") ?? -1;
    const live = get("interactive") !== false;
    const bar = h("span", { class: "gx-firing", title: live ? "step the pass one rewrite at a time (shift+← →; Esc: the whole pass)" : "step firings in a live notebook" });
    const button = (text: string, title: string, fn: () => void, cls = "") =>
      h("button", { class: `gx-zoom ${cls}`.trim(), title, attrs: live ? {} : { disabled: "true" }, on: { click: fn } }, text);
    bar.append(
      " · ",
      button("◀", "previous firing (shift+←)", () => stepFirings(-1), "gx-firing-prev"),
      h("span", { class: "gx-firing-label" }, k >= 1 ? `firing ${k}/${n}` : `${n} firing${n > 1 ? "s" : ""}`),
      button("▶", "next firing (shift+→)", () => stepFirings(1), "gx-firing-next"),
    );
    if (k >= 1) bar.appendChild(button("whole pass", "the whole pass (Esc)", wholePass, "gx-firing-whole"));
    const rw = (get("rewrites") ?? [])[0];
    if (k >= 1 && !isStale() && rw) {
      bar.append(" ", h("span", { class: "gx-firing-rule" }, h("b", {}, rw.rule), rw.source ? ` at ${rw.source}` : "", rw.line_text ? h("code", {}, ` ${rw.line_text}`) : ""));
    }
    return bar;
  }

  function renderSource(): void {
    const show = get("show_source") !== false && (get("source") ?? []).length > 0;
    board.classList.toggle("gx-with-source", show);
    clear(source);
    if (!show) return;
    const rewritten = new Map<string, number>();
    if (!isStale()) for (const rw of get("rewrites") ?? []) if (rw.source) rewritten.set(rw.source, (rewritten.get(rw.source) ?? 0) + 1);
    source.appendChild(
      sourcePanel({
        rows: get("source") ?? [],
        selected: get("selected_line") ?? "",
        onShow: linesOnShow(get("before_lines") ?? {}, get("after_lines") ?? {}),
        rewritten,
        missed: missedLines(isStale() ? [] : (get("remarks") ?? [])),
        onPick: (loc) => pickLine(loc, true),
      }),
    );
    scrollToSelected(source);
  }

  function applyHighlights(reveal: boolean): void {
    const query = get("search") ?? "";
    const pick = get("selected_rewrite");
    const rw = (get("rewrites") ?? [])[pick];
    const line = get("selected_line") ?? "";
    const hb = query ? findHits(get("before_words") ?? {}, query) : [];
    const ha = query ? findHits(get("after_words") ?? {}, query) : [];
    const lb = boxesOfLine(get("before_lines") ?? {}, line);
    const la = boxesOfLine(get("after_lines") ?? {}, line);
    const fb = highlight(before, [...hb, ...(rw?.before_keys ?? []), ...lb], query.length > 0);
    const fa = highlight(after, [...ha, ...(rw?.after_keys ?? []), ...la], query.length > 0);
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
      const nwhy = remarksAt(get("remarks") ?? [], get("selected_node") ?? "").length;
      const extra = key === "rewrites" ? ` (${nrw})` : key === "kernels" && nk ? ` (${nk})` : key === "why" && nwhy ? ` (${nwhy})` : "";
      tabbar.appendChild(
        h("button", { class: `gx-tab${key === tab ? " gx-active" : ""}`, attrs: { "data-tab": key, role: "tab" }, on: { click: () => choose("tab", key) } }, label + extra),
      );
    }
    clear(tabbody);
    const stages = get("stages") ?? [];
    const index = get("index");
    const measuredContext = (items: { stage: number; stage_name: string }[]): MeasuredContext => ({
      index,
      stageName: stages[index]?.name ?? "",
      taken: items.map((x) => ({ stage: x.stage, name: x.stage_name })),
      onGo: (k) => choose("index", k),
      onProfile: live() && !(get("profile_state")?.running) ? () => profileNow(get("profile_backend") ?? "") : null,
      backend: get("profile_backend") ?? "",
    });
    if (isStale() && tab !== "run" && tab !== "roofline" && tab !== "memory") {
      tabbody.appendChild(h("p", { class: "gx-empty gx-loading-tab" }, `loading stage ${index}…`));
    } else if (tab === "diff") tabbody.appendChild(diffTable(get("ir_diff") ?? [], index === 0));
    else if (tab === "why") {
      const key = get("selected_node") ?? "";
      tabbody.appendChild(
        whyPanel({
          rows: get("remarks") ?? [],
          selected: key,
          selectedLabel: boxName(key),
          stageName: stages[index]?.name ?? "",
          traced: index === 0,
          onSelect: (k) => choose("selected_node", k),
          onLine: (loc) => {
            if (get("show_source") === false) model.set("show_source", true);
            pickLine(loc, true);
          },
        }),
      );
    } else if (tab === "rewrites") {
      const firing = get("firing") ?? -1;
      const onStep = canStepFirings() && firing < 1 ? (k: number) => choose("firing", k + 1) : null;
      tabbody.appendChild(rewritesList(get("rewrites") ?? [], get("selected_rewrite"), (k) => choose("selected_rewrite", k), onStep, firing >= 1 ? firing - 1 : 0));
    }
    else if (tab === "cost") tabbody.appendChild(costPanel(get("cost")));
    else if (tab === "kernels") {
      tabbody.appendChild(
        kernelsPanel({
          kernels: get("kernels") ?? [],
          profile: forStage(get("profiles"), index),
          stage: index,
          stageName: stages[index]?.name ?? "",
          onReproducer: live() ? askReproducer : null,
          saved,
        }),
      );
    } else if (tab === "roofline") {
      const items = get("rooflines") ?? [];
      tabbody.appendChild(rooflinePanel(forStage(items, index), measuredContext(items)));
    } else if (tab === "memory") {
      const items = get("timelines") ?? [];
      tabbody.appendChild(memoryPanel(forStage(items, index), measuredContext(items)));
    }
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
          profile: profileBar({
            backends: get("backends") ?? [],
            chosen: get("profile_backend") ?? "",
            onChoose: (b) => choose("profile_backend", b),
            interactive: live(),
            state: get("profile_state") ?? { running: false, message: "", error: "" },
            stageName: stages[index]?.name ?? "",
            prevName: index > 0 ? (stages[index - 1]?.name ?? null) : null,
            onProfile: profileNow,
          }),
        }),
      );
    }
  }

  function update(): void {
    scheduled = false;
    const d = dirty;
    dirty = new Set();
    const any = (...keys: (keyof Traits)[]) => keys.some((k) => d.has(k));
    if (any("interactive")) liveOnly.style.display = get("interactive") === false ? "" : "none";
    if (any("memory_limit", "pipeline", "pass_names", "whatif", "interactive")) whatif.update();
    if (any("title")) title.textContent = `gambit-explorer · ${get("title") ?? ""}`;
    if (any("hide_unchanged")) hide.checked = !!get("hide_unchanged");
    if (any("sync_panes")) sync.checked = get("sync_panes") !== false;
    if (any("show_source", "source")) showSource.checked = get("show_source") !== false;
    if (any("search") && document.activeElement !== search) search.value = get("search") ?? "";
    if (any("stages", "index", "hide_unchanged")) renderChips();
    if (any("stages", "index", "diff_counts", "note", "stage", "firing", "shown_firing", "rewrites", "interactive", "profiles", "show_heat", "errors", "colour_by", "heat_scale", "remarks", "show_missed")) renderHeading();
    // the view traits lag the chosen stage while Python builds them: say so, show nothing stale
    const stale = isStale();
    root.classList.toggle("gx-stale", stale);
    const firing = get("firing") ?? -1;
    loading.textContent = stale ? `loading stage ${get("index")}${firing >= 1 ? `, firing ${firing}` : ""}…` : "updating…";
    if (any("source", "show_source", "selected_line", "before_lines", "after_lines", "rewrites", "remarks", "stage", "firing", "shown_firing")) renderSource();
    if (any("before_svg", "after_svg", "stage", "note")) graphs.classList.remove("gx-loading");
    board.classList.toggle("gx-busy", stale || graphs.classList.contains("gx-loading"));
    const index = get("index");
    const single = !get("before_svg");
    const relayout = single !== graphs.classList.contains("gx-single");
    graphs.classList.toggle("gx-single", single);
    if (any("before_svg")) showSvg(before, get("before_svg") ?? "", index === 0 ? "the traced program: no earlier stage" : "no graph");
    if (any("after_svg")) showSvg(after, get("after_svg") ?? "", "no graph");
    else if (relayout) after.panzoom?.fit();
    if (any("before_svg", "after_svg")) focus();
    if (any("before_svg", "after_svg", "before_groups", "after_groups", "profiles", "show_heat", "stage", "index", "firing", "shown_firing", "errors", "colour_by", "heat_scale", "remarks", "show_missed")) {
      applyOverlay(get, [{ svg: before.svg, canvas: before.canvas, groups: get("before_groups") ?? {}, side: "before" }, { svg: after.svg, canvas: after.canvas, groups: get("after_groups") ?? {}, side: "after" }], isStale(), legend);
    }
    if (any("before_svg", "after_svg", "selected_node")) selectBoxes([before.svg, after.svg], get("selected_node") ?? "");
    if (any("before_svg", "after_svg", "search", "selected_rewrite", "rewrites", "before_words", "after_words", "selected_line", "before_lines", "after_lines")) {
      const revealLine = d.has("selected_line") && lineFromPanel && !!get("selected_line");
      applyHighlights((d.has("selected_rewrite") && get("selected_rewrite") >= 0) || revealLine);
    }
    if (any("tab", "ir_diff", "rewrites", "selected_rewrite", "cost", "kernels", "run_rows", "run_state", "backends", "index", "stage", "interactive", "run_backends", "run_baselines", "firing", "shown_firing", "profiles", "rooflines", "timelines", "profile_state", "profile_backend", "remarks", "selected_node")) renderTabs();
  }
  update();

  return () => {
    for (const [ev, cb] of listeners) model.off(ev, cb);
    model.off("msg:custom", onCustom);
    if (saved?.url) URL.revokeObjectURL(saved.url);
    root.removeEventListener("keydown", onKey);
    root.removeEventListener("pointermove", onHover);
    root.removeEventListener("pointerleave", hideTip);
    before.panzoom?.destroy();
    after.panzoom?.destroy();
    root.remove();
  };
}
