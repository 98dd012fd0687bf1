import "./setup-dom";
import { beforeEach, describe, it } from "node:test";
import { expect } from "./expect";
import { sanitizeSvg } from "../src/sanitize";
import { StaticModel } from "../src/static-model";
import { renderWidget, toggleTarget } from "../src/widget";
import { costPanel, diffTable } from "../src/views";
import { boxKeys, hottest } from "../src/heat";

import { timelinePlot } from "../src/plot";
import { profileTable, rooflinePanel } from "../src/measured";
import { fixture, measured } from "./fixture";

const flush = () => new Promise((r) => setTimeout(r, 0));
const tap = (target: Element) => {
  const canvas = target.closest(".gx-canvas")!;
  target.dispatchEvent(new PointerEvent("pointerdown", { button: 0, clientX: 5, clientY: 5, bubbles: true }));
  canvas.dispatchEvent(new PointerEvent("pointerup", { button: 0, clientX: 5, clientY: 5, bubbles: true }));
};

describe("sanitizeSvg", () => {
  it("drops scripts, handlers and javascript: links", () => {
    const svg = sanitizeSvg(
      `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" onload="alert(1)">` +
        `<script>alert(2)</script><g onclick="alert(3)"><a xlink:href="javascript:alert(4)" href=" JavaScript:x"><text>&lt;script&gt;</text></a></g>` +
        `<foreignObject><div>x</div></foreignObject></svg>`,
    )!;
    expect(svg).not.toBeNull();
    const html = svg.outerHTML;
    expect(html).not.toMatch(/onload|onclick|<script|javascript|foreignObject/i);
    expect(svg.querySelector("text")!.textContent).toBe("<script>");
  });
  it("refuses what is not an svg", () => {
    expect(sanitizeSvg("")).toBeNull();
    expect(sanitizeSvg("<html><body/></html>")).toBeNull();
  });
});

describe("StaticModel", () => {
  it("reads per-stage keys from the current stage and reports changes", () => {
    const m = new StaticModel(fixture());
    const seen: string[] = [];
    for (const k of ["index", "rewrites", "after_svg"]) m.on(`change:${k}`, () => seen.push(k));
    expect(m.get("rewrites")).toEqual([]);
    expect(m.get("interactive")).toBe(false);
    m.set("index", 1);
    expect(seen).toEqual([]); // only on save_changes
    m.save_changes();
    expect(seen.sort()).toEqual(["after_svg", "index", "rewrites"]);
    expect(m.get("rewrites")[0].rule).toBe("mul-by-two");
    m.set("index", 42);
    expect(m.get("index")).toBe(3);
  });
});

