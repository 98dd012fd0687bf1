// A small exported trace, shaped like explorer/view/export.py's data, for the DOM tests.
import type { ExportData, ExportView, StageSummary } from "../src/schema.gen";

const svg = (keys: string[], extra = "") =>
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 200 300" width="200pt" height="300pt">` +
  `<g class="graph" transform="translate(4 296)">` +
  keys.map((k, i) => `<g class="node gx_${k}"><title>${k}</title><polygon points="0,${-i * 40} 50,${-i * 40} 50,${-i * 40 - 30} 0,${-i * 40 - 30}"/><text>${k}</text></g>`).join("") +
  `${extra}</g></svg>`;

const stage = (index: number, name: string, changed: boolean): StageSummary => ({ index, name, changed, nodes: 3, rewrites: changed ? 1 : 0, steppable: index === 1, flops: 10 * (4 - index), bytes: 100, peak_bytes: 48 });

const view = (i: number): ExportView => ({
  stage: i,
  shown_firing: -1,
  before_svg: i === 0 ? "" : svg(["n0", "n1", "n2"]),
  after_svg: svg(i === 3 ? ["n0", "n1"] : ["n0", "n1", "n2"]),
  before_words: i === 0 ? {} : { n0: "%0 parameter x", n1: "%1 mul in[3]:2 f", n2: "%2 add in[3]:3 f" },
  after_words: { n0: "%0 parameter x", n1: "%1 add in[3]:2 f", n2: "%2 add in[3]:3 f" },
  before_lines: i === 0 ? {} : { n1: ["In[3]:2"], n2: ["In[3]:3"] },
  after_lines: { n1: ["In[3]:2"], n2: ["In[3]:3"] },
  before_groups: {},
  after_groups: {},
  diff_counts: { added: 0, removed: i === 3 ? 1 : 0, changed: i === 1 ? 1 : 0 },
  note: "",
  ir_diff: [["equal", 1, "graph @f {", 1, "graph @f {"], ["replace", 2, "  %1 = mul(%0, %0)", 2, "  %1 = add(%0, %0)"], ["skip", null, "3 unchanged lines", null, ""]],
  rewrites: i === 1 ? [{ rule: "mul-by-two", before: [1], after: [1], source: "In[3]:2", line_text: "y = x * 2  # </script><b>hi</b>", region: "", before_keys: ["n1"], after_keys: ["n1"] }] : [],
  remarks: i === 1
    ? [
        { pass: "simplify", kind: "missed", rule: "mul-by-one", reason: "x * 1.0 kept: the constant is a float32 array, not a scalar one", nodes: [1], source: "In[3]:2", region: "", line_text: "y = x * 2  # </script><b>hi</b>", before_keys: ["n1"], after_keys: ["n1"] },
        { pass: "simplify", kind: "analysis", rule: "add-zero", reason: "%2 adds 1, not 0", nodes: [2], source: null, region: "", line_text: "", before_keys: ["n2"], after_keys: ["n2"] },
        { pass: "simplify", kind: "missed", rule: "fold-in-body", reason: "the body's constant is read twice", nodes: [3], source: "In[3]:3", region: "%2.body", line_text: "return y + 1", before_keys: ["n2"], after_keys: ["n2"] },
      ]
    : [],
  cost: { flops: 10, bytes: 100, peak_bytes: 48, prev: i ? { flops: 12, bytes: 100, peak_bytes: 96 } : null, timeline: [0, 48, 48, 0], peak_node: 1, memory_limit: null, nodes: 3, devices: null, device_peak_bytes: null, per_device_limit: false },
  kernels: [],
});

export function fixture(): ExportData {
  return {
    state: {
      title: "f<&>",
      stages: [stage(0, "traced", true), stage(1, "simplify", true), stage(2, "cse", false), stage(3, "dce", true)],
      index: 0,
      hide_unchanged: false,
      search: "",
      firing: -1,
      source: [
        { kind: "file", loc: "", line: 0, text: "In[3]", used: true },
        { kind: "line", loc: "In[3]:1", line: 1, text: "def f(x):", used: false },
        { kind: "line", loc: "In[3]:2", line: 2, text: "    y = x * 2  # </script><b>hi</b>", used: true },
        { kind: "line", loc: "In[3]:3", line: 3, text: "    return y + 1", used: true },
      ],
      selected_line: "",
      show_source: true,
      tab: "diff",
      selected_rewrite: -1,
      sync_panes: true,
      backends: [],
      run_rows: [],
      run_state: { running: false, done: 0, total: 0, message: "", pending: [] },
    },
    views: [0, 1, 2, 3].map(view),
  };
}

/** Profiles of stages 0 and 1 (node %1 the slowest), with stage 1's roofline and memory
 * timeline, shaped like explorer/measure/profile.py, roofline.py and timeline.py's to_data(). */
export function measured(): Pick<ExportData["state"], "profiles" | "rooflines" | "timelines"> {
  const row = (node: number, name: string, kind: "kernel" | "dot" | "loop" | "op", seconds: number, flops = 0, bytes = 0) => ({
    node, name, kind, op: kind === "kernel" ? "kernel" : name.split(" ")[0], source: `/home/u/In[3]:${node + 1}`, flops, bytes, seconds, calls: 1,
    gflops: flops ? flops / seconds / 1e9 : null, gbs: bytes ? bytes / seconds / 1e9 : null,
  });
  const profile = (stage: number, name: string, slow: number) => ({
    stage, stage_name: name, backend: "cpu", total: 0.01, unprofiled: 0.0095, repeats: 5, notes: [],
    rows: [row(1, stage ? "fused_1" : "mul %1", stage ? "kernel" : "op", slow, 1e6, 4e5), row(2, "add %2", "op", 0.001, 1e3, 1e3)],
  });
  const point = (name: string, kind: "kernel" | "dot" | "loop" | "xla", node: number | null, flops: number, bytes: number, seconds: number) => ({
    name, kind, node, source: node === null ? "" : `/home/u/In[3]:${node + 1}`, flops, bytes, seconds,
    intensity: flops && bytes ? flops / bytes : null, rate: flops ? flops / seconds : null, bandwidth: bytes ? bytes / seconds : null,
    bound: flops && bytes ? Math.min(1e11, (flops / bytes) * 1e10) : null,
  });
  return {
    profiles: [profile(0, "traced", 0.008), profile(1, "simplify", 0.006)],
    rooflines: [{
      stage: 1, stage_name: "simplify", backend: "cpu",
      peaks: { machine: "test box", flops: 1e11, bandwidth: 1e10, how: "matmul, triad", measured_at: "2026-01-01 00:00" },
      points: [point("fused_1", "kernel", 1, 1e6, 4e5, 0.006), point("dot_general %5", "dot", 5, 2e7, 1e6, 0.002), point("copy", "loop", 6, 0, 1e5, 0.001)],
      xla: point("jax.jit", "xla", null, 2e7, 2e6, 0.003), notes: [],
    }],
    timelines: [{
      stage: 1, stage_name: "simplify", backend: "cpu",
      steps: [[0, "parameter", "", 0, 0, null, null], [1, "mul", "/home/u/In[3]:2", 48, 96, 50, 100], [2, "add", "/home/u/In[3]:3", 0, 48, 0, 60]],
      buffers: [[1, "mul", "/home/u/In[3]:2", 48, 1, 2]],
      planned_peak: 96, peak_step: 1, measured_peak: 100, measured_peak_step: 1, memory_limit: 128, peak_how: "tracemalloc", notes: [],
    }],
  };
}
