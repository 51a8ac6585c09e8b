/**
 * Model output as Markdown, built into DOM nodes from markdown-it's tokens: no HTML string is ever parsed, so
 * nothing in an answer can become markup, a script or an event handler.
 *
 * - markdown-it parses with raw HTML off (any HTML in the answer is text) and links only as the model wrote them;
 * - each token becomes an element from a fixed allowlist (`createElement`), its text a text node;
 * - images and links are written out as their text and URL: nothing is fetched (a prompt-injected image URL is a
 *   way to carry data out) and nothing is clickable.
 *
 * The kernel's static copy does the same with markdown-it-py and nh3 (jupyter_chatflow/safe_markdown.py).
 */

import type { Token } from "markdown-it";
import MarkdownIt from "markdown-it";

// breaks: a single newline is a line break, as the model wrote it (a chat answer is not a document to reflow)
const md = new MarkdownIt("commonmark", { html: false, linkify: false, breaks: true }).enable([
  "table",
  "strikethrough",
]);

/** The elements a token may become; anything else becomes a span. */
const TAGS = new Set([
  "p",
  "h1",
  "h2",
  "h3",
  "h4",
  "h5",
  "h6",
  "blockquote",
  "ul",
  "ol",
  "li",
  "em",
  "strong",
  "s",
  "table",
  "thead",
  "tbody",
  "tr",
  "th",
  "td",
]);

interface Walk {
  stack: Node[];
  /** The URL of each open link ("" for an autolink, whose text is its URL). */
  links: string[];
}

/** `text` rendered as Markdown into a fragment of inert elements. */
export function renderMarkdown(text: string): DocumentFragment {
  const root = document.createDocumentFragment();
  walk(md.parse(text, {}), { stack: [root], links: [] });
  return root;
}

function walk(tokens: readonly Token[], w: Walk): void {
  for (const t of tokens) leaf(t, w) || nest(t, w);
}

/** Tokens that stand alone; false when `t` opens or closes an element. */
function leaf(t: Token, w: Walk): boolean {
  if (t.type === "inline") {
    walk(t.children ?? [], w);
    return true;
  }
  const node = standalone(t);
  if (node) w.stack[w.stack.length - 1].appendChild(node);
  return node !== null;
}

/** The node of a token that neither opens nor closes an element nor holds others; null for the rest. */
function standalone(t: Token): Node | null {
  switch (t.type) {
    case "text":
    case "html_inline": // (never made with html off; text if it were)
    case "html_block":
      return document.createTextNode(t.content);
    case "softbreak": // a single newline: a line break (`breaks` above)
    case "hardbreak":
      return document.createElement("br");
    case "hr":
      return document.createElement("hr");
    case "code_inline":
      return textElement("code", t.content);
    case "fence":
    case "code_block":
      return codeBlock(t);
    case "image": // never loaded: its alt text and address, as text
      return textElement(
        "span",
        `[image: ${t.children?.map((c) => c.content).join("") ?? ""} — ${t.attrGet("src") ?? ""}]`,
        "cf-md-url",
      );
    default:
      return null;
  }
}

/** `<pre><code>`, the code's language as its class when the fence names a plausible one. */
function codeBlock(t: Token): HTMLElement {
  const code = textElement("code", t.content);
  const lang = t.info.trim().split(/\s+/)[0];
  if (/^[\w+#.-]{1,32}$/.test(lang)) code.className = `language-${lang}`;
  const pre = document.createElement("pre");
  pre.appendChild(code);
  return pre;
}

function nest(t: Token, w: Walk): void {
  if (t.type === "link_open") {
    w.links.push(t.markup === "autolink" ? "" : (t.attrGet("href") ?? ""));
    const span = textElement("span", "", "cf-md-link");
    w.stack[w.stack.length - 1].appendChild(span);
    w.stack.push(span);
  } else if (t.type === "link_close") {
    w.stack.pop();
    const href = w.links.pop();
    if (href) w.stack[w.stack.length - 1].appendChild(textElement("span", ` (${href})`, "cf-md-url"));
  } else if (t.nesting === 1) {
    const node = document.createElement(TAGS.has(t.tag) ? t.tag : "span");
    const start = Number(t.attrGet("start"));
    if (t.tag === "ol" && Number.isInteger(start) && start > 0) node.setAttribute("start", String(start));
    w.stack[w.stack.length - 1].appendChild(node);
    w.stack.push(node);
  } else if (t.nesting === -1 && w.stack.length > 1) {
    w.stack.pop();
  }
}

function textElement(tag: string, text: string, className = ""): HTMLElement {
  const node = document.createElement(tag);
  node.textContent = text;
  if (className) node.className = className;
  return node;
}
