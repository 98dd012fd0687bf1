// Graphviz escapes the text it writes, but an SVG is still markup: parse it as XML and drop
// anything that could run code before it enters the page.

const FORBIDDEN = new Set(["script", "foreignobject", "iframe", "object", "embed", "style", "handler"]);

export function sanitizeSvg(text: string): SVGSVGElement | null {
  if (!text) return null;
  const doc = new DOMParser().parseFromString(text, "image/svg+xml");
  const root = doc.documentElement;
  if (!root || root.nodeName.toLowerCase() !== "svg" || doc.getElementsByTagName("parsererror").length) {
    return null;
  }
  scrub(root);
  return document.importNode(root, true) as unknown as SVGSVGElement;
}

function scrub(el: Element): void {
  for (const child of Array.from(el.children)) {
    if (FORBIDDEN.has(child.nodeName.toLowerCase())) child.remove();
    else scrub(child);
  }
  for (const attr of Array.from(el.attributes)) {
    const name = attr.name.toLowerCase();
    const value = attr.value.replace(/[\s\u0000-\u001f]/g, "").toLowerCase();
    if (name.startsWith("on")) el.removeAttribute(attr.name);
    else if ((name === "href" || name.endsWith(":href")) && !value.startsWith("#")) el.removeAttribute(attr.name);
    else if (value.includes("javascript:")) el.removeAttribute(attr.name);
  }
}