describe("the widget", () => {
  let el: HTMLElement;
  let model: StaticModel;
  beforeEach(async () => {
    document.body.innerHTML = "";
    el = document.createElement("div");
    document.body.appendChild(el);
    model = new StaticModel(fixture());
    renderWidget(model, el);
    await flush();
  });
  const key = (k: string) => el.querySelector(".gx-root")!.dispatchEvent(new KeyboardEvent("keydown", { key: k, bubbles: true }));
  const current = () => el.querySelector(".gx-chip.gx-current")!.textContent;

  it("shows the title as text and a chip per stage", () => {
    expect(el.querySelector(".gx-title")!.textContent).toBe("gambit-explorer · f<&>");
    expect(el.querySelectorAll(".gx-chip").length).toBe(4);
    expect(el.querySelectorAll(".gx-chip.gx-unchanged").length).toBe(1);
    expect(current()).toBe("0 traced");
  });

  it("steps with the arrow keys and the buttons", async () => {
    key("ArrowRight");
    await flush();
    expect(model.get("index")).toBe(1);
    expect(current()).toBe("1 simplify");
    expect(el.querySelector(".gx-pane-before svg")).not.toBeNull();
    key("ArrowRight");
    key("ArrowRight");
    await flush();
    expect(current()).toBe("3 dce");
    expect(el.querySelectorAll(".gx-pane-after g.node").length).toBe(2);
    (el.querySelector(".gx-prev") as HTMLButtonElement).click();
    await flush();
    expect(current()).toBe("2 cse");
    key("ArrowLeft");
    key("ArrowLeft");
    key("ArrowLeft");
    await flush();
    expect(current()).toBe("0 traced");
  });

  it("hides unchanged stages and skips them", async () => {
    (el.querySelector(".gx-hide input") as HTMLInputElement).click();
    await flush();
    expect(el.querySelectorAll(".gx-chip.gx-hidden").length).toBe(1);
    key("ArrowRight");
    key("ArrowRight");
    await flush();
    expect(current()).toBe("3 dce");
  });

  it("highlights search hits and a clicked rewrite's nodes", async () => {
    model.set("index", 1);
    model.save_changes();
    await flush();
    const search = el.querySelector(".gx-search") as HTMLInputElement;
    search.value = "add";
    search.dispatchEvent(new Event("input"));
    await flush();
    expect(model.get("search")).toBe("add");
    expect(el.querySelectorAll(".gx-pane-after .gx-hl").length).toBe(2);
    expect(el.querySelectorAll(".gx-pane-before .gx-hl").length).toBe(1);
    search.value = "";
    search.dispatchEvent(new Event("input"));
    await flush();
    expect(el.querySelectorAll(".gx-hl").length).toBe(0);
    (el.querySelector('[data-tab="rewrites"]') as HTMLButtonElement).click();
    await flush();
    const row = el.querySelector(".gx-rewrite") as HTMLElement;
    expect(row.textContent).toContain("</script><b>hi</b>"); // as text
    expect(el.querySelector(".gx-tabbody b")).toBeNull();
    row.click();
    await flush();
    expect(model.get("selected_rewrite")).toBe(0);
    expect(Array.from(el.querySelectorAll(".gx-hl")).map((g) => g.getAttribute("class"))).toEqual([
      "node gx_n1 gx-missed gx-hl", // stage 1's pass missed something at %1: its marker
      "node gx_n1 gx-missed gx-hl",
    ]);
  });

  it("shows the IR diff, cost, kernels and run tabs", async () => {
    expect(el.querySelectorAll(".gx-irdiff.gx-single tr").length).toBe(3); // stage 0: one column
    model.set("index", 1);
    model.save_changes();
    await flush();
    expect(el.querySelectorAll(".gx-irdiff tr").length).toBe(3);
    expect(el.querySelector(".gx-row-replace .gx-right")!.textContent).toBe("  %1 = add(%0, %0)");
    model.set("tab", "cost");
    model.save_changes();
    await flush();
    expect(el.querySelector(".gx-cost")!.textContent).toContain("−2 (−16.7%)");
    expect(el.querySelector(".gx-timeline path")).not.toBeNull();
    model.set("tab", "kernels");
    model.save_changes();
    await flush();
    expect(el.querySelector(".gx-tabbody")!.textContent).toContain("no kernels in this stage");
    model.set("tab", "run");
    model.save_changes();
    await flush();
    expect(el.querySelector(".gx-tabbody")!.textContent).toContain("needs a Jupyter kernel");
  });

  const row = (over: Record<string, unknown>) => ({
    key: "k", kind: "stage", label: "dce on cpu", stage: 3, backend: "cpu", seconds: 0.002, min_seconds: 0.0019,
    repeats: 5, peak_bytes: 96, peak_how: "tracemalloc", check: "matches the reference", ok: true, error: "", workers: 0, dashboard: "", devices: null, ...over,
  });

  it("draws run rows as bars against the baselines", async () => {
    model.set("run_rows", [
      row({ key: "baseline:numpy", kind: "baseline", label: "NumPy", stage: null, backend: "numpy", seconds: 0.004 }),
      row({ key: "baseline:jax-jit", kind: "baseline", label: "jax.jit", stage: null, backend: "jax-jit", seconds: 0.001, peak_bytes: null, peak_how: "not visible on CPU" }),
      row({ key: "baseline:jax-eager", kind: "baseline", label: "JAX eager", stage: null, backend: "jax-eager", seconds: null, error: "cannot run: no Python function" }),
      row({ key: "3:cpu", seconds: 0.002, peak_bytes: 48 }),
      row({ key: "3:jax", label: "dce on jax", backend: "jax", seconds: 0.001, ok: false, check: "WRONG: relative error 1e-1" }),
      row({ key: "3:dask", label: "dce on dask", backend: "dask", seconds: 0.003, workers: 2, dashboard: "http://127.0.0.1:8787/status" }),
    ]);
    model.set("tab", "run");
    model.save_changes();
    await flush();
    const bars = Array.from(el.querySelectorAll(".gx-bar-time")) as HTMLElement[];
    expect(bars.map((b) => b.style.width)).toEqual(["100.0%", "25.0%", "50.0%", "25.0%", "75.0%"]);
    const link = el.querySelector('[data-key="3:dask"] a.gx-dashboard') as HTMLAnchorElement;
    expect(link.href).toBe("http://127.0.0.1:8787/status");
    expect(link.textContent).toBe("2 workers · dashboard");
    expect(el.querySelector('[data-key="3:cpu"] a.gx-dashboard')).toBeNull();
    expect(el.querySelectorAll(".gx-run-baseline").length).toBe(2);
    const unavailable = el.querySelector(".gx-run-unavailable")!;
    expect(unavailable.textContent).toContain("cannot run: no Python function");
    expect(el.querySelector('[data-key="baseline:jax-jit"]')!.textContent).toContain("n/a (not visible on CPU)");
    expect(el.querySelector('[data-key="3:cpu"] .gx-versus')!.textContent).toBe("2.00× slower");
    expect(el.querySelector('[data-key="baseline:numpy"] .gx-versus')!.textContent).toBe("4.00× slower");
    expect(el.querySelector(".gx-run-bad")!.textContent).toContain("✗ WRONG");
  });

  it("says per device where a sharded stage's figures are one device's", async () => {
    const base = fixture().views[1].cost!;
    const sharded = costPanel({ ...base, devices: 4, device_peak_bytes: 16, memory_limit: 32, per_device_limit: true });
    expect(sharded.querySelector(".gx-perdevice")!.textContent).toContain("planned peak per device (4 devices)16 B");
    expect(sharded.querySelector(".gx-cost")!.textContent).toContain("planned peak, all devices");
    expect(sharded.querySelector("figcaption")!.textContent).toContain("32 B per device, bounds the planned peak per device");
    const plain = costPanel(base);
    expect(plain.querySelector(".gx-perdevice")).toBeNull();
    expect(plain.querySelector(".gx-cost")!.textContent!.includes("per device")).toBe(false);
    model.set("run_rows", [row({ key: "3:jax", label: "dce on jax", backend: "jax", peak_bytes: 1024, peak_how: "XLA memory_analysis, per device", devices: 4 })]);
    model.set("tab", "run");
    model.save_changes();
    await flush();
    expect(el.querySelector('[data-key="3:jax"]')!.textContent).toContain("1.0 KiB per device");
  });

  it("shows the runs still to come while running", async () => {
    model.set("run_rows", [row({ key: "baseline:numpy", kind: "baseline", label: "NumPy", backend: "numpy" })]);
    model.set("run_state", { running: true, done: 1, total: 3, message: "measuring baseline jax-eager (2/3)", pending: ["baseline jax-eager", "dce on cpu"] });
    model.set("tab", "run");
    model.save_changes();
    await flush();
    const pending = Array.from(el.querySelectorAll(".gx-run-pending")).map((r) => r.textContent);
    expect(pending).toEqual(["baseline jax-eagerrunning…", "dce on cpuwaiting"]);
    expect(el.querySelector(".gx-progress")!.textContent).toContain("(2/3)");
  });

  it("keeps the run tab's choices in the model and sends them with a run", async () => {
    const sent: unknown[] = [];
    model.send = (content: unknown) => sent.push(content);
    model.set("interactive", true);
    model.set("backends", ["reference", "cpu"]);
    model.set("run_backends", ["cpu"]);
    model.set("tab", "run");
    model.save_changes();
    await flush();
    const box = (b: string) => el.querySelector(`.gx-backend input[value="${b}"]`) as HTMLInputElement;
    expect(box("reference").checked).toBe(false);
    expect(box("cpu").checked).toBe(true);
    box("reference").click();
    (el.querySelector(".gx-baselines input") as HTMLInputElement).click();
    await flush();
    expect(model.get("run_backends")).toEqual(["reference", "cpu"]);
    expect(model.get("run_baselines")).toBe(false);
    model.set("run_state", { running: false, done: 1, total: 1, message: "measured 1 runs", pending: [] });
    model.save_changes();
    await flush(); // redrawn: the choices stay
    expect(box("reference").checked).toBe(true);
    (el.querySelector(".gx-run") as HTMLButtonElement).click();
    expect(sent).toEqual([{ type: "run", backends: ["reference", "cpu"], baselines: false, stage: 0 }]);
  });

  it("pans and zooms the two graphs together unless told not to", async () => {
    model.set("index", 1);
    model.save_changes();
    await flush();
    const box = (side: string) => el.querySelector(`.gx-pane-${side} svg`)!.getAttribute("viewBox");
    const zoomIn = (side: string) => (el.querySelector(`.gx-pane-${side} .gx-zoom[title="zoom in"]`) as HTMLButtonElement).click();
    const sync = el.querySelector(".gx-sync input") as HTMLInputElement;
    expect(sync.checked).toBe(true);
    const [b0, a0] = [box("before"), box("after")];
    zoomIn("before");
    const [b1, a1] = [box("before"), box("after")];
    expect(b1).not.toBe(b0);
    expect(a1).not.toBe(a0);
    sync.click();
    await flush();
    expect(model.get("sync_panes")).toBe(false);
    zoomIn("before");
    expect(box("before")).not.toBe(b1);
    expect(box("after")).toBe(a1);
  });

  it("says a stage is loading, never showing the last stage's panels under its heading", async () => {
    const views = (model as any).data.views;
    views[1] = { ...views[1], stage: 0 }; // as a live model does while Python builds stage 1
    key("ArrowRight");
    await flush();
    const root = el.querySelector(".gx-root")!;
    expect(root.classList.contains("gx-stale")).toBe(true);
    expect(el.querySelector(".gx-loading-note")!.textContent).toBe("loading stage 1…");
    expect(el.querySelector(".gx-legend")!.textContent).toMatch(/added …/);
    expect(el.querySelector(".gx-tabbody")!.textContent).toBe("loading stage 1…");
    views[1] = { ...views[1], stage: 1 };
    model.set("index", 1);
    model.save_changes();
    (model as any).handlers.get("change:stage")?.forEach((cb: () => void) => cb());
    await flush();
    expect(root.classList.contains("gx-stale")).toBe(false);
  });

  it("keeps the arrow keys it handles from the notebook around it", async () => {
    let outside = 0;
    const listener = () => outside++;
    el.addEventListener("keydown", listener);
    key("ArrowRight");
    key("x");
    await flush();
    expect(outside).toBe(1); // only the "x"
    expect(el.querySelector(".gx-root")!.getAttribute("data-lm-suppress-shortcuts")).toBe("true");
  });

  it("links the source and the graphs both ways", async () => {
    model.set("index", 1);
    model.save_changes();
    await flush();
    const lines = Array.from(el.querySelectorAll(".gx-src-line")) as HTMLElement[];
    expect(lines.map((l) => l.querySelector(".gx-src-num")!.textContent)).toEqual(["1", "2", "3"]);
    expect(lines[1].querySelector(".gx-src-text")!.textContent).toBe("    y = x * 2  # </script><b>hi</b>"); // as text
    expect(el.querySelector(".gx-src b")).toBeNull();
    expect(lines[1].querySelector(".gx-src-mark")!.textContent).toBe("⟲"); // the stage's rewrite fired here
    expect(lines[0].classList.contains("gx-src-used")).toBe(false);
    lines[2].click(); // a line lights the boxes of its nodes, in both panes
    await flush();
    expect(model.get("selected_line")).toBe("In[3]:3");
    const lit = () => Array.from(el.querySelectorAll(".gx-hl")).map((g) => `${g.closest(".gx-pane")!.classList[1]} ${g.getAttribute("class")}`);
    expect(lit()).toEqual(["gx-pane-before node gx_n2 gx-missed gx-hl", "gx-pane-after node gx_n2 gx-missed gx-hl"]);
    expect(el.querySelector(".gx-src-selected")!.getAttribute("data-loc")).toBe("In[3]:3");
    tap(el.querySelector(".gx-pane-after .gx_n1 text")!); // a box picks its line
    await flush();
    expect(model.get("selected_line")).toBe("In[3]:2");
    expect(el.querySelector(".gx-src-selected")!.getAttribute("data-loc")).toBe("In[3]:2");
    expect(lit()).toEqual(["gx-pane-before node gx_n1 gx-missed gx-picked gx-hl", "gx-pane-after node gx_n1 gx-missed gx-picked gx-hl"]);
    (el.querySelector(".gx-showsrc input") as HTMLInputElement).click(); // the panel can go
    await flush();
    expect(model.get("show_source")).toBe(false);
    expect(el.querySelector(".gx-board")!.classList.contains("gx-with-source")).toBe(false);
  });

  it("steps a rule pass firing by firing in a live model, and says so in a static one", async () => {
    model.set("index", 1);
    model.save_changes();
    await flush();
    expect(el.querySelector(".gx-firing")!.textContent).toContain("1 firing");
    expect((el.querySelector(".gx-firing-next") as HTMLButtonElement).disabled).toBe(true); // no kernel
    model.set("interactive", true);
    model.save_changes();
    await flush();
    el.querySelector(".gx-root")!.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowRight", shiftKey: true, bubbles: true }));
    await flush();
    expect(model.get("firing")).toBe(1);
    expect(model.get("index")).toBe(1); // shift steps inside the stage, not to the next one
    // the view still shows the whole pass (shown_firing -1): loading, never stale panels
    expect(el.querySelector(".gx-root")!.classList.contains("gx-stale")).toBe(true);
    expect(el.querySelector(".gx-loading-note")!.textContent).toBe("loading stage 1, firing 1…");
    const views = (model as any).data.views;
    views[1] = { ...views[1], shown_firing: 1 };
    (model as any).handlers.get("change:shown_firing")?.forEach((cb: () => void) => cb());
    await flush();
    expect(el.querySelector(".gx-root")!.classList.contains("gx-stale")).toBe(false);
    expect(el.querySelector(".gx-firing")!.textContent).toContain("firing 1/1");
    expect(el.querySelector(".gx-firing-rule")!.textContent).toBe("mul-by-two at In[3]:2 y = x * 2  # </script><b>hi</b>");
    el.querySelector(".gx-root")!.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
    await flush();
    expect(model.get("firing")).toBe(-1);
    views[1] = { ...views[1], shown_firing: -1 }; // the whole pass's view again
    model.set("tab", "rewrites");
    model.save_changes();
    await flush();
    (el.querySelector(".gx-step-firing") as HTMLButtonElement).click(); // a row's firing
    expect(model.get("firing")).toBe(1);
  });

  it("says which region a rewrite fired in", async () => {
    const views = (model as any).data.views;
    views[1].rewrites[0] = { ...views[1].rewrites[0], region: "%7.body" };
    model.set("index", 1);
    model.set("tab", "rewrites");
    model.save_changes();
    await flush();
    expect(el.querySelector(".gx-rewrites td.gx-region")!.textContent).toBe("%7.body");
  });
});

