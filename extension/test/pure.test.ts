import { describe, it } from "node:test";
import { expect } from "./expect";
import { delta, formatBytes, formatCount, formatSeconds } from "../src/format";
import { centreOn, initialView, panBy, wholeView, zoomAt } from "../src/panzoom";
import { barFractions, timelinePath } from "../src/plot";
import { versus } from "../src/views";
import { findHits, matches } from "../src/search";
import { stepIndex, visibleIndices } from "../src/stepping";
import type { StageSummary } from "../src/schema.gen";

describe("search (the rule of explorer/view/search.py)", () => {
  it("matches ops, names and ids", () => {
    expect(matches("%5 mul x in[3]:4 f", "mul")).toBe(true);
    expect(matches("%5 mul x in[3]:4 f", "MUL %5")).toBe(true);
    expect(matches("%50 mul", "%5")).toBe(false);
    expect(matches("%50 mul", "%50")).toBe(true);
    expect(matches("%5 mul", "add")).toBe(false);
    expect(matches("%5 mul", "   ")).toBe(false);
    expect(matches("%5 reduce_sum", "sum")).toBe(true);
  });
  it("finds element keys", () => {
    expect(findHits({ n2: "%2 add", n1: "%1 add", n0: "%0 parameter x" }, "add")).toEqual(["n1", "n2"]);
    expect(findHits({ n0: "%0 parameter x" }, "")).toEqual([]);
  });
});

const stages: StageSummary[] = [true, true, false, false, true].map((changed, index) => ({
  index, name: `s${index}`, changed, nodes: 1, rewrites: 0, steppable: false, flops: 0, bytes: 0, peak_bytes: 0,
}));

describe("stepping", () => {
  it("walks every stage, stopping at the ends", () => {
    expect(stepIndex(stages, 0, 1, false)).toBe(1);
    expect(stepIndex(stages, 1, 1, false)).toBe(2);
    expect(stepIndex(stages, 4, 1, false)).toBe(4);
    expect(stepIndex(stages, 0, -1, false)).toBe(0);
  });
  it("skips hidden unchanged stages", () => {
    expect(visibleIndices(stages, true)).toEqual([0, 1, 4]);
    expect(stepIndex(stages, 1, 1, true)).toBe(4);
    expect(stepIndex(stages, 4, -1, true)).toBe(1);
    expect(stepIndex(stages, 2, -1, true)).toBe(1);
    expect(stepIndex(stages, 0, 5, true)).toBe(4);
  });
});

describe("format", () => {
  it("prints bytes like explorer/units.py", () => {
    expect(formatBytes(48)).toBe("48 B");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    expect(formatBytes(3 * 2 ** 20)).toBe("3.0 MiB");
  });
  it("prints counts, seconds and deltas", () => {
    expect(formatCount(1234567)).toBe("1,234,567");
    expect(formatSeconds(2.5e-6)).toBe("2.5 µs");
    expect(formatSeconds(0.0125)).toBe("12.50 ms");
    expect(delta(75, 100)).toEqual({ text: "−25 (−25.0%)", sign: -1 });
    expect(delta(100, 100)).toEqual({ text: "=", sign: 0 });
    expect(delta(5, 0).sign).toBe(1);
    expect(delta(5, null).text).toBe("");
  });
});

describe("plots", () => {
  it("scales a timeline into the box", () => {
    expect(timelinePath([0, 10, 5], 100, 50)).toBe("M0.0,50.0 L50.0,0.0 L100.0,25.0");
    expect(timelinePath([0, 10], 100, 50, 20)).toBe("M0.0,50.0 L100.0,25.0");
    expect(timelinePath([], 100, 50)).toBe("");
  });
  it("makes bars relative to the largest", () => {
    expect(barFractions([1, 4, null, 2])).toEqual([0.25, 1, 0, 0.5]);
    expect(barFractions([null])).toEqual([0]);
  });
});

describe("pan and zoom", () => {
  it("shows a small graph whole and a tall one from the top at a readable size", () => {
    const small = initialView({ x: 0, y: 0, w: 200, h: 100 }, 400, 400);
    expect(small.w).toBeCloseTo(400 / 1.25);
    const tall = initialView({ x: 0, y: 0, w: 300, h: 30000 }, 600, 400);
    expect(tall.y).toBe(0);
    expect(tall.w).toBeCloseTo(600);
    // a wide graph is never shrunk below a readable scale: the top middle shows, not specks
    const wide = initialView({ x: 0, y: 0, w: 6000, h: 300 }, 600, 400);
    expect(600 / wide.w).toBeCloseTo(0.75);
    expect(wide.x + wide.w / 2).toBeCloseTo(3000);
    const whole = wholeView({ x: 0, y: 0, w: 6000, h: 300 }, 600, 400);
    expect(whole.w).toBeCloseTo(6000);
  });
  it("zooms about a point and centres on a box", () => {
    const v = zoomAt({ x: 0, y: 0, w: 100, h: 100 }, 2, 50, 50);
    expect(v).toEqual({ x: 25, y: 25, w: 50, h: 50 });
    expect(centreOn(v, { x: 90, y: 90, w: 20, h: 20 })).toEqual({ x: 75, y: 75, w: 50, h: 50 });
  });
});

describe("synchronised panes", () => {
  it("pans by screen pixels at the pane's scale", () => {
    expect(panBy({ x: 10, y: 10, w: 100, h: 100 }, 20, -40, 2)).toEqual({ x: 0, y: 30, w: 100, h: 100 });
    expect(panBy({ x: 0, y: 0, w: 1, h: 1 }, 3, 4, 0)).toEqual({ x: -3, y: -4, w: 1, h: 1 });
  });
});

describe("run rows", () => {
  it("compares a time with jax.jit's", () => {
    expect(versus(0.002, 0.001)).toBe("2.00× slower");
    expect(versus(0.001, 0.004)).toBe("4.00× faster");
    expect(versus(0.001, 0.001)).toBe("same");
    expect(versus(null, 0.001)).toBe("");
    expect(versus(0.001, null)).toBe("");
  });
});
