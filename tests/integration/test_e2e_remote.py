"""The panel over a remote chat, end to end: JupyterLab in headless Chromium, a notebook whose kernel runs
`chatflow serve` on a thread (`serve_in_background`, the real model, an API key) and a `%%chat --inspect` cell
whose turns go to it over HTTP (`ChatMagics.server`, the key from $CHATFLOW_API_KEY).

Checks what a user sees: the answer streams in; the Wire tab shows the request (the key masked, never the key),
the status and x-request-id, and the SSE frames with their bytes and arrival times; the views that need the
model's internals (attention, the prompt's tokens, a token's id and entropy, forking) say that the remote server
does not provide them. Screenshots go to $CHATFLOW_ARTIFACTS (remote-*.png).
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from .test_e2e_panel import ARTIFACTS, CHROMIUM, TOKEN, _wait_until, lab, open_notebook  # noqa: F401  (lab: a fixture)

KEY = "sk-e2e-remote-5d1c9b7a3e2f9c41"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"),
]


def remote_notebook(lab_url: str) -> None:
    """Put the notebook into the lab's folder through its contents API."""
    cells = [
        "%load_ext jupyter_chatflow",
        "import os\n"
        "from jupyter_chatflow import load_model\n"
        "from jupyter_chatflow.frontends.server import ServerConfig, serve_in_background\n"
        f"os.environ['CHATFLOW_API_KEY'] = {KEY!r}\n"
        f"server = serve_in_background(load_model(), ServerConfig(api_keys=({KEY!r},)))",
        "%config ChatMagics.server = server.url + '/v1'",
        "%%chat --inspect --session remote --new --temperature 0 --max-tokens 60\nWhat is the capital of France?",
    ]
    content = {
        "cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None}
                  for c in cells],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }  # fmt: skip
    body = json.dumps({"type": "notebook", "format": "json", "content": content}).encode()
    put = urllib.request.Request(f"{lab_url}/api/contents/remote.ipynb?token={TOKEN}", data=body, method="PUT",
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(put, timeout=30) as reply:
        assert reply.status in (200, 201)


@pytest.fixture(scope="module")
def remote_page(lab):  # noqa: F811
    remote_notebook(lab)
    with open_notebook(lab, "remote.ipynb", "remote-last.png", height=1400) as page:
        yield page


def test_the_panel_over_a_remote_chat_shows_the_wire(remote_page):
    page = remote_page
    page.locator(".jp-Cell").first.click()
    for _ in range(4):
        page.keyboard.press("Shift+Enter")
    panel = page.locator(".cf-root").first
    panel.wait_for()
    tokens = panel.locator("[data-testid=token]")
    _wait_until(lambda: tokens.count() >= 3, 240, "no tokens streamed into the panel")
    _wait_until(lambda: panel.get_attribute("data-status") == "idle", 120, "the turn did not end")
    assert "Paris" in panel.locator(".cf-stream").inner_text()
    header = panel.locator(".cf-header").inner_text()
    assert "SmolLM2-135M-Instruct" in header and "via http://127.0.0.1:" in header  # the server's model, named

    panel.locator("[data-testid=tab-wire]").click()
    requests = panel.locator("[data-testid=wire-request]")
    _wait_until(lambda: requests.count() >= 1, 10, "no request in the Wire tab")
    assert (
        "POST http://127.0.0.1:" in requests.last.inner_text() and "/v1/chat/completions" in requests.last.inner_text()
    )
    wire = panel.locator("[data-testid=wire]").inner_text()
    assert "Bearer sk-…9c41" in wire and KEY not in panel.inner_html()  # (the notebook's own cell has it)
    assert "200 OK" in panel.locator("[data-testid=wire-status]").last.inner_text() and "x-request-id" in wire
    frames = panel.locator("[data-testid=sse-frame]")
    assert frames.count() >= 5
    summary = panel.locator("[data-testid=sse-summary]").last.inner_text()
    assert "SSE frames" in summary and "bytes" in summary
    panel.screenshot(path=str(ARTIFACTS / "remote-wire.png"))

    panel.locator("[data-testid=tab-attention]").click()
    assert "does not provide attention" in panel.locator("[data-testid=remote-attention]").inner_text()
    assert not panel.locator("[data-testid=heatmap]").is_visible()
    panel.screenshot(path=str(ARTIFACTS / "remote-attention.png"))
    panel.locator("[data-testid=tab-context]").click()
    assert "does not provide the prompt's tokens" in panel.inner_text()
    assert not panel.locator("[data-testid=prompt-tokens]").is_visible()
    panel.screenshot(path=str(ARTIFACTS / "remote-context.png"))

    panel.locator("[data-testid=tab-timeline]").click()
    page.wait_for_timeout(300)
    panel.screenshot(path=str(ARTIFACTS / "remote-timeline.png"))

    panel.locator("[data-testid=view-tokens]").click()
    page.evaluate("() => { document.querySelector('.cf-root').style.minHeight = '720px'; }")  # room for the card
    panel.locator("[data-testid=token]").nth(1).click()
    details = panel.locator("[data-testid=token-details]")
    details.wait_for()
    assert "remote server" in details.inner_text() and details.locator("[data-testid=fork]").count() == 0
    assert "— (not sent)" in details.inner_text()
    page.wait_for_timeout(200)
    panel.screenshot(path=str(ARTIFACTS / "remote-token.png"))
    assert not page.errors  # type: ignore[attr-defined]
