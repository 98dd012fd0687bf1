"""The widget at model scale (issue 14), measured from Python in one run: for a program, how
long the widget takes to build its first view, how long a stage switch takes when the stage
was computed ahead and when it was not, how many boxes the first view draws, and how large
`to_html` is and how long it takes.

    python -m bench.widget_scale            # the GPT-block gradient of tests/zoo.py, and the
                                            # 12-layer model's gradient (bench/models.py)

The figures are Python-side (the payload ready to send); the browser's drawing comes on top.
`uptime`'s load average is printed: the machine may be shared.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import explorer as gx
from bench.models import mlp_attention_grad
import importlib

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
render = importlib.import_module("explorer.view.render")  # the module (the package exports a function of that name)


def _programs() -> dict[str, tuple[Any, tuple[Any, ...]]]:
    from tests.zoo import zoo

    fn, args = zoo()["gpt_grad"]
    model = mlp_attention_grad()
    return {"GPT block gradient (tests/zoo.py)": (fn, args),
            "12-layer model gradient (bench/models.py)": model}


def measure(name: str, fn: Any, args: tuple[Any, ...]) -> None:
    tr = gx.explore(fn, *args)
    n = len(tr.stages[0].graph)
    render._DRAWN.clear()
    t0 = time.perf_counter()
    w = tr.widget()
    first = time.perf_counter() - t0
    boxes = w.after_svg.count('class="node')
    for f in list(w._ahead.values()):  # the next stage, computed ahead meanwhile
        f.result()
    t0 = time.perf_counter()
    w.index = 1
    ahead = time.perf_counter() - t0
    far = len(tr.stages) - 1
    t0 = time.perf_counter()
    w.index = far  # not computed ahead
    cold = time.perf_counter() - t0
    for f in list(w._ahead.values()):
        f.result()
    with tempfile.TemporaryDirectory() as d:
        render._DRAWN.clear()
        t0 = time.perf_counter()
        path = tr.to_html(Path(d) / "t.html")
        html_s = time.perf_counter() - t0
        size = os.path.getsize(path)
    print(f"{name}: {n} nodes traced, {len(tr.stages)} stages")
    print(f"  first view {first:.2f} s ({boxes} boxes); switch to a stage computed ahead "
          f"{ahead * 1e3:.0f} ms, to one not computed ahead {cold:.2f} s")
    print(f"  to_html {size / 1e6:.2f} MB in {html_s:.1f} s")


def main() -> None:
    print("load average", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    for name, (fn, args) in _programs().items():
        measure(name, fn, args)
    print("load average", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
