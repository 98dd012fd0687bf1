// Which stage the arrow keys go to: unchanged stages are skipped while they are hidden.

import type { StageSummary } from "./schema.gen";

export function visibleIndices(stages: StageSummary[], hideUnchanged: boolean): number[] {
  return stages.filter((s) => s.changed || !hideUnchanged).map((s) => s.index);
}

/** The index `delta` visible stages away from `index`, stopping at either end. */
export function stepIndex(stages: StageSummary[], index: number, delta: number, hideUnchanged: boolean): number {
  const visible = visibleIndices(stages, hideUnchanged);
  const ahead = delta > 0 ? visible.filter((i) => i > index) : visible.filter((i) => i < index).reverse();
  if (ahead.length === 0) return index;
  return ahead[Math.min(Math.abs(delta), ahead.length) - 1];
}
