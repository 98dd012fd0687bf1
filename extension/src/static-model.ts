// A model with no kernel behind it, for exported HTML pages: every stage's view is inlined,
// so stepping only swaps which view the per-stage keys read from.

import type { ExportData, ExportView } from "./schema.gen";
import type { Callback, Model } from "./types";

export class StaticModel implements Model {
  private state: Record<string, unknown>;
  private pending = new Set<string>();
  private handlers = new Map<string, Set<Callback>>();

  constructor(private data: ExportData) {
    this.state = { ...data.state, interactive: false };
  }

  private view(): Partial<ExportView> {
    const index = Number(this.state.index ?? 0);
    return this.data.views[index] ?? {};
  }

  get(name: string): any {
    const view = this.view();
    return name in view ? view[name as keyof ExportView] : this.state[name];
  }

  set(name: string, value: unknown): void {
    if (name === "index") {
      const n = this.data.views.length;
      value = Math.max(0, Math.min(n - 1, Math.trunc(Number(value))));
      if (value !== this.state.index) {
        for (const k of Object.keys(this.view())) this.pending.add(k);
        this.state.selected_rewrite = -1;
        this.pending.add("selected_rewrite");
      }
    }
    this.state[name] = value;
    this.pending.add(name);
  }

  save_changes(): void {
    const keys = Array.from(this.pending);
    this.pending.clear();
    for (const k of keys) for (const cb of this.handlers.get(`change:${k}`) ?? []) cb();
  }

  on(event: string, cb: Callback): void {
    if (!this.handlers.has(event)) this.handlers.set(event, new Set());
    this.handlers.get(event)!.add(cb);
  }

  off(event?: string | null, cb?: Callback | null): void {
    if (!event) this.handlers.clear();
    else if (!cb) this.handlers.delete(event);
    else this.handlers.get(event)?.delete(cb);
  }

  send(_content: unknown): void {
    // no kernel: the run tab says so and never sends
  }
}
