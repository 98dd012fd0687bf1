"""The reproducer of every zoo program's final stage, run in a fresh process, matches the
reference (issue 25).

For each program of the test zoo (tests/corpora/zoo.py), `trace.final.reproducer(path)` writes the
standalone script (explorer/measure/reproducer.py); each script then runs as `python script.py` in a
process of its own, two at a time, and prints `ok` or `MISMATCH`. A program counts as failed
when its script could not be written or ran without printing either line.

    python bench/reproducers.py                  # the cpu backend
    python bench/reproducers.py --backend jax --seed 1
    python bench/reproducers.py --models         # also bench/models.py's realistic programs
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import explorer as gx  # noqa: E402
from tests.corpora.zoo import zoo  # noqa: E402


def run_script(path: Path, backend: str, seed: int) -> tuple[str, str]:
    """("ok" | "mismatch" | "failed", the line that says so)."""
    try:
        r = subprocess.run([sys.executable, str(path), "--backend", backend, "--seed", str(seed)],
                           capture_output=True, text=True, cwd=ROOT, timeout=600)
    except subprocess.TimeoutExpired:
        return "failed", "timed out after 600 s"
    lines = r.stdout.strip().splitlines()
    last = lines[-1] if lines else ""
    if r.returncode == 0 and last.startswith("ok"):
        return "ok", last
    if r.returncode == 1 and last.startswith("MISMATCH"):
        return "mismatch", last
    errors = r.stderr.strip().splitlines()
    return "failed", f"exit {r.returncode}: {errors[-1] if errors else last}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", action="store_true",
                        help="also the realistic models of bench/models.py")
    options = parser.parse_args()
    programs = dict(zoo())
    if options.models:
        from bench.models import models

        programs.update({f"models/{k.split()[0]}-{k.split()[-1]}": v
                         for k, v in models().items()})
    t0 = time.perf_counter()
    results: dict[str, tuple[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="reproducers-") as tmp:
        scripts: dict[str, Path] = {}
        for name, (fn, args) in sorted(programs.items()):
            path = Path(tmp) / f"{name.replace('/', '_').replace('=', '')}.py"
            try:
                gx.explore(fn, *args).final.reproducer(path, backend=options.backend)
            except Exception as e:  # noqa: BLE001 - a program whose script cannot be made
                results[name] = ("failed", f"no script: {type(e).__name__}: {e}")
                continue
            scripts[name] = path
        with ThreadPoolExecutor(2) as pool:
            runs = {name: pool.submit(run_script, p, options.backend, options.seed)
                    for name, p in scripts.items()}
            for name, future in runs.items():
                results[name] = future.result()
    for name in sorted(results):
        verdict, line = results[name]
        print(f"{name:<28}{verdict:<10}{line}")
    count = {v: sum(r[0] == v for r in results.values()) for v in ("ok", "mismatch", "failed")}
    print(f"reproducers: {count['ok']} ok, {count['mismatch']} mismatch, {count['failed']} failed "
          f"of {len(results)} (backend {options.backend}, seed {options.seed}, "
          f"{time.perf_counter() - t0:.0f} s)")
    return 0 if count["ok"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