describe("the overlay's scale", () => {
  it("tops out at a box or an open region's frame, never an open group's frame", () => {
    const svg = new DOMParser().parseFromString(
      `<svg xmlns="http://www.w3.org/2000/svg"><g class="node gx_n1"></g><g class="cluster gx_n7 gx_toggle gx_open gx_region"></g><g class="cluster gx_gaaaaaaaaaa gx_toggle gx_open"></g></svg>`,
      "image/svg+xml",
    ).documentElement as unknown as SVGSVGElement;
    expect([...boxKeys(svg)].sort()).toEqual(["n1", "n7"]);
    expect([...boxKeys(svg, "all")].sort()).toEqual(["gaaaaaaaaaa", "n1", "n7"]);
    const cells = new Map([["n1", { seconds: 1 }], ["n7", { seconds: 5 }], ["gaaaaaaaaaa", { seconds: 6 }]]);
    expect(hottest(cells, boxKeys(svg))).toBe(5); // the kernel, timed whole
  });
});

describe("why: remarks", () => {
  let el: HTMLElement;
  let model: StaticModel;
  beforeEach(async () => {
    document.body.innerHTML = "";
    el = document.createElement("div");
    document.body.appendChild(el);
    const data = fixture();
    data.state = { ...data.state, index: 1, show_missed: true, selected_node: "" };
    model = new StaticModel(data);
    renderWidget(model, el);
    await flush();
  });
  const why = async () => {
    (el.querySelector('[data-tab="why"]') as HTMLButtonElement).click();
    await flush();
    return el.querySelector(".gx-tabbody .gx-why") as HTMLElement;
  };

  it("lists the stage's remarks, missed first, with none selected", async () => {
    const panel = await why();
    expect(el.querySelector('[data-tab="why"]')!.textContent).toBe("why (3)");
    expect(panel.textContent).toContain("3 remarks (2 missed, 1 analysis)");
    const rows = Array.from(panel.querySelectorAll("tr.gx-remark")).map((r) => r.querySelector(".gx-rule")!.textContent);
    expect(rows).toEqual(["mul-by-one", "fold-in-body", "add-zero"]);
    expect(panel.querySelector("tbody b")).toBeNull(); // user text stays text
    expect(panel.textContent).toContain("%3 in %2.body");
  });

  it("lists a clicked box's remarks: a region's include its body's", async () => {
    tap(el.querySelector(".gx-pane-after .gx_n2 text")!);
    await flush();
    expect(model.get("selected_node")).toBe("n2");
    expect(el.querySelector(".gx-pane-after .gx_n2")!.classList.contains("gx-picked")).toBe(true);
    const panel = await why();
    expect(panel.textContent).toContain("why: ");
    expect(Array.from(panel.querySelectorAll(".gx-reason")).map((r) => r.textContent)).toEqual(["the body's constant is read twice", "%2 adds 1, not 0"]);
    (panel.querySelector(".gx-why-all") as HTMLButtonElement).click(); // back to the stage's list
    await flush();
    expect(model.get("selected_node")).toBe("");
    expect(el.querySelectorAll(".gx-tabbody tr.gx-remark").length).toBe(3);
    (el.querySelector(".gx-tabbody tr.gx-remark") as HTMLElement).click(); // a row selects its box
    await flush();
    expect(model.get("selected_node")).toBe("n1");
  });

  it("links a remark's line to the source panel", async () => {
    const panel = await why();
    (panel.querySelector('.gx-remark-line[data-loc="In[3]:3"]') as HTMLElement).click();
    await flush();
    expect(model.get("selected_line")).toBe("In[3]:3");
    expect(el.querySelector(".gx-src-selected")!.getAttribute("data-loc")).toBe("In[3]:3");
    expect(el.querySelector(".gx-pane-after .gx_n2")!.classList.contains("gx-hl")).toBe(true);
    const marks = Array.from(el.querySelectorAll(".gx-src-line")).map((l) => l.querySelector(".gx-src-why")!.textContent);
    expect(marks).toEqual(["", "?", "?"]);
  });

  it("marks the boxes of missed remarks, and the marks can be turned off", async () => {
    const marked = () => Array.from(el.querySelectorAll(".gx-pane-after .gx-missed")).map((g) => g.getAttribute("class")!.split(" ")[1]);
    expect(marked()).toEqual(["gx_n1", "gx_n2"]);
    const badge = el.querySelector(".gx-pane-after .gx_n1 .gx-missed-badge")!;
    expect(badge.getAttribute("data-tip")).toContain("missed [simplify] mul-by-one: x * 1.0 kept");
    expect(badge.querySelector("circle")!.getAttribute("cx")).toBe("49"); // the box's right edge, less 1
    const toggle = el.querySelector(".gx-missed-toggle input") as HTMLInputElement;
    expect(el.querySelector(".gx-missed-toggle")!.textContent).toContain("missed (2)");
    toggle.click();
    await flush();
    expect(model.get("show_missed")).toBe(false);
    expect(marked()).toEqual([]);
    expect(el.querySelectorAll(".gx-missed-badge").length).toBe(0);
  });

  it("has nothing to explain on the traced stage, and says the live controls need a kernel", async () => {
    model.set("index", 0);
    model.save_changes();
    await flush();
    const panel = await why();
    expect(panel.textContent).toContain("no pass ran yet");
    expect((el.querySelector(".gx-live-only") as HTMLElement).style.display).toBe("");
    expect(el.querySelector(".gx-live-only")!.textContent).toContain("need a Jupyter kernel");
  });
});

