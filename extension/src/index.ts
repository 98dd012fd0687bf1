// The bundle's entry: anywidget's render() and, for exported pages and saved notebooks,
// mountStatic() / mountPacked() (a model with no kernel behind it).

import "./style.css";
import type { ExportData } from "./schema.gen";
import { StaticModel } from "./static-model";
import type { Model } from "./types";
import { renderWidget } from "./widget";

export function mountStatic(el: HTMLElement, data: ExportData): () => void {
  return renderWidget(new StaticModel(data), el);
}

/** Pictures stored once: a view's "svg:N" stands for data.svgs[N] (explorer/view/export.py). */
export function resolveSvgs(data: ExportData): ExportData {
  const svgs = data.svgs ?? [];
  const pick = (s: string) => (s.startsWith("svg:") ? (svgs[Number(s.slice(4))] ?? "") : s);
  const views = data.views.map((v) => ({ ...v, before_svg: pick(v.before_svg), after_svg: pick(v.after_svg) }));
  return { state: data.state, views };
}

async function unpack(text: string): Promise<ExportData> {
  const bytes = Uint8Array.from(atob(text.trim()), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return resolveSvgs(JSON.parse(await new Response(stream).text()));
}

/** The output area holding `el` in JupyterLab or Notebook 7, if any. */
function outputOf(el: Element): Element | null {
  return el.closest(".jp-OutputArea-child");
}

/** Mount the view on the packed data of the script `.gx-data[data-gx=uid]`, in its place.
 * In a notebook output, the summary beside it is hidden, and so is the output before it
 * when that is the live widget failing for want of its kernel ("model not found"). */
export async function mountPacked(uid: string): Promise<void> {
  const script = document.querySelector(`script.gx-data[data-gx="${uid}"]`);
  if (!script?.parentElement) return;
  const data = await unpack(script.textContent ?? "");
  const host = document.createElement("div");
  script.parentElement.insertBefore(host, script);
  const container = script.closest(".gx-static");
  if (container) {
    for (const s of Array.from(container.querySelectorAll(".gx-summary"))) (s as HTMLElement).style.display = "none";
    const out = outputOf(container);
    const before = out?.previousElementSibling;
    if (before) {
      const hideIfDead = () => {
        if (/model not found|Error displaying widget/.test(before.textContent ?? "")) (before as HTMLElement).style.display = "none";
      };
      hideIfDead();
      new MutationObserver(hideIfDead).observe(before, { childList: true, subtree: true, characterData: true });
    }
  }
  mountStatic(host, data);
}

(globalThis as any).gambitExplorer = { mountStatic, mountPacked };

export default {
  render({ model, el }: { model: Model; el: HTMLElement }) {
    // the live widget: the kernel-less copy saved beside it (the next output) is not needed
    const hideCopy = () => {
      const next = outputOf(el)?.nextElementSibling;
      if (next?.querySelector(".gx-static")) (next as HTMLElement).style.display = "none";
    };
    hideCopy();
    setTimeout(hideCopy, 0); // the output may be attached after render
    setTimeout(hideCopy, 500);
    return renderWidget(model, el);
  },
};
