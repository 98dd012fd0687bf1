// Runs the front-end unit tests with node's own test runner: esbuild compiles each
// test/*.test.ts (TypeScript) into node_modules/.cache/gx-tests/, then `node --test` runs them.
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "node_modules", ".cache", "gx-tests");
const tests = readdirSync(here).filter((f) => f.endsWith(".test.ts"));

rmSync(out, { recursive: true, force: true });
await build({
  entryPoints: tests.map((f) => join(here, f)),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  outdir: out,
  outExtension: { ".js": ".mjs" },
  packages: "external",
  loader: { ".css": "empty" },
  logLevel: "warning",
});
const files = tests.map((f) => join(out, f.replace(/\.ts$/, ".mjs")));
const run = spawnSync(process.execPath, ["--test", ...files], { stdio: "inherit" });
process.exit(run.status ?? 1);
