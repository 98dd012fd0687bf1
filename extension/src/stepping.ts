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

/** The firing `delta` steps from `firing` in a pass of `n` firings (-1 is the whole pass:
 * forward from it goes to the first firing, back to the last), stopping at either end. */
export function stepFiring(firing: number, n: number, delta: number): number {
  if (n <= 0) return -1;
  if (firing < 1) return delta > 0 ? 1 : n;
  return Math.max(1, Math.min(n, firing + delta));
}
