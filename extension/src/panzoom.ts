// Pan (drag) and zoom (wheel, buttons) of one SVG by rewriting its viewBox. A user's move is
// also reported as a ViewOp (in screen terms, not graph units) so that another pane can make
// the same move: the before and after graphs differ in size, so copying a viewBox would jump.

export interface Box {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** The first view of a graph: whole if it is readable so, else at a readable scale (labels
 * at 75% or more), the top of the graph, centred (the minimap shows the rest). */
export const READABLE = 0.75;
export function initialView(graph: Box, paneW: number, paneH: number): Box {
  const fit = Math.min(paneW / graph.w, paneH / graph.h);
  const scale = fit >= READABLE ? Math.min(fit, 1.25) : Math.max(Math.min(paneW / graph.w, 1), READABLE);
  const w = paneW / scale;
  const h = paneH / scale;
  const x = graph.x + (graph.w - w) / 2;
  const y = h >= graph.h ? graph.y + (graph.h - h) / 2 : graph.y;
  return { x, y, w, h };
}

/** The whole graph in the pane, centred, never enlarged past 125%. */
export function wholeView(graph: Box, paneW: number, paneH: number): Box {
  const scale = Math.min(paneW / graph.w, paneH / graph.h, 1.25);
  const w = paneW / scale;
  const h = paneH / scale;
  return { x: graph.x + (graph.w - w) / 2, y: graph.y + (graph.h - h) / 2, w, h };
}

/** Zoom by `factor` (>1 zooms in) keeping the point (px, py), in view units, in place. */
export function zoomAt(view: Box, factor: number, px: number, py: number): Box {
  const w = view.w / factor;
  const h = view.h / factor;
  return { x: px - (px - view.x) / factor, y: py - (py - view.y) / factor, w, h };
}

/** The view moved to centre `target` (a box in view units), keeping the zoom. */
export function centreOn(view: Box, target: Box): Box {
  return { ...view, x: target.x + target.w / 2 - view.w / 2, y: target.y + target.h / 2 - view.h / 2 };
}

/** A user's move: pan by screen pixels, zoom about a point given as fractions of the pane. */
export type ViewOp = { kind: "pan"; dx: number; dy: number } | { kind: "zoom"; factor: number; fx: number; fy: number } | { kind: "fit" };

/** The view panned by (dx, dy) screen pixels at `scale` pixels per view unit. */
export function panBy(view: Box, dx: number, dy: number, scale: number): Box {
  const s = scale || 1;
  return { ...view, x: view.x - dx / s, y: view.y - dy / s };
}

export class PanZoom {
  private graph: Box;
  view: Box;
  private drag: { x: number; y: number } | null = null;
  /** Called with each move the user makes here (not with moves applied by `perform`). */
  onChange: ((op: ViewOp) => void) | null = null;
  /** Called after every change of the view (the minimap follows it). */
  onView: ((view: Box, graph: Box) => void) | null = null;
  /** Called with the element pressed when a press ends without a drag (a click). */
  onTap: ((target: Element) => void) | null = null;
  private moved = false;
  private pressed: Element | null = null;

  constructor(private pane: HTMLElement, private svg: SVGSVGElement) {
    const vb = svg.viewBox.baseVal;
    this.graph = vb && vb.width ? { x: vb.x, y: vb.y, w: vb.width, h: vb.height } : { x: 0, y: 0, w: 100, h: 100 };
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.setAttribute("preserveAspectRatio", "xMidYMid meet");
    this.view = this.graph;
    this.fit();
    pane.addEventListener("wheel", this.onWheel, { passive: false });
    pane.addEventListener("pointerdown", this.onDown);
    pane.addEventListener("pointermove", this.onMove);
    pane.addEventListener("pointerup", this.onUp);
    pane.addEventListener("pointerleave", this.onUp);
  }

  private size(): [number, number] {
    return [this.pane.clientWidth || 400, this.pane.clientHeight || 300];
  }

  private apply(): void {
    const v = this.view;
    this.svg.setAttribute("viewBox", `${v.x} ${v.y} ${v.w} ${v.h}`);
    this.onView?.(v, this.graph);
  }

  /** The first view (whole if readable so, else the top at full width), or with `whole` the
   * whole graph however small. */
  fit(emit = false, whole = false): void {
    const [w, h] = this.size();
    this.view = (whole ? wholeView : initialView)(this.graph, w, h);
    this.apply();
    if (emit) this.onChange?.({ kind: "fit" });
  }

