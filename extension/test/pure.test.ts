import { describe, it } from "node:test";
import { expect } from "./expect";
import { delta, formatBytes, formatCount, formatSeconds } from "../src/format";
import { centreOn, initialView, panBy, wholeView, zoomAt } from "../src/panzoom";
import { boxErrors, boxOf, boxSeconds, errorLevel, HEAT_STOPS, hottest, rampColour, scaledLevel, topNodes } from "../src/heat";
import { missedBoxes, missedLines, remarksAt } from "../src/remarks";
import { barFractions, byteTicks, decades, formatDecade, gappedPath, logExtent, logPos, placeable, pointTip, roofPoints, stepTicks, stepX, timelinePath } from "../src/plot";
import { byTime, forStage, shareText, shortLine, sortKernels } from "../src/measured";
import { fixture, measured } from "./fixture";
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

describe("the heat overlay", () => {
  const [p0] = measured().profiles!;
  it("gives a node its own time and a group the sum of its timed nodes", () => {
    const cells = boxSeconds(p0, { g0123456789: [1, 2, 99] });
    expect(cells.get("n1")).toEqual({ seconds: 0.008, share: 0.8, nodes: 1 });
    expect(cells.get("g0123456789")!.seconds).toBeCloseTo(0.009, 6);
    expect(cells.get("g0123456789")!.nodes).toBe(2); // %99 was not timed
    expect(cells.has("n0")).toBe(false);
  });
  it("uses the nodes' sum when the run's total is missing", () => {
    const cells = boxSeconds({ ...p0, total: 0 }, {});
    expect(cells.get("n1")!.share).toBeCloseTo(0.8 / 0.9, 6);
  });
  it("scales to the hottest box drawn, or over three decades below it", () => {
    expect(scaledLevel(0.007, 0.007, "hottest")).toBe(1);
    expect(scaledLevel(0.0035, 0.007, "hottest")).toBeCloseTo(0.5, 6);
    expect(scaledLevel(0.007, 0.007, "log")).toBe(1);
    expect(scaledLevel(0.0007, 0.007, "log")).toBeCloseTo(2 / 3, 6); // a decade below
    expect(scaledLevel(0.000007, 0.007, "log")).toBe(0); // three decades below: the palest
    expect(scaledLevel(0, 0.007, "log")).toBe(0);
    expect(scaledLevel(1, 0, "hottest")).toBe(0);
    // the case: 200 nodes, the hottest with 0.7% of the stage, is the darkest
    const cells = new Map([...Array(200).keys()].map((k) => [`n${k}`, { seconds: k === 7 ? 0.007 : 0.004 }]));
    const top = hottest(cells, new Set(cells.keys()));
    expect(top).toBe(0.007);
    expect(rampColour(scaledLevel(0.007, top, "hottest")).colour).toBe(HEAT_STOPS[HEAT_STOPS.length - 1]);
    expect(rampColour(scaledLevel(0.004, top, "hottest")).colour).not.toBe(rampColour(scaledLevel(0.007, top, "hottest")).colour);
    expect(hottest(cells, new Set(["n1"]))).toBe(0.004); // only what is drawn
  });
  it("ramps from the palest to the darkest, light text on the dark end", () => {
    expect(rampColour(0)).toEqual({ colour: HEAT_STOPS[0], dark: false });
    expect(rampColour(1)).toEqual({ colour: HEAT_STOPS[HEAT_STOPS.length - 1], dark: true });
    expect(rampColour(0.2).dark).toBe(false);
    expect(rampColour(0.9).dark).toBe(true);
    expect(rampColour(0.3).colour).toMatch(/^#[0-9a-f]{6}$/);
  });
  it("ranks the slowest nodes and finds the box drawing each", () => {
    expect(topNodes(p0, 5)).toEqual([1, 2]);
    expect(topNodes(p0, 1)).toEqual([1]);
    const groups = { gaaaaaaaaaa: [1, 2, 3], gbbbbbbbbbb: [1, 2] };
    expect(boxOf(1, new Set(["n1"]), groups)).toBe("n1");
    expect(boxOf(1, new Set(["gaaaaaaaaaa", "gbbbbbbbbbb"]), groups)).toBe("gbbbbbbbbbb"); // the smallest
    expect(boxOf(9, new Set(["n1"]), groups)).toBeNull();
  });
});

describe("colouring by error", () => {
  it("gives a group its worst node's error, on a log scale of six decades", () => {
    const cells = boxErrors({ "1": 1e-7, "2": 3e-3, "3": null }, { gaaaaaaaaaa: [1, 2], gbbbbbbbbbb: [1, 3] });
    expect(cells.get("n2")).toBe(3e-3);
    expect(cells.get("gaaaaaaaaaa")).toBe(3e-3);
    expect(cells.get("gbbbbbbbbbb")).toBeNull(); // not finite is the worst
    expect(errorLevel(3e-3, 3e-3)).toBe(1);
    expect(errorLevel(3e-6, 3e-3)).toBeCloseTo(0.5, 6);
    expect(errorLevel(0, 3e-3)).toBe(0);
    expect(errorLevel(null, 3e-3)).toBe(1);
  });
});

describe("remarks", () => {
  const rows = fixture().views[1].remarks;
  it("lists a box's remarks, or all of them", () => {
    expect(remarksAt(rows, "").length).toBe(3);
    expect(remarksAt(rows, "n1").map((r) => r.rule)).toEqual(["mul-by-one"]);
    // the remark inside %2's body is listed under %2
    expect(remarksAt(rows, "n2").map((r) => r.rule)).toEqual(["add-zero", "fold-in-body"]);
    expect(remarksAt(rows, "n0")).toEqual([]);
  });
  it("marks the boxes and lines of missed remarks only", () => {
    expect([...missedBoxes(rows, "after").keys()].sort()).toEqual(["n1", "n2"]);
    expect(missedBoxes(rows, "after").get("n2")!.map((r) => r.rule)).toEqual(["fold-in-body"]);
    expect([...missedLines(rows)]).toEqual([["In[3]:2", 1], ["In[3]:3", 1]]);
  });
});

describe("log axes and the roofline", () => {
  it("rounds extents out to whole decades with room around the values", () => {
    expect(logExtent([0.5, 30])).toEqual({ lo: 0.1, hi: 100 });
    expect(logExtent([])).toEqual({ lo: 1, hi: 10 });
    expect(logExtent([0, -1, 5], 1)).toEqual({ lo: 1, hi: 10 });
    expect(logPos(10, { lo: 1, hi: 100 }, 200)).toBeCloseTo(100);
    expect(decades({ lo: 0.01, hi: 10 })).toEqual([0.01, 0.1, 1, 10]);
  });
  it("labels decades briefly", () => {
    expect([1e-5, 0.01, 1, 100, 1e3, 1e4, 1e6, 1e9].map(formatDecade)).toEqual(["1e-5", "0.01", "1", "100", "1k", "10k", "1M", "1G"]);
  });
  it("draws the roof as the bandwidth's slope up to the ridge, then the peak", () => {
    // 100 GFLOP/s, 10 GB/s: the ridge at 10 FLOPs/byte
    expect(roofPoints(1e11, 1e10, { lo: 0.1, hi: 100 }, { lo: 0.1, hi: 1000 })).toEqual([[0.1, 1], [10, 100], [100, 100]]);
    // the slope starts where it enters the plot, not below it
    expect(roofPoints(1e11, 1e10, { lo: 0.001, hi: 100 }, { lo: 0.1, hi: 1000 })[0]).toEqual([0.01, 0.1]);
    // the ridge beyond the plot: the slope only
    expect(roofPoints(1e11, 1e10, { lo: 0.1, hi: 1 }, { lo: 0.1, hi: 1000 })).toEqual([[0.1, 1], [1, 10]]);
  });
  it("places the points with an intensity and a rate, and says what each is", () => {
    const roof = measured().rooflines![0];
    expect(placeable(roof).map((p) => p.name)).toEqual(["fused_1", "dot_general %5", "jax.jit"]);
    const tip = pointTip(roof.points[1]);
    expect(tip).toContain("dot_general %5 (dot)");
    expect(tip).toContain("/home/u/In[3]:6");
    expect(tip).toContain("10.00 GFLOP/s · 0.50 GB/s · 20.00 FLOPs/byte");
    expect(tip).toContain("2.00 ms · 10% of the roof");
    expect(pointTip(roof.xla!)).toContain("jax.jit's whole program");
  });
});

describe("the memory timeline", () => {
  it("places steps and breaks the measured line where nothing was measured", () => {
    expect(stepX(2, 5, 100)).toBe(50);
    expect(stepX(0, 1, 100)).toBe(50);
    expect(gappedPath([null, 2, 4, null, 0], 40, 10, 4)).toBe("M10.0,5.0 L20.0,0.0 M40.0,10.0");
  });
});

describe("profiles in the tabs", () => {
  const m = measured();
  it("finds a stage's measurement and sorts nodes by time", () => {
    expect(forStage(m.profiles, 1)!.stage_name).toBe("simplify");
    expect(forStage(m.timelines, 0)).toBeNull();
    expect(forStage(undefined, 0)).toBeNull();
    expect(byTime(m.profiles![1].rows).map((r) => r.name)).toEqual(["fused_1", "add %2"]);
    expect(shortLine("/home/u/zoo.py:12")).toBe("zoo.py:12");
    expect(shortLine("C:\\x\\zoo.py:3")).toBe("zoo.py:3");
    expect(shareText(0.006, 0.01)).toBe("60%");
    expect(shareText(0.00005, 0.01)).toBe("0.5%");
    expect(shareText(1, 0)).toBe("");
  });
  it("sorts kernels by profiled time where the profile has them, else by their own", () => {
    const k = (name: string, seconds: number, backend = "cpu") => ({ backend, name, source: "", seconds });
    const kernels = [k("fused_2", 0.004), k("fused_1", 0.0001), k("the program", 0.01), k("fused_3", 0.002, "gpu")];
    const sorted = sortKernels(kernels, m.profiles![1]);
    expect(sorted.map((x) => x.row.name)).toEqual(["the program", "fused_1", "fused_2", "fused_3"]);
    expect(sorted.map((x) => x.profiled)).toEqual([false, true, false, false]);
    expect(sortKernels(kernels, null).map((x) => x.row.name)).toEqual(["the program", "fused_2", "fused_3", "fused_1"]);
  });
});

describe("the memory chart's axes", () => {
  it("ticks bytes at power-of-two steps, as units.byte_ticks does", () => {
    expect(byteTicks(100 * 2 ** 20)).toEqual([0, 32, 64, 96].map((k) => k * 2 ** 20));
    expect(byteTicks(5)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(byteTicks(0)).toEqual([0]);
    expect(byteTicks(3 * 2 ** 30).map(formatBytes)).toEqual(["0 B", "1.0 GiB", "2.0 GiB", "3.0 GiB"]);
  });
  it("ticks steps at 1, 2 or 5 times a power of ten", () => {
    expect(stepTicks(5)).toEqual([0, 1, 2, 3, 4]);
    expect(stepTicks(101)).toEqual([0, 20, 40, 60, 80, 100]);
    expect(stepTicks(1)).toEqual([0]);
  });
});
