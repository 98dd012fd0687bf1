// Generated from explorer/view/schema.py by `python -m explorer.view.schema_typescript`: do not edit.
//
// The widget's payload schema, declared once: every trait Python sends the front end, every
// message the front end sends back, and the data an exported page inlines.

/**
 * One stage as the bar of stage chips shows it; `changed` is true for the traced stage.
 * `steppable`: its pass is rule-driven and fired, so it can be stepped firing by firing.
 */
export interface StageSummary {
  index: number;
  name: string;
  changed: boolean;
  nodes: number;
  rewrites: number;
  steppable: boolean;
  flops: number;
  bytes: number;
  peak_bytes: number;
}

/** How a row of the IR diff differs between the two stages. */
export type DiffTag = "equal" | "delete" | "insert" | "replace" | "skip";

/**
 * A row of the IR diff: tag, left line number, left text, right line number, right text.
 * A "skip" row folds unchanged lines away; its left text says how many.
 */
export type DiffRow = [DiffTag, number | null, string, number | null, string];

/** Nodes added, removed and changed by the stage. */
export interface DiffCounts {
  added: number;
  removed: number;
  changed: number;
}

/**
 * A rewrite the stage's pass made: node ids before and after, where in the user's source
 * it comes from, the body it fired in (`region`: "" for the graph itself, else a path such
 * as "%7.body"), and the graph elements (`*_keys`) to highlight when it is picked.
 */
export interface RewriteRow {
  rule: string;
  before: number[];
  after: number[];
  source: string;
  line_text: string;
  region: string;
  before_keys: string[];
  after_keys: string[];
}

/**
 * A remark of the stage's pass (Remark.to_json(), explorer/ir/remarks.py),
 * with its line's text and the boxes (`*_keys`) drawing its nodes; a remark in a body is listed
 * under its region's node too.
 */
export interface RemarkRow {
  pass: string;
  kind: "missed" | "analysis";
  rule: string;
  reason: string;
  nodes: number[];
  source: string | null;
  region: string;
  line_text: string;
  before_keys: string[];
  after_keys: string[];
}

/** FLOPs, bytes moved and the planned peak of live temporaries. */
export interface CostNumbers {
  flops: number;
  bytes: number;
  peak_bytes: number;
}

/**
 * The cost tab: this stage's numbers, the previous stage's (null for the traced one), and
 * the planned bytes at each step of the schedule (live buffers plus the step's workspace and
 * loop or region body): its maximum is `peak_bytes`, the same computation. A sharded stage
 * (null otherwise) runs on `devices` devices, one of which holds `device_peak_bytes` at its
 * planned peak (MemoryPlan.per_device_peak); `per_device_limit`: the memory limit is one
 * device's.
 */
export interface CostView extends CostNumbers {
  prev: CostNumbers | null;
  timeline: number[];
  peak_node: number | null;
  memory_limit: number | null;
  nodes: number;
  devices: number | null;
  device_peak_bytes: number | null;
  per_device_limit: boolean;
}

/**
 * Everything shown for one stage against the stage before it; `*_words` map a graph
 * element's key to the words a search matches, `*_lines` to the source lines ("file:line")
 * of the nodes it draws, `*_groups` a group's key (closed or open) to the ids of the graph's
 * own nodes inside it (a box `n<id>` draws node %id; region bodies' nodes are not listed).
 * `remarks` are the stage's pass's (stage.report.remarks; none for the traced stage).
 * `stage` is the index of the stage shown: while it differs from the chosen index the front
 * end shows that it is loading. `shown_firing` is the firing shown (k >= 1: the graph before
 * and after the pass's k-th firing; -1: the whole pass).
 */
export interface StageView {
  stage: number;
  shown_firing: number;
  before_svg: string;
  after_svg: string;
  before_words: Record<string, string>;
  after_words: Record<string, string>;
  before_lines: Record<string, string[]>;
  after_lines: Record<string, string[]>;
  before_groups: Record<string, number[]>;
  after_groups: Record<string, number[]>;
  diff_counts: DiffCounts;
  note: string;
  ir_diff: DiffRow[];
  rewrites: RewriteRow[];
  remarks: RemarkRow[];
  cost: CostView;
}

/**
 * A row of the source panel: a "file" heading (its name in `text`), a "line" (`loc` is
 * "file:line", as nodes name it; `used` when nodes of the traced program come from it) or a
 * "fold" of lines left out (how many, in `text`).
 */
export interface SourceLine {
  kind: "file" | "line" | "fold";
  loc: string;
  line: number;
  text: string;
  used: boolean;
}

/**
 * One measured run, a baseline or a stage on a backend. `seconds` is the median;
 * `peak_bytes` is null where the runtime cannot tell; `ok` is null where there were no values
 * to check; `error` says why the run could not happen, and is empty when it did.
 */
export interface RunRow {
  key: string;
  kind: "baseline" | "stage";
  label: string;
  stage: number | null;
  backend: string;
  seconds: number | null;
  min_seconds: number | null;
  repeats: number;
  peak_bytes: number | null;
  peak_how: string;
  check: string;
  ok: boolean | null;
  error: string;
  workers: number;
  dashboard: string;
  devices: number | null;
}

