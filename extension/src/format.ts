// Numbers as the Python side prints them (explorer/units.py format_bytes).

export function formatBytes(n: number): string {
  const units: [string, number][] = [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]];
  for (const [unit, size] of units) {
    if (Math.abs(n) >= size) return `${(n / size).toFixed(1)} ${unit}`;
  }
  return `${n} B`;
}

export function formatCount(n: number): string {
  return Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

export function formatSeconds(s: number): string {
  if (s < 1e-3) return `${(s * 1e6).toFixed(1)} µs`;
  if (s < 1) return `${(s * 1e3).toFixed(2)} ms`;
  return `${s.toFixed(3)} s`;
}

/** The change from `prev` to `cur` as text and a direction: "-25.0%", "+1,024", "=". */
export function delta(cur: number, prev: number | null | undefined): { text: string; sign: -1 | 0 | 1 } {
  if (prev === null || prev === undefined) return { text: "", sign: 0 };
  const d = cur - prev;
  if (d === 0) return { text: "=", sign: 0 };
  const sign = d > 0 ? 1 : -1;
  const pct = prev !== 0 ? ` (${d > 0 ? "+" : "−"}${Math.abs((100 * d) / prev).toFixed(1)}%)` : "";
  return { text: `${d > 0 ? "+" : "−"}${formatCount(Math.abs(d))}${pct}`, sign };
}
