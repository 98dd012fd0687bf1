"""The widget at model scale (issue 14): first view, stage switch and `to_html` size, on the
zoo's GPT-block gradient, the 12-layer model's gradient (1,443 ops) and an ~8,000-node graph;
and with the heat overlay of a profile (issue 25): every stage of the 12-layer gradient
profiled on cpu, the first view and the stage switches with the overlay drawn, the roofline
and memory tabs drawn.

Each figure is measured in this run: the kernel side (building a stage's view: layout and
SVG, what the widget does before it can show a stage) with time.perf_counter, and the browser
side in Debian's Chromium driven by Playwright on the exported page (the same front end the
widget runs), from navigation to the first graph drawn and from a click on a stage chip to
its graphs drawn. Also the boxes on the first view and the smallest label's height on screen.

    python -m bench.widget_scale            print the figures
    python -m bench.widget_scale --write    also replace this section of bench/RESULTS.md
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from pathlib import Path

import explorer as gx
from explorer.examples import mlp_attention, mlp_attention_grad
from explorer.ir.builder import GraphBuilder
from explorer.ir.graph import TensorType
from explorer.view.measured import measured_data
from explorer.view.payload import stage_view
from explorer.view.render import render

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests package: its zoo and its browser kit

GOALS = {"first view": 1.0, "stage switch": 0.3, "to_html MB": 2.0, "first view 8k": 2.0}


def _timed(fn, *args, **kw):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - start


def programs() -> dict[str, gx.Trace]:
    from tests.corpora.zoo import zoo

    fn, args = zoo()["gpt_grad"]
    out = {"zoo GPT-block gradient": gx.explore(fn, *args)}
    fn, args = mlp_attention_grad(12)
    out["12-layer model gradient"] = gx.explore(fn, *args)
    fn, args = mlp_attention(layers=160)  # ~7,800 traced ops; the traced stage only
    out["~8,000-node program"] = gx.explore(fn, *args, pipeline=[])
    return out


def chain_graph(n: int):  # type: ignore[no-untyped-def]
    """n elementwise ops without source lines: a flat picture of n boxes."""
    b = GraphBuilder("flat")
    t = TensorType((8,), "f32")
    vals = [b.param(t, "x"), b.param(t, "y")]
    for k in range(n):
        vals.append(b.add("add" if k % 2 else "mul", [vals[-1], vals[-2]], source=None))
    return b.build([vals[-1]])


DRAWN = ".gx-pane-after .gx-canvas > svg"
HEAT = ".gx-pane-after .gx-canvas > svg g.gx-heat"  # the overlay painted on the graph


def browser_figures(page, path: Path, stages: int, ready: str = DRAWN) -> dict[str, float]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    page.goto(path.as_uri())
    page.wait_for_function(f"() => document.querySelector({ready!r})", timeout=60_000)
    first = time.perf_counter() - start
    info = page.evaluate("""() => {
        const svg = document.querySelector('.gx-pane-after .gx-canvas > svg');
        const nodes = svg.querySelectorAll('g.node').length;
        const texts = [...svg.querySelectorAll('g.node text')].map(t => t.getBoundingClientRect().height)
            .filter(h => h > 0);
        return {nodes, minText: texts.length ? Math.min(...texts) : 0};
    }""")
    switches = []
    for k in range(1, stages):
        t0 = time.perf_counter()
        page.evaluate(f"() => document.querySelectorAll('.gx-chip')[{k}].click()")
        page.wait_for_function(
            f"() => document.querySelector('.gx-chip.gx-current')?.dataset.index === '{k}'"
            f" && document.querySelector({ready!r})")
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => r(0)))")
        switches.append(time.perf_counter() - t0)
    return {"first": first, "boxes": info["nodes"], "min_text_px": info["minText"],
            "switch": max(switches) if switches else 0.0}


def tab_figure(page, tab: str, drawn: str) -> float:  # type: ignore[no-untyped-def]
    """From a click on a tab to its plot drawn."""
    t0 = time.perf_counter()
    page.evaluate(f"() => document.querySelector('[data-tab={tab}]').click()")
    page.wait_for_function(f"() => document.querySelector({drawn!r})")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => r(0)))")
    return time.perf_counter() - t0


def heat_rows(page, trace: gx.Trace, label: str, tmp: str) -> list[tuple[str, str, str, str]]:  # type: ignore[no-untyped-def]
    """Every stage profiled on cpu (the last one with its roofline and memory timeline), then
    the page with the overlay: first view and stage switches until the heat is drawn."""
    n = len(trace.stages)
    start = time.perf_counter()
    profiles = [trace.profile(stage=k, backend="cpu", repeats=3) for k in range(n)]
    profile_s = time.perf_counter() - start
    roof, _ = _timed(trace.roofline, stage=-1, backend="cpu", repeats=3)
    timeline, _ = _timed(trace.memory_timeline, stage=-1, backend="cpu")
    measured = measured_data(profiles, [roof], [timeline])
    # what the kernel does before the first view with the overlay: the view and the data
    _, kernel_first = _timed(lambda: (stage_view(trace, 0), measured_data(profiles, [roof],
                                                                          [timeline])))
    path = Path(tmp) / "heat.html"
    trace.to_html(path, measured=measured)
    size = os.path.getsize(path) / 1e6
    b = browser_figures(page, path, n, ready=HEAT)
    roof_s = tab_figure(page, "roofline", ".gx-tabbody svg.gx-roofline .gx-roof-pt")
    memory_s = tab_figure(page, "memory", ".gx-tabbody svg.gx-lifetimes .gx-life")
    first = kernel_first + b["first"]
    return [
        (f"{label}: profile of every stage on cpu (median of 3 each; taken once)",
         f"{profile_s:.1f} s", "", ""),
        (f"{label}: first view with the heat overlay, kernel (stage 0's view + profile data)",
         f"{kernel_first:.2f} s", f"< {GOALS['first view']} s (with the browser's)",
         "yes" if first < GOALS["first view"] else "**no**"),
        (f"{label}: first view with the heat overlay, browser (page load to heat drawn)",
         f"{b['first']:.2f} s", "", ""),
        (f"{label}: stage switch with the heat overlay, browser (click to heat drawn, worst)",
         f"{b['switch']:.2f} s", f"< {GOALS['stage switch']} s",
         "yes" if b["switch"] < GOALS["stage switch"] else "**no**"),
        (f"{label}: roofline tab; memory tab (click to plot drawn)",
         f"{roof_s:.2f} s; {memory_s:.2f} s", f"< {GOALS['stage switch']} s",
         "yes" if max(roof_s, memory_s) < GOALS["stage switch"] else "**no**"),
        (f"{label}: to_html size with every stage's profile, a roofline and a timeline",
         f"{size:.2f} MB", f"<= {GOALS['to_html MB']} MB",
         "yes" if size <= GOALS["to_html MB"] else "**no**"),
    ]


def main() -> list[str]:
    from playwright.sync_api import sync_playwright

    from tests.browser.browserkit import CHROMIUM, CHROMIUM_ARGS

    rows = []
    _, flat = _timed(render, chain_graph(1000), max_nodes=2000)
    rows.append(("1,000 boxes drawn flat (render, no grouping)", f"{flat:.2f} s", "", ""))
    traces = programs()
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        for name, trace in traces.items():
            nodes = max(len(s.graph) for s in trace.stages)
            _, kernel_first = _timed(stage_view, trace, 0)
            worst = max(range(1, len(trace.stages)), key=lambda k: len(trace.stages[k].graph),
                        default=0)
            kernel_switch = _timed(stage_view, trace, worst)[1] if worst else 0.0
            path = Path(tmp) / "page.html"
            _, export_s = _timed(trace.to_html, path)
            size = os.path.getsize(path) / 1e6
            b = browser_figures(page, path, len(trace.stages))
            big = name.startswith("~8,000")
            goal_first = GOALS["first view 8k" if big else "first view"]
            label = f"{name} ({nodes} nodes, {len(trace.stages)} stages)"
            rows += [
                (f"{label}: first view, kernel (layout + SVG of stage 0)", f"{kernel_first:.2f} s",
                 f"< {goal_first} s (with the browser's)",
                 "yes" if kernel_first + b["first"] < goal_first else "**no**"),
                (f"{label}: first view, browser (page load to graph drawn)", f"{b['first']:.2f} s",
                 "", ""),
                (f"{label}: boxes on the first view; smallest label on screen",
                 f"{b['boxes']}; {b['min_text_px']:.1f} px", "<= ~60; readable (>= 8 px)",
                 "yes" if b["boxes"] <= 60 and b["min_text_px"] >= 8 else "**no**"),
            ]
            if worst:
                rows += [
                    (f"{label}: stage switch, kernel (largest stage's view, uncached)",
                     f"{kernel_switch:.2f} s", f"< {GOALS['stage switch']} s (cached after)",
                     "yes" if kernel_switch < GOALS["stage switch"] else "**no**"),
                    (f"{label}: stage switch, browser (click to graphs drawn, worst)",
                     f"{b['switch']:.2f} s", f"< {GOALS['stage switch']} s",
                     "yes" if b["switch"] < GOALS["stage switch"] else "**no**"),
                ]
            rows.append((f"{label}: to_html size; time", f"{size:.2f} MB; {export_s:.1f} s",
                         f"<= {GOALS['to_html MB']} MB",
                         "yes" if size <= GOALS["to_html MB"] else "**no**"))
            if name == "12-layer model gradient":
                rows += heat_rows(page, trace, label, tmp)
        browser.close()
    load = os.getloadavg()
    head = (f"`python -m bench.widget_scale`, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores,"
            f" load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; Chromium headless,"
            " 1400x1000 viewport.")
    lines = [head, "", "| figure | measured | goal | met |", "|---|---:|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return lines


def write(lines: list[str]) -> None:
    path = ROOT / "bench" / "RESULTS.md"
    text = path.read_text(encoding="utf-8")
    block = "\n".join(["<!-- widget_scale:start -->", "## widget at model scale (issue 14)", "",
                       *lines, "<!-- widget_scale:end -->"])
    if "<!-- widget_scale:start -->" in text:
        text = re.sub(r"<!-- widget_scale:start -->.*?<!-- widget_scale:end -->", lambda _: block,
                      text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    out = main()
    print("\n".join(out))
    if "--write" in sys.argv:
        write(out)