  /** Centre the view on a point in graph units (a click on the minimap). */
  centre(x: number, y: number): void {
    this.view = centreOn(this.view, { x, y, w: 0, h: 0 });
    this.apply();
  }

  zoom(factor: number): void {
    this.perform({ kind: "zoom", factor, fx: 0.5, fy: 0.5 });
    this.onChange?.({ kind: "zoom", factor, fx: 0.5, fy: 0.5 });
  }

  private scale(): number {
    const r = this.svg.getBoundingClientRect();
    return Math.min(r.width / this.view.w, r.height / this.view.h) || 1;
  }

  /** Make a move: the user's own, or one reported by the other pane. */
  perform(op: ViewOp): void {
    if (op.kind === "fit") {
      this.fit(false, true);
      return;
    }
    if (op.kind === "pan") {
      this.view = panBy(this.view, op.dx, op.dy, this.scale());
    } else {
      const r = this.svg.getBoundingClientRect();
      const [px, py] = r.width && r.height
        ? this.toView({ clientX: r.left + op.fx * r.width, clientY: r.top + op.fy * r.height })
        : [this.view.x + op.fx * this.view.w, this.view.y + op.fy * this.view.h];
      this.view = zoomAt(this.view, op.factor, px, py);
    }
    this.apply();
  }

  reveal(elements: Element[]): void {
    const boxes = elements.map((e) => (e as SVGGraphicsElement).getBBox?.()).filter((b) => b && b.width);
    if (!boxes.length) return;
    const x = Math.min(...boxes.map((b) => b.x));
    const y = Math.min(...boxes.map((b) => b.y));
    const x2 = Math.max(...boxes.map((b) => b.x + b.width));
    const y2 = Math.max(...boxes.map((b) => b.y + b.height));
    // graphviz draws in a group translated by the graph's height: map to view units
    const root = this.svg.querySelector("g.graph") as SVGGraphicsElement | null;
    const m = root?.transform?.baseVal?.consolidate?.()?.matrix;
    const tx = m ? m.e : 0;
    const ty = m ? m.f : 0;
    this.view = centreOn(this.view, { x: x + tx, y: y + ty, w: x2 - x, h: y2 - y });
    this.apply();
  }

  destroy(): void {
    this.pane.removeEventListener("wheel", this.onWheel);
    this.pane.removeEventListener("pointerdown", this.onDown);
    this.pane.removeEventListener("pointermove", this.onMove);
    this.pane.removeEventListener("pointerup", this.onUp);
    this.pane.removeEventListener("pointerleave", this.onUp);
  }

  private toView(ev: { clientX: number; clientY: number }): [number, number] {
    const r = this.svg.getBoundingClientRect();
    const v = this.view;
    const s = Math.min(r.width / v.w, r.height / v.h) || 1;
    const ox = (r.width - v.w * s) / 2;
    const oy = (r.height - v.h * s) / 2;
    return [v.x + (ev.clientX - r.left - ox) / s, v.y + (ev.clientY - r.top - oy) / s];
  }

  private onWheel = (ev: WheelEvent): void => {
    ev.preventDefault();
    const r = this.svg.getBoundingClientRect();
    const op: ViewOp = {
      kind: "zoom",
      factor: ev.deltaY < 0 ? 1.15 : 1 / 1.15,
      fx: r.width ? (ev.clientX - r.left) / r.width : 0.5,
      fy: r.height ? (ev.clientY - r.top) / r.height : 0.5,
    };
    this.perform(op);
    this.onChange?.(op);
  };

  private onDown = (ev: PointerEvent): void => {
    if (ev.button !== 0) return;
    this.drag = { x: ev.clientX, y: ev.clientY };
    this.moved = false;
    this.pressed = ev.target as Element | null;
    this.pane.setPointerCapture?.(ev.pointerId);
    this.pane.classList.add("gx-dragging");
  };

  private onMove = (ev: PointerEvent): void => {
    if (!this.drag) return;
    const op: ViewOp = { kind: "pan", dx: ev.clientX - this.drag.x, dy: ev.clientY - this.drag.y };
    if (!this.moved && Math.abs(op.dx) + Math.abs(op.dy) < 4) return;
    this.moved = true;
    this.drag = { x: ev.clientX, y: ev.clientY };
    this.perform(op);
    this.onChange?.(op);
  };

  private onUp = (): void => {
    if (this.drag && !this.moved && this.pressed) this.onTap?.(this.pressed);
    this.pressed = null;
    this.drag = null;
    this.pane.classList.remove("gx-dragging");
  };
}
