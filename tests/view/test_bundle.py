"""The committed bundle (explorer/static) is built from the current extension/ sources.

build.mjs writes a sha256 of its inputs into the bundle's first line; this recomputes it
without node. `npm run check` in extension/ (run by `make test`) compares bytes as well.
"""

import hashlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXT = ROOT / "extension"
STATIC = ROOT / "explorer" / "static"


def source_hash() -> str:
    paths = [p for p in (EXT / "src").rglob("*") if p.is_file()]
    paths += [EXT / "build.mjs", EXT / "package-lock.json"]
    h = hashlib.sha256()
    for rel in sorted(p.relative_to(EXT).as_posix() for p in paths):
        h.update(rel.encode() + b"\0")
        h.update((EXT / rel).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def recorded_hash(name: str) -> str:
    first = (STATIC / name).read_text(encoding="utf-8").splitlines()[0]
    m = re.search(r"sources sha256: ([0-9a-f]{64})", first)
    assert m, f"{name} has no source hash: rebuild it with `npm run build` in extension/"
    return m.group(1)


def test_bundle_is_current():
    want = source_hash()
    for name in ("widget.js", "widget.css"):
        assert recorded_hash(name) == want, (
            f"explorer/static/{name} is stale: run `npm run build` in extension/ and commit it")


def test_bundle_is_an_anywidget_module():
    js = (STATIC / "widget.js").read_text(encoding="utf-8")
    assert "export{" in js.replace(" ", "") and "render" in js
    assert "gambitExplorer" in js  # the hook export.py's pages call
    assert not re.search(r"\bimport\s*[{*\"']|\bimport\(", js)  # self-contained
