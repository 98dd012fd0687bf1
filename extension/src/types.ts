// The part of anywidget's model the widget uses. The payload's types (the traits, the run
// message, an exported page's data) are generated from explorer/view/schema.py (by explorer/view/schema_typescript.py): schema.gen.ts.

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
