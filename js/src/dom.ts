/** The one DOM helper: builds elements from tags, attributes and text. Data only ever becomes textContent. */

export type AttrValue = string | number | boolean | null | undefined;
export type Child = Node | string | null | undefined | false;

/**
 * `el("span", {class: "cf-x", "data-testid": "token"}, "text", child)`: `class` sets className, `text` sets
 * textContent, every other key is an attribute (false/null/undefined skipped); string children become text nodes.
 */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, AttrValue> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = String(value);
    else if (key === "text") node.textContent = String(value);
    else if (/^on/i.test(key)) throw new Error(`el(): use addEventListener, not the ${key} attribute`);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, ...children);
  return node;
}

/** Appends nodes; strings become text nodes (never parsed as HTML). */
export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }
}

/** Removes all children. */
export function clear(node: Node): void {
  while (node.firstChild) node.removeChild(node.firstChild);
}

/** Formats a number of milliseconds for labels. */
export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return "–";
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms >= 10) return `${ms.toFixed(0)} ms`;
  return `${ms.toFixed(ms >= 1 ? 1 : 2)} ms`;
}

/** Makes whitespace in a token visible: newline → ↵, tab → ⇥, a token of only spaces → ␣ per space. */
export function visibleText(text: string): string {
  if (text === "") return "∅";
  let out = text.replace(/\r?\n/g, "↵").replace(/\t/g, "⇥");
  if (/^ +$/.test(out)) out = "␣".repeat(out.length);
  return out;
}
