// The shapes of the traits Python sends (explorer/view/widget.py, payload.py, runs.py).

export type Callback = (...args: unknown[]) => void;

/** The part of anywidget's model the widget uses; StaticModel implements it for exports. */
export interface Model {
  get(name: string): any;
  set(name: string, value: unknown): void;
  save_changes(): void;
  on(event: string, cb: Callback): void;
  off(event?: string | null, cb?: Callback | null): void;
  send(content: unknown): void;
}

export interface StageSummary {
  index: number;
  name: string;
  changed: boolean;
  nodes: number;
  rewrites: number;
  flops: number;
  bytes: number;
  peak_bytes: number;
}

/** [tag, left line number, left text, right line number, right text] */
export type DiffRow = [string, number | null, string, number | null, string];

export interface RewriteRow {
  rule: string;
  before: number[];
  after: number[];
  source: string;
  line_text: string;
  before_keys: string[];
  after_keys: string[];
}

export interface CostNumbers {
  flops: number;
  bytes: number;
  peak_bytes: number;
}

export interface CostView extends CostNumbers {
  prev: CostNumbers | null;
  timeline: number[];
  peak_node: number | null;
  memory_limit: number | null;
  nodes: number;
}

/** One measured run (explorer/view/runs.py): a baseline or a stage on a backend. */
export interface RunRow {
  key: string;
  kind: "baseline" | "stage";
  label: string;
  stage: number | null;
  backend: string;
  seconds: number | null; // median
  min_seconds: number | null;
  repeats: number;
  peak_bytes: number | null; // null: this runtime cannot tell
  peak_how: string;
  check: string;
  ok: boolean | null;
  error: string; // set when it could not run: the row says why
}

export interface RunState {
  running: boolean;
  done: number;
  total: number;
  message: string;
  pending?: string[]; // labels of the runs still to come, the first one running now
}

export interface KernelRow {
  backend: string;
  name: string;
  source: string;
  seconds: number;
}
