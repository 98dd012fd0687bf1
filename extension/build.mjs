// Bundles src/ into explorer/static/widget.{js,css} with esbuild.
//   node build.mjs            build
//   node build.mjs --check    build into a temp dir and fail if the committed bundle differs
// The bundle's first line records a hash of its sources (the same hash tests/view/test_bundle.py
// computes), so a Python test can tell a stale bundle without node.
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const staticDir = join(here, "..", "explorer", "static");

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

/** sha256 over (path, NUL, bytes, NUL) of src/**, build.mjs and package-lock.json, sorted by path. */
export function sourceHash() {
  const paths = [...files(join(here, "src")), join(here, "build.mjs"), join(here, "package-lock.json")]
    .map((p) => relative(here, p).split("\\").join("/"))
    .sort();
  const h = createHash("sha256");
  for (const p of paths) {
    h.update(p + "\0");
    h.update(readFileSync(join(here, p)));
    h.update("\0");
  }
  return h.digest("hex");
}

async function bundle(outdir) {
  const banner = `/* gambit-explorer widget bundle; built from extension/ by build.mjs; sources sha256: ${sourceHash()} */`;
  await build({
    entryPoints: { widget: join(here, "src", "index.ts") },
    bundle: true,
    format: "esm",
    target: "es2020",
    minify: true,
    legalComments: "none",
    charset: "utf8",
    outdir,
    banner: { js: banner, css: banner },
    logLevel: "warning",
  });
}

const check = process.argv.includes("--check");
if (check) {
  const tmp = mkdtempSync(join(tmpdir(), "gx-bundle-"));
  try {
    await bundle(tmp);
    const stale = ["widget.js", "widget.css"].filter((f) => {
      let committed;
      try {
        committed = readFileSync(join(staticDir, f));
      } catch {
        return true;
      }
      return !committed.equals(readFileSync(join(tmp, f)));
    });
    if (stale.length) {
      console.error(`explorer/static/${stale.join(", ")} differ from a fresh build: run \`npm run build\` in extension/ and commit the result`);
      process.exit(1);
    }
    console.log("explorer/static is current");
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
} else {
  await bundle(staticDir);
  console.log("built explorer/static/widget.js and widget.css");
}
