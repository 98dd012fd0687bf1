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
  diff_counts: { added: 0, removed: i === 3 ? 1 : 0, changed: i === 1 ? 1 : 0 },
  note: "",
  ir_diff: [["equal", 1, "graph @f {", 1, "graph @f {"], ["replace", 2, "  %1 = mul(%0, %0)", 2, "  %1 = add(%0, %0)"], ["skip", null, "3 unchanged lines", null, ""]],
  rewrites: i === 1 ? [{ rule: "mul-by-two", before: [1], after: [1], source: "In[3]:2", line_text: "y = x * 2  # </script><b>hi</b>", region: "", before_keys: ["n1"], after_keys: ["n1"] }] : [],
  cost: { flops: 10, bytes: 100, peak_bytes: 48, prev: i ? { flops: 12, bytes: 100, peak_bytes: 96 } : null, timeline: [0, 48, 48, 0], peak_node: 1, memory_limit: null, nodes: 3 },
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