/**
 * Progress of the runs under way; `pending` are the labels of the runs still to come, the
 * first one running now.
 */
export interface RunState {
  running: boolean;
  done: number;
  total: number;
  message: string;
  pending: string[];
}

/** A kernel a backend generated for the stage's latest run on it. */
export interface KernelRow {
  backend: string;
  name: string;
  source: string;
  seconds: number;
}

/**
 * One top-level node of a profiled stage (explorer/measure/profile.py): `seconds` in the
 * profile's median run (its total's run: node times and total add up); `gflops` and `gbs` are
 * null where it did no arithmetic, moved nothing or took no measurable time. A region is timed
 * whole where its body is generated, its body's nodes apart where the interpreter core runs
 * it (`timed`).
 */
export interface ProfileRowData {
  node: number;
  name: string;
  kind: "kernel" | "dot" | "loop" | "op";
  op: string;
  source: string;
  flops: number;
  bytes: number;
  seconds: number;
  calls: number;
  gflops: number | null;
  gbs: number | null;
  timed?: string;
  place?: string;
}

/**
 * trace.profile(): where one stage's time goes on one backend (Profile.to_data()). `total`
 * is the median profiled run's seconds (the rows' seconds plus `outside`), `unprofiled` a bare
 * run's.
 */
export interface ProfileData {
  stage: number;
  stage_name: string;
  backend: string;
  total: number;
  unprofiled: number;
  repeats: number;
  notes: string[];
  rows: ProfileRowData[];
  outside?: number;
  totals?: number[];
  spread?: number;
  noisy?: boolean;
  inner?: ProfileRowData[];
}

/** This machine's measured peaks: FLOP/s of a BLAS matrix product, bytes/s of a triad. */
export interface PeaksData {
  machine: string;
  flops: number;
  bandwidth: number;
  how: string;
  measured_at: string;
}

/**
 * A kernel, dot or loop of the stage, or jax.jit's whole program ("xla"): `intensity` is
 * FLOPs per byte, `rate` FLOP/s, `bandwidth` bytes/s, `bound` the roof above it (FLOP/s);
 * null where it did no arithmetic or took no measurable time.
 */
export interface RooflinePoint {
  name: string;
  kind: "kernel" | "dot" | "loop" | "xla";
  node: number | null;
  source: string;
  flops: number;
  bytes: number;
  seconds: number;
  intensity: number | null;
  rate: number | null;
  bandwidth: number | null;
  bound: number | null;
  above?: boolean;
}

/** trace.roofline(): a stage's points under the machine's peaks (Roofline.to_data()). */
export interface RooflineData {
  stage: number;
  stage_name: string;
  backend: string;
  peaks: PeaksData;
  points: RooflinePoint[];
  xla: RooflinePoint | null;
  notes: string[];
  above_roof?: boolean;
  remeasured?: boolean;
}

/**
 * A step of a memory timeline: node, op, source line, planned live bytes after it, planned
 * bytes at it (with its workspace), measured live bytes after it and measured peak while it ran
 * (null where not measured).
 */
export type TimelineStep = [number, string, string, number, number, number | null, number | null];

/** A temporary buffer: node, op, source line, bytes, first step, last step that reads it. */
export type TimelineBuffer = [number, string, string, number, number, number];

/**
 * trace.memory_timeline(): planned and measured bytes along a stage's schedule and each
 * temporary buffer's lifetime (MemoryTimeline.to_data()); `peak_step` is the planned peak's.
 */
export interface TimelineData {
  stage: number;
  stage_name: string;
  backend: string;
  steps: TimelineStep[];
  buffers: TimelineBuffer[];
  planned_peak: number;
  peak_step: number | null;
  measured_peak: number | null;
  measured_peak_step: number | null;
  memory_limit: number | null;
  peak_how: string;
  notes: string[];
}

/**
 * A stage's nodes' own error against float64 (trace.numerics(), explorer/measure/
 * numerics.py): node id -> its largest relative error, null where it is not finite.
 */
export interface ErrorsData {
  stage: number;
  stage_name: string;
  nodes: Record<string, number | null>;
}

/** Progress of a profile under way (`message`), or why it could not run (`error`). */
export interface ProfileState {
  running: boolean;
  message: string;
  error: string;
}

/**
 * The what-if outcome (read-only; view/whatif.py): the plan shown (`limit`: null for
 * none; its final stage's `planned_peak`; split loops' iterations by node id), the limits
 * the split can meet (`smallest_limit`, needed by `needed_by`, to `unsplit_limit`; null
 * until found), why a change was refused (`error`), what Python is doing (`working`), and
 * the plan's latest run (`measured`: stage and backend; null before one).
 */
export interface WhatIf {
  limit: number | null;
  planned_peak: number;
  chunks: Record<string, number>;
  smallest_limit: number | null;
  unsplit_limit: number | null;
  needed_by: string;
  error: string;
  working: string;
  measured: string;
  measured_peak: number | null;
  seconds: number | null;
}

/** The tabs below the graphs. */
export type Tab = "diff" | "rewrites" | "why" | "cost" | "kernels" | "run" | "roofline" | "memory";