describe("groups and regions", () => {
  it("finds the key and state of a clicked group or region", () => {
    const svg = sanitizeSvg(
      `<svg xmlns="http://www.w3.org/2000/svg"><g class="node gx_g0123456789 gx_toggle gx_group"><polygon/><text>x</text></g>` +
        `<g class="cluster gx_n7 gx_changed gx_toggle gx_open gx_region"><path/></g><g class="node gx_n3"><text>y</text></g></svg>`,
    )!;
    expect(toggleTarget(svg.querySelector("text"))).toEqual({ key: "g0123456789", open: false });
    expect(toggleTarget(svg.querySelector("path"))).toEqual({ key: "n7", open: true });
    expect(toggleTarget(svg.querySelectorAll("text")[1])).toBeNull();
  });
});

describe("a long IR diff", () => {
  it("draws its first rows and the rest on request", () => {
    const rows = Array.from({ length: 1000 }, (_, k) => ["insert", null, "", k + 1, `%${k} = add`] as any);
    const el = diffTable(rows, false, 400);
    expect(el.querySelectorAll("tr").length).toBe(400);
    (el.querySelector(".gx-more") as HTMLButtonElement).click();
    expect(el.querySelectorAll("tr").length).toBe(1000);
  });
});

describe("where the time goes", () => {
  let el: HTMLElement;
  let model: StaticModel;
  const sent: unknown[] = [];
  beforeEach(async () => {
    document.body.innerHTML = "";
    el = document.createElement("div");
    document.body.appendChild(el);
    const data = fixture();
    data.state = { ...data.state, ...measured(), show_heat: true, index: 1 };
    // stage 1's graph with a group box holding nodes %1 and %2
    data.views[1].after_svg = data.views[1].after_svg.replace("</g></svg>", `<g class="node gx_g0123456789 gx_group"><polygon fill="#f7f7f7"/><text>▸ layer · 2 ops</text></g></g></svg>`);
    data.views[1].after_groups = { g0123456789: [1, 2] };
    model = new StaticModel(data);
    sent.length = 0;
    model.send = (content: unknown) => sent.push(content);
    renderWidget(model, el);
    await flush();
  });
  const fill = (side: string, key: string) => (el.querySelector(`.gx-pane-${side} .gx_${key} polygon`) as SVGElement).style.getPropertyValue("fill");
  const emit = (content: unknown) => (model as any).handlers.get("msg:custom")?.forEach((cb: (c: unknown) => void) => cb(content));

  it("colours both panes by their stage's profile, groups by their sum, and turns off", async () => {
    expect(fill("after", "n1")).not.toBe(""); // fused_1: 60% of stage 1
    expect(fill("before", "n1")).not.toBe(""); // mul %1: 80% of stage 0
    expect(fill("after", "n1")).not.toBe(fill("after", "n2")); // 60% and 10%
    expect(fill("after", "n0")).toBe(""); // an input: no time of its own
    expect(el.querySelector(".gx-pane-after .gx_n0")!.classList.contains("gx-heat-none")).toBe(true);
    expect(fill("after", "g0123456789")).not.toBe(""); // %1 and %2: 70%
    expect(fill("after", "g0123456789")).not.toBe(fill("after", "n1"));
    const group = el.querySelector(".gx-pane-after .gx_g0123456789")!;
    expect(group.getAttribute("data-tip")).toBe("layer · 2 ops: 2 timed nodes\n7.00 ms · 70% of stage 1 simplify on cpu");
    expect(el.querySelector(".gx-pane-after .gx_n1")!.getAttribute("data-tip")).toBe("fused_1 (kernel)\nIn[3]:2\n6.00 ms · 60% of stage 1 simplify on cpu");
    const legend = el.querySelector(".gx-heatlegend")!;
    expect(legend.textContent).toContain("before 10.00 ms · after 10.00 ms on cpu");
    (legend.querySelector("input") as HTMLInputElement).click();
    await flush();
    expect(model.get("show_heat")).toBe(false);
    expect(fill("after", "n1")).toBe("");
    expect(el.querySelectorAll(".gx-heat, .gx-heat-none").length).toBe(0);
  });

  it("scales to the hottest box, or logarithmically, and outlines the slowest nodes", async () => {
    // each pane's hottest box is the darkest: stage 0's %1 (8 ms), stage 1's group (7 ms)
    const darkest = fill("before", "n1");
    expect(fill("after", "g0123456789")).toBe(darkest);
    expect(fill("after", "n1")).not.toBe(darkest); // 6 ms
    const linear = fill("after", "n2"); // 1 ms: a seventh of the way
    const tags = (side: string) => Array.from(el.querySelectorAll(`.gx-pane-${side} .gx-topnode`)).map((g) => `${g.getAttribute("class")!.split(" ")[1]} ${g.querySelector(".gx-top-text")!.textContent}`);
    expect(tags("after")).toEqual(["gx_n1 #1", "gx_n2 #2"]);
    expect(el.querySelector(".gx-overlay-scale")!.textContent).toBe("to each stage's hottest box: before 0 → 8.00 ms · after 0 → 7.00 ms");
    const scale = el.querySelector(".gx-heat-scale") as HTMLSelectElement;
    scale.value = "log";
    scale.dispatchEvent(new Event("change"));
    await flush();
    expect(model.get("heat_scale")).toBe("log");
    expect(fill("before", "n1")).toBe(darkest);
    expect(fill("after", "n2")).not.toBe(linear); // darker: less than a decade below the top
    expect(el.querySelector(".gx-overlay-scale")!.textContent).toBe("log, to each stage's hottest box: before 8.0 µs → 8.00 ms · after 7.0 µs → 7.00 ms");
  });

  it("colours by error where numerics were taken, on its own ramp", async () => {
    expect(el.querySelector(".gx-colour-by option[value=error]")).toBeNull(); // none taken yet
    model.set("errors", [{ stage: 1, stage_name: "simplify", nodes: { "1": 2e-3, "2": 2e-9, "0": 0 } }]);
    model.save_changes();
    await flush();
    const by = el.querySelector(".gx-colour-by") as HTMLSelectElement;
    by.value = "error";
    by.dispatchEvent(new Event("change"));
    await flush();
    expect(model.get("colour_by")).toBe("error");
    expect(fill("after", "n1")).not.toBe(fill("after", "n2"));
    expect(el.querySelectorAll(".gx-topnode").length).toBe(0); // the ranks are time's
    expect(el.querySelector(".gx-pane-after .gx_n1")!.getAttribute("data-tip")).toBe("%1: largest relative error 2.0e-3 against float64\nstage 1 simplify");
    expect(el.querySelector(".gx-pane-after .gx_g0123456789")!.getAttribute("data-tip")).toContain("its worst node: largest relative error 2.0e-3");
    expect(fill("before", "n1")).toBe(""); // stage 0: no numerics
    expect(el.querySelector(".gx-overlay-scale")!.textContent).toBe("log: 2.0e-9 → 2.0e-3 (the largest)");
  });

  it("shows a box's time on hover", async () => {
    const box = el.querySelector(".gx-pane-after .gx_n1 text")!;
    box.dispatchEvent(new PointerEvent("pointermove", { bubbles: true, clientX: 10, clientY: 10 }));
    const tip = el.querySelector(".gx-tip") as HTMLElement;
    expect(tip.style.display).toBe("block");
    expect(tip.textContent).toContain("6.00 ms · 60% of stage 1");
    el.querySelector(".gx-heading")!.dispatchEvent(new PointerEvent("pointermove", { bubbles: true }));
    expect(tip.style.display).toBe("none");
  });

  it("draws no heat on a stage no profile covers, nor on a firing's graphs", async () => {
    model.set("index", 3);
    model.save_changes();
    await flush();
    expect(el.querySelectorAll(".gx-heat").length).toBe(0);
    expect(el.querySelector(".gx-heatlegend")).toBeNull();
  });

  it("draws the roofline: the roof, a point per kernel, dot and loop, and XLA's star", async () => {
    model.set("tab", "roofline");
    model.save_changes();
    await flush();
    const plot = el.querySelector(".gx-tabbody svg.gx-roofline")!;
    expect(plot.querySelector("path.gx-roof")).not.toBeNull();
    expect(Array.from(plot.querySelectorAll(".gx-roof-pt")).map((g) => g.getAttribute("class"))).toEqual(["gx-roof-pt gx-roof-kernel", "gx-roof-pt gx-roof-dot", "gx-roof-pt gx-roof-xla"]);
    expect(plot.textContent).toContain("peak 100.0 GFLOP/s");
    expect(plot.textContent).toContain("10.0 GB/s");
    const rows = Array.from(el.querySelectorAll(".gx-rooflinepanel tbody tr")).map((r) => r.querySelector("td")!.textContent);
    expect(rows).toEqual(["fused_1", "jax.jit", "dot_general %5", "copy"]); // slowest first
    expect(el.querySelector(".gx-rooflinepanel figcaption")!.textContent).toContain("1 without arithmetic");
    model.set("index", 0);
    model.save_changes();
    await flush();
    expect(el.querySelector(".gx-tabbody")!.textContent).toContain("no roofline of stage 0 traced yet");
    (el.querySelector(".gx-measured-go") as HTMLButtonElement).click();
    await flush();
    expect(model.get("index")).toBe(1);
  });

  it("draws the memory timeline: planned, measured, the peak, the limit and the buffers", async () => {
    model.set("tab", "memory");
    model.save_changes();
    await flush();
    const panel = el.querySelector(".gx-memorypanel")!;
    expect(panel.querySelector(".gx-plot-area")).not.toBeNull();
    expect(panel.querySelector(".gx-plot-measured")).not.toBeNull();
    expect(panel.querySelector(".gx-plot-limit")).not.toBeNull();
    expect(panel.querySelectorAll(".gx-plot-peak").length).toBe(2); // over the bytes and the bars
    expect(panel.querySelectorAll(".gx-plot-col").length).toBe(3);
    const bar = panel.querySelector(".gx-life")!;
    expect(bar.getAttribute("class")).toBe("gx-life gx-life-peak");
    expect(bar.getAttribute("data-tip")).toBe("mul %1 · 48 B\nIn[3]:2\nsteps 1–2\nlive at the planned peak");
    expect(panel.querySelector(".gx-plot-col")!.nextElementSibling!.getAttribute("data-tip")).toBe("step 1: mul %1\nIn[3]:2\nplanned: 96 B (48 B live after)\nmeasured: 50 B live after, 100 B peak while it ran");
    expect(panel.textContent).toContain("planned peak 96 B at step 1 (mul %1, In[3]:2); measured peak 100 B (tracemalloc); memory limit 128 B");
    expect(panel.querySelector(".gx-atpeak")!.textContent).toContain("mul %1");
  });

  it("sorts the kernels tab by time and asks Python for reproducers", async () => {
    // an exported view's kernels: the stage's latest runs
    (model as any).data.views[1].kernels = [{ backend: "cpu", name: "fused_9", source: "k9", seconds: 0.5 }, { backend: "cpu", name: "fused_1", source: "k1", seconds: 0.0001 }];
    model.set("tab", "kernels");
    model.save_changes();
    await flush();
    expect(el.querySelector(".gx-profile-table tbody tr td")!.textContent).toBe("fused_1");
    expect(Array.from(el.querySelectorAll(".gx-kernel summary")).map((s) => s.textContent)).toEqual([
      "cpu · fused_9 · 500.00 ms ",
      "cpu · fused_1 · 6.00 ms profiled, 60% of the stage ",
    ]);
    expect(el.querySelector(".gx-repro-stage")).toBeNull(); // no kernel behind an exported page
    model.set("interactive", true);
    model.save_changes();
    await flush();
    (el.querySelector(".gx-repro-stage") as HTMLButtonElement).click();
    expect(sent).toEqual([{ type: "reproducer", stage: 1 }]);
    expect(el.querySelector(".gx-reprobar")!.textContent).toContain("making the reproducer of stage 1…");
    emit({ type: "reproducer", filename: "f_stage1_simplify.py", text: "print('ok')", error: "" });
    const link = el.querySelector("a.gx-saved") as HTMLAnchorElement;
    expect(link.getAttribute("download")).toBe("f_stage1_simplify.py");
    expect(link.getAttribute("href")).toMatch(/^blob:/);
    (el.querySelector(".gx-profile-table .gx-repro-kernel") as HTMLButtonElement).click();
    (el.querySelector(".gx-kernel .gx-repro-kernel") as HTMLButtonElement).click();
    expect(sent.slice(1)).toEqual([{ type: "reproducer", stage: 1, kernel: 1 }, { type: "reproducer", stage: 1, kernel: "fused_9" }]);
    emit({ type: "reproducer", filename: "f.py", text: "", error: "KeyError: no kernel" });
    expect(el.querySelector(".gx-reprobar")!.textContent).toContain("no reproducer: KeyError: no kernel");
  });

  it("profiles from the run tab on the chosen backend, and says why it could not", async () => {
    model.set("interactive", true);
    model.set("backends", ["reference", "cpu"]);
    model.set("profile_backend", "cpu");
    model.set("profile_state", { running: false, message: "", error: "" });
    model.set("tab", "run");
    model.save_changes();
    await flush();
    const select = el.querySelector(".gx-profile-backend") as HTMLSelectElement;
    expect(select.value).toBe("cpu");
    expect(el.querySelector(".gx-profile-run")!.textContent).toBe("profile simplify and traced");
    select.value = "reference";
    select.dispatchEvent(new Event("change"));
    expect(model.get("profile_backend")).toBe("reference");
    (el.querySelector(".gx-profile-run") as HTMLButtonElement).click();
    expect(sent).toEqual([{ type: "profile", backend: "reference", stage: 1 }]);
    model.set("profile_state", { running: false, message: "", error: "backend 'gpu' is not available here: CuPy is not installed" });
    model.save_changes();
    await flush();
    expect(el.querySelector(".gx-profile-error")!.textContent).toBe("backend 'gpu' is not available here: CuPy is not installed");
    model.set("profile_backend", "gpu"); // a choice no backend here has: shown as chosen
    model.save_changes();
    await flush();
    expect((el.querySelector(".gx-profile-backend") as HTMLSelectElement).value).toBe("gpu");
    (el.querySelector(".gx-profile-run") as HTMLButtonElement).click();
    expect(sent[sent.length - 1]).toEqual({ type: "profile", backend: "gpu", stage: 1 });
  });
});

