// The bundle's entry: anywidget's render() and, for exported pages, mountStatic().

import "./style.css";
import type { ExportData } from "./schema.gen";
import { StaticModel } from "./static-model";
import type { Model } from "./types";
import { renderWidget } from "./widget";

export function mountStatic(el: HTMLElement, data: ExportData): () => void {
  return renderWidget(new StaticModel(data), el);
}

(globalThis as any).gambitExplorer = { mountStatic };

export default {
  render({ model, el }: { model: Model; el: HTMLElement }) {
    return renderWidget(model, el);
  },
};
