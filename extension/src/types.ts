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

export interface RunRow {
  label: string;
  stage: number;
  backend: string;
  seconds: number | null;
  peak_bytes: number | null;
  check: string;
  ok: boolean | null;
  error: string;
}

export interface RunState {
  running: boolean;
  done: number;
  total: number;
  message: string;
}

export interface KernelRow {
  backend: string;
  name: string;
  source: string;
  seconds: number;
}
