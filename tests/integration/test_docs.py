"""The documentation site (issue 35): `sphinx-build -W` from docs/ builds offline, with a page per tour chapter
rendered from the notebook's stored outputs (the panels' static copies among them) and the API reference from the
docstrings; in Chromium, a chapter shows its panel's static copy and the API page its names.

Screenshots go to $CHATFLOW_ARTIFACTS/docs-site/ (default: test-artifacts/ in the checkout)."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from .test_e2e_panel import ARTIFACTS, CHROMIUM, FLAGS

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = [ROOT / "examples" / "quickstart.ipynb", *sorted((ROOT / "examples" / "tour").glob("*.ipynb"))]
SHOTS = ARTIFACTS / "docs-site"
DEAD_PROXY = "http://127.0.0.1:9"  # any fetch the build tried would fail, and -W makes its warning an error
BUILD_BUDGET_S = 240  # ~20 s from scratch on 2 cores; CI's whole run has 90 minutes


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built from scratch into a temporary folder, every warning an error, no network."""
    out = tmp_path_factory.mktemp("site")
    proxies = {name: DEAD_PROXY for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")}
    started = time.monotonic()
    built = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d", str(out / "doctrees"),
         str(ROOT / "docs"), str(out / "html")],
        capture_output=True, text=True, timeout=BUILD_BUDGET_S, env={**os.environ, **proxies, "NO_PROXY": ""},
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-5000:]
    assert built.stderr == "", built.stderr[-5000:]  # not one warning
    print(f"docs site built in {time.monotonic() - started:.1f} s")
    return out / "html"


def text_of(page: Path) -> str:
    """A built page's text, as a reader sees it (tags out, entities read)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def chapter_title(notebook: Path) -> str:
    """The notebook's first heading, as its page's title."""
    first = json.loads(notebook.read_text(encoding="utf-8"))["cells"][0]
    return "".join(first["source"]).splitlines()[0].lstrip("# ").strip()


def static_copies(notebook: Path) -> list[str]:
    """The panels' static copies the notebook stores: HTML outputs of a `cf-static-copy` div."""
    copies = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            page = "".join(output.get("data", {}).get("text/html", ""))
            if 'class="cf-static-copy"' in page:
                copies.append(page)
    return copies


def test_every_tour_chapter_is_a_page_with_its_stored_outputs(site):
    index = (site / "index.html").read_text(encoding="utf-8")
    assert len(CHAPTERS) == 15  # the quickstart and 14 chapters (1-13 and 5b)
    for notebook in CHAPTERS:
        page = site / "tour" / f"{notebook.stem}.html"
        text = page.read_text(encoding="utf-8")
        title = html.unescape(re.search(r"<title>(.*?)</title>", text, re.S).group(1))
        assert title.startswith(chapter_title(notebook)), (notebook.name, title)
        assert f'href="tour/{notebook.stem}.html"' in index, notebook.name
        assert text.count('class="cf-static-copy"') == len(static_copies(notebook)), notebook.name
        assert "widget-state+json" not in text and not re.search(r"<script[^>]+src=\"(https?:)?//", text)
    sampling = text_of(site / "tour" / "07_sampling.html")
    assert "ChatWidget(session='tour-sampling'): the inspector panel; its turns are in the copy below" in sampling
    assert "Write one sentence about the sea." in sampling  # the first turn, in the static copy
    assert len(static_copies(ROOT / "examples" / "tour" / "07_sampling.ipynb")) == 1


def test_the_api_reference_is_generated_from_the_docstrings(site):
    chat = (site / "api" / "chat.html").read_text(encoding="utf-8")
    assert 'id="jupyter_chatflow.pipeline.chat.Chat.send"' in chat
    engine = (site / "api" / "engine.html").read_text(encoding="utf-8")
    assert 'id="jupyter_chatflow.engine.loader.load_model"' in engine
    assert 'id="jupyter_chatflow.engine.sampling.SamplingParams.penalty_from"' in engine
    assert "docs/sampling.md#the-repetition-penalty-over-the-answer-alone" in engine  # the docstring's own words
    for name in ("chat", "notebook", "engine", "tools", "safety", "events", "account", "server", "settings"):
        assert re.search(r'<dt class="sig sig-object py" id="jupyter_chatflow\.', (site / "api" / f"{name}.html")
                         .read_text(encoding="utf-8")), name  # fmt: skip


def test_the_guide_the_measured_and_the_moved_pages_are_there(site):
    for page in (
        "notebook",
        "cli",
        "server",
        "remote",
        "python",
        "models",
        "sampling",
        "binder",
        "testing",
        "architecture",
        "DESIGN",
        "engine",
        "pipeline",
        "inside",
        "safety",
        "environment",
        "benchmarks",
        "results",
    ):
        assert (site / f"{page}.html").exists(), page
    benchmarks = (site / "benchmarks.html").read_text(encoding="utf-8")
    assert "Benchmarks: how to measure" in benchmarks and 'href="results.html"' in benchmarks
    testing = text_of(site / "testing.html")
    assert 'mypy && pytest && pytest -m "slow or browser"' in testing  # the README's block, included


@pytest.fixture(scope="module")
def served(site):
    """The built site over HTTP on a free loopback port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(timeout=10)


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium")
def test_the_site_in_a_browser_shows_a_chapters_static_copy_and_the_api(served):
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    failed = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("requestfailed", lambda request: failed.append(request.url))
        page.goto(f"{served}/index.html")
        assert page.locator("h1").first.inner_text().startswith("jupyter_chatflow")
        assert page.locator(".sidebar-tree a", has_text="13. The wire").count() == 1
        page.screenshot(path=str(SHOTS / "index.png"))

        page.goto(f"{served}/tour/07_sampling.html")
        copy = page.locator(".cf-static-copy").first
        copy.scroll_into_view_if_needed()
        assert copy.is_visible()
        assert "Write one sentence about the sea." in copy.inner_text()
        assert copy.locator("details").count() >= 1 and copy.bounding_box()["height"] > 100
        page.screenshot(path=str(SHOTS / "tour-07-sampling-static-copy.png"))
        figure = page.locator('.cell_output img[src$=".svg"]').first  # a stored figure: the distributions drawn
        figure.scroll_into_view_if_needed()
        assert figure.is_visible() and figure.evaluate("image => image.complete && image.naturalWidth > 100")
        page.screenshot(path=str(SHOTS / "tour-07-sampling-figure.png"))

        page.goto(f"{served}/api/chat.html")
        send = page.locator('[id="jupyter_chatflow.pipeline.chat.Chat.send"]')
        send.scroll_into_view_if_needed()
        assert send.is_visible() and "send(" in send.inner_text()
        page.screenshot(path=str(SHOTS / "api-chat-send.png"))
        browser.close()
    assert failed == []  # every script, stylesheet and image came from the site itself
