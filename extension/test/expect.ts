// A few vitest-style matchers over node:assert, so the tests read as assertions on values.
import assert from "node:assert/strict";

export function expect<T>(actual: T) {
  const m = {
    toBe: (want: unknown) => assert.equal(actual, want),
    toEqual: (want: unknown) => assert.deepEqual(actual, want),
    toBeCloseTo: (want: number, digits = 2) =>
      assert.ok(Math.abs((actual as number) - want) < 10 ** -digits / 2, `${actual} is not close to ${want}`),
    toBeNull: () => assert.equal(actual, null),
    toContain: (part: string) => assert.ok(String(actual).includes(part), `${JSON.stringify(actual)} lacks ${JSON.stringify(part)}`),
    toMatch: (re: RegExp) => assert.match(String(actual), re),
    not: {
      toBe: (want: unknown) => assert.notEqual(actual, want),
      toBeNull: () => assert.notEqual(actual, null),
      toMatch: (re: RegExp) => assert.doesNotMatch(String(actual), re),
    },
  };
  return m;
}