describe("the memory chart", () => {
  it("draws byte and step labels", () => {
    const svg = timelinePlot([0, 1024, 3 * 1024 * 1024, 2048], null, 300, 90);
    const bytes = [...svg.querySelectorAll(".gx-axis-bytes text")].map((t) => t.textContent);
    expect(bytes).toEqual(["0 B", "1.0 MiB", "2.0 MiB", "3.0 MiB"]);
    const steps = [...svg.querySelectorAll(".gx-axis-steps text")].map((t) => t.textContent);
    expect(steps).toEqual(["0", "1", "2", "3"]);
  });
});

describe("the profile table", () => {
  const row = (node: number, name: string, kind: "kernel" | "dot" | "loop" | "op", seconds: number, extra: Record<string, string> = {}) => ({
    node, name, kind, op: name.split(" ")[0], source: "", flops: 0, bytes: 0, seconds, calls: 1, gflops: null, gbs: null, timed: "", place: "", ...extra,
  });
  it("says how regions are timed, shows their bodies' nodes, the rest and the time outside the nodes", () => {
    const p = {
      stage: 1, stage_name: "fuse", backend: "cpu", total: 0.01, unprofiled: 0.0095, repeats: 5, notes: [],
      rows: [row(3, "loop %3", "loop", 0.006, { timed: "apart" }), row(4, "scan %4", "loop", 0.002, { timed: "whole" }), row(5, "add %5", "op", 0.001)],
      inner: [row(1, "dot_general %1", "dot", 0.004, { place: "loop_3/" }), row(2, "exp %2", "op", 0.001, { place: "loop_3/tail/" }), row(7, "mul %7", "op", 0.0005, { place: "loop_3/while_6/" })],
      outside: 0.001, spread: 0.4, noisy: true, totals: [0.01, 0.014, 0.009],
    };
    const el = profileTable(p, null, 2);
    const names = [...el.querySelectorAll("tbody tr td:first-child")].map((td) => td.textContent!.trim());
    expect(names).toEqual(["loop %3", "loop_3/dot_general %1", "loop_3/tail/exp %2", "scan %4", "(1 other nodes)", "(outside the nodes)"]);
    expect(el.textContent).toContain("loop · timed apart");
    expect(el.textContent).toContain("loop · timed whole");
    expect(el.querySelector(".gx-noisy")!.textContent).toContain("spread 40%");
  });
});

describe("the roofline panel", () => {
  const context = { index: 1, stageName: "simplify", taken: [], onGo: () => {}, onProfile: null, backend: "cpu" };
  it("rings and names the points above the roof, and says the peaks were measured again", () => {
    const data = structuredClone(measured().rooflines![0]!);
    const quiet = rooflinePanel(data, context);
    expect(quiet.querySelectorAll(".gx-roof-above").length).toBe(0);
    expect(quiet.querySelector(".gx-roof-warning")).toBeNull();
    data.points[0].above = true;
    data.above_roof = true;
    data.remeasured = true;
    const el = rooflinePanel(data, context);
    expect(el.querySelectorAll(".gx-roof-above").length).toBe(1);
    expect(el.querySelector(".gx-roof-warning")!.textContent).toContain("1 point(s) above the roof, even after measuring the peaks again (fused_1)");
    expect(el.textContent).toContain("ABOVE");
  });
});
