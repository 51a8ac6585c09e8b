"""How a turn reads in a notebook: a `Response` shown by IPython as `%%chat` shows it."""

from __future__ import annotations

from IPython.core.interactiveshell import InteractiveShell

from jupyter_chatflow import Response
from jupyter_chatflow.frontends.render import register_display

from ..test_events import samples


def test_a_response_at_the_end_of_a_cell_shows_its_answer_and_the_pipeline_summary():
    shell = InteractiveShell.instance()
    register_display(shell)  # what importing the package in a kernel does
    data, _ = shell.display_formatter.format(Response(samples()))
    markdown = data["text/markdown"]
    assert markdown.startswith('<div class="cf-answer-md"><p>Paris</p><details><summary>pipeline</summary>')
    assert "safety: input redact" in markdown and "context: 12/8192 tokens" in markdown