/** What the graphs' overlay colours boxes by: the profile's times, or the nodes' numerical error. */
export type ColourBy = "time" | "error";

/** How time maps onto the heat ramp: up to the stage's hottest box, or 3 decades below it (log). */
export type HeatScale = "hottest" | "log";

/**
 * The widget's traits other than the current stage's view. `opened` holds the user's
 * choices of graph groups and regions to open (true) or close (false), by element key.
 * `firing` is the firing of the stage's pass to show (-1: the whole pass); `source` the
 * user's lines, `selected_line` the one picked ("file:line"), `show_source` its panel.
 * `profiles`, `rooflines` and `timelines` hold the latest of each taken, one per stage at
 * most; `show_heat` colours the graphs by the profiles' times (`colour_by` "time", scaled
 * per `heat_scale`, the top nodes outlined) or by the nodes' error (`errors`, one per stage
 * from trace.numerics()), `profile_backend` is the backend the next profile runs on.
 * `selected_node` is the box picked ("" none): the why tab lists its remarks, else the
 * stage's; `show_missed` marks the boxes of nodes with a missed remark.
 */
export interface WidgetState {
  title: string;
  stages: StageSummary[];
  index: number;
  firing: number;
  source: SourceLine[];
  selected_line: string;
  show_source: boolean;
  hide_unchanged: boolean;
  search: string;
  tab: Tab;
  selected_rewrite: number;
  sync_panes: boolean;
  opened: Record<string, boolean>;
  backends: string[];
  run_backends: string[];
  run_baselines: boolean;
  run_rows: RunRow[];
  run_state: RunState;
  kernels: KernelRow[];
  profiles: ProfileData[];
  rooflines: RooflineData[];
  timelines: TimelineData[];
  show_heat: boolean;
  heat_scale: HeatScale;
  colour_by: ColourBy;
  errors: ErrorsData[];
  selected_node: string;
  show_missed: boolean;
  profile_backend: string;
  profile_state: ProfileState;
  interactive: boolean;
  memory_limit: string;
  pipeline: string[];
  pass_names: string[];
  whatif: WhatIf;
}

/** Every trait the widget syncs: the state and the current stage's view. */
export interface Traits extends WidgetState, StageView {}

/** The traits the front end writes back: the user's choices. Python owns all the others. */
export type Choice = "index" | "firing" | "hide_unchanged" | "search" | "selected_rewrite" | "tab" | "sync_panes" | "opened" | "selected_line" | "show_source" | "run_backends" | "run_baselines" | "show_heat" | "profile_backend" | "heat_scale" | "colour_by" | "selected_node" | "show_missed" | "memory_limit" | "pipeline";

/** The front end asks for runs; a key left out means the widget's current choice. */
export interface RunMessage {
  type: "run";
  backends?: string[];
  baselines?: boolean;
  stage?: number;
}

/**
 * The front end asks for a profile of a stage (default: the one shown) and of the stage
 * before it, with the stage's roofline and memory timeline, on `backend` (default: the
 * widget's profile_backend).
 */
export interface ProfileMessage {
  type: "profile";
  backend?: string;
  stage?: number;
}

/** The front end's what-if panel opened: find the limits the split can meet. */
export interface WhatIfMessage {
  type: "whatif";
}

/**
 * The front end asks for a stage's reproducer script, or one kernel's (its node id or
 * name); Python answers with a ReproducerFile message.
 */
export interface ReproducerMessage {
  type: "reproducer";
  stage: number;
  kernel?: number | string;
}

/**
 * A reproducer to save as `filename` (a .py naming the function, the stage and the
 * kernel), or why there is none (`error`).
 */
export interface ReproducerFile {
  type: "reproducer";
  filename: string;
  text: string;
  error: string;
}

/** One stage of an exported page: its view and the kernels of its runs. */
export interface ExportView extends StageView {
  kernels: KernelRow[];
}

/**
 * An exported page's data: the state to start from and every stage's view. Pictures
 * drawn more than once are stored once: a view's `before_svg`/`after_svg` of the form
 * "svg:N" stands for `svgs[N]`.
 */
export interface ExportData {
  state: Partial<WidgetState>;
  views: ExportView[];
  svgs?: string[];
}

/** The name of every trait, for listening to all of them. */
export const TRAIT_NAMES: (keyof Traits)[] = [
  "title", "stages", "index", "firing", "source", "selected_line", "show_source", "hide_unchanged",
  "search", "tab", "selected_rewrite", "sync_panes", "opened", "backends", "run_backends",
  "run_baselines", "run_rows", "run_state", "kernels", "profiles", "rooflines", "timelines",
  "show_heat", "heat_scale", "colour_by", "errors", "selected_node", "show_missed", "profile_backend",
  "profile_state", "interactive", "memory_limit", "pipeline", "pass_names", "whatif", "stage",
  "shown_firing", "before_svg", "after_svg", "before_words", "after_words", "before_lines",
  "after_lines", "before_groups", "after_groups", "diff_counts", "note", "ir_diff", "rewrites",
  "remarks", "cost",
];
