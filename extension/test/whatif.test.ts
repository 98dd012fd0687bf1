import "./setup-dom";
import { describe, it } from "node:test";
import { expect } from "./expect";
import type { WhatIf } from "../src/schema.gen";
import type { Callback, Model } from "../src/types";
import { STEPS, limitAt, moved, passName, planLine, positionOf, sliderText, whatIfPanel } from "../src/whatif";

const status = (over: Partial<WhatIf> = {}): WhatIf => ({
  limit: 65536, planned_peak: 48032, chunks: { "28": 100 }, smallest_limit: 27417, unsplit_limit: 2094240,
  needed_by: "%28 (loop at In[1]:6): d = ...", error: "", working: "", measured: "", measured_peak: null, seconds: null, ...over,
});

/** A live model: what the panel sets and sends is recorded. */
class Live implements Model {
  state: Record<string, unknown>;
  sent: unknown[] = [];
  saved: Record<string, unknown>[] = [];
  constructor(state: Record<string, unknown>) {
    this.state = { interactive: true, memory_limit: "64KiB", pipeline: ["simplify", "cse", "fuse"], pass_names: ["simplify", "cse", "dce", "fuse", "split"], whatif: status(), ...state };
  }
  get(k: string) { return this.state[k]; }
  set(k: string, v: unknown) { this.state[k] = v; }
  save_changes() { this.saved.push({ ...this.state }); }
  on(_e: string, _cb: Callback) {}
  off() {}
  send(c: unknown) { this.sent.push(c); }
}

describe("what-if pure parts", () => {
  it("maps the slider onto the limits on a log scale, both ends exact", () => {
    expect(limitAt(0, 1000, 1e6)).toBe(1000);
    expect(limitAt(STEPS, 1000, 1e6)).toBe(1e6);
    expect(limitAt(STEPS / 2, 1000, 1e6)).toBe(31623);
    expect(positionOf(31623, 1000, 1e6)).toBe(STEPS / 2);
    expect(positionOf(null, 1000, 1e6)).toBe(STEPS); // no limit: the top
    expect(positionOf(10, 1000, 1e6)).toBe(0);
  });
  it("writes a slider's limit rounded up to whole KiB, never below the smallest", () => {
    expect(sliderText(27417)).toBe("27KiB");
    expect(Math.ceil(27417 / 1024) * 1024 >= 27417).toBe(true);
    expect(sliderText(500)).toBe("500");
  });
  it("moves and names passes", () => {
    expect(moved(["a", "b", "c"], 1, -1)).toEqual(["b", "a", "c"]);
    expect(moved(["a", "b", "c"], 2, 1)).toEqual(["a", "b", "c"]);
    expect(passName("split{memory-limit=65536}")).toBe("split");
  });
  it("says the plan in one line", () => {
    expect(planLine(status())).toBe("limit 64.0 KiB · planned peak 46.9 KiB · split loops %28 ×100");
    expect(planLine(status({ limit: null, chunks: {}, measured: "fuse on cpu", measured_peak: 2048, seconds: 0.002 }))).toContain("measured peak 2.0 KiB, 2.00 ms (fuse on cpu)");
  });
});

describe("what-if panel", () => {
  it("asks once for the limits when opened, and applies a typed limit on Enter", () => {
    const m = new Live({ whatif: status({ smallest_limit: null, unsplit_limit: null }) });
    const p = whatIfPanel(m);
    document.body.appendChild(p.el);
    (p.el as HTMLDetailsElement).open = true;
    p.el.dispatchEvent(new Event("toggle"));
    p.update();
    expect(m.sent).toEqual([{ type: "whatif" }]);
    const text = p.el.querySelector(".gx-whatif-text") as HTMLInputElement;
    expect(text.value).toBe("64KiB");
    text.value = "16MiB";
    text.dispatchEvent(new Event("change"));
    expect(m.state.memory_limit).toBe("16MiB");
    p.el.remove();
  });
  it("draws the slider over the feasible range and edits the pipeline", () => {
    const m = new Live({});
    const p = whatIfPanel(m);
    const slider = p.el.querySelector(".gx-whatif-slider") as HTMLInputElement;
    expect(Number(slider.value)).toBe(positionOf(65536, 27417, 2094240));
    slider.value = "0";
    slider.dispatchEvent(new Event("change"));
    expect(m.state.memory_limit).toBe("27KiB");
    const cse = p.el.querySelector('.gx-whatif-pass[data-pass="cse"] input') as HTMLInputElement;
    cse.checked = false;
    cse.dispatchEvent(new Event("change"));
    expect(m.state.pipeline).toEqual(["simplify", "fuse"]);
    p.update();
    const off = p.el.querySelector('.gx-whatif-off[data-pass="cse"]');
    expect(off).not.toBeNull();
    const dce = p.el.querySelector('.gx-whatif-off[data-pass="dce"] input') as HTMLInputElement;
    dce.checked = true;
    dce.dispatchEvent(new Event("change"));
    expect(m.state.pipeline).toEqual(["simplify", "fuse", "dce"]);
  });
  it("shows a refusal, and on a page with no kernel says changing needs one", () => {
    const refused = whatIfPanel(new Live({ whatif: status({ error: "memory_limit=4.0 KiB cannot be met" }) }));
    expect(refused.el.querySelector(".gx-whatif-error")!.textContent).toContain("cannot be met");
    const m = new Live({ interactive: false });
    const p = whatIfPanel(m);
    expect(p.el.querySelector(".gx-whatif-kernel")!.textContent).toContain("needs a kernel");
    expect((p.el.querySelector(".gx-whatif-text") as HTMLInputElement).disabled).toBe(true);
    expect(p.el.querySelector(".gx-whatif-pipeline")).toBeNull();
  });
});
