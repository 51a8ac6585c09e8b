"""The inspector panel end to end: JupyterLab on localhost, a notebook opened in headless Chromium (Debian's
package, driven by Playwright), a `%%chat --inspect` cell with the real model.

Checks what a user sees: tokens stream into the page, the context bar and a heatmap render (the heatmap in under
a second once its data arrived), Stop ends a turn that is generating, reloading the page mid-stream resumes
the turn with no token lost, choosing an alternative token forks the answer, the session's title arrives after
the answer, a turn's end leaves the view as the user set it (the same view: tab, scroll position, open popover,
selected token), a forced tool call and a redacted e-mail address show in every tab. Screenshots of every tab go
to $CHATFLOW_ARTIFACTS (default: test-artifacts/ in the checkout).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("CHATFLOW_ARTIFACTS", ROOT / "test-artifacts"))
TOKEN = "chatflow-e2e"
FIRST = "Count from 1 to 200, one number per line."
SECOND = "Now write a long story about a dragon who learns to count, in ten paragraphs."  # 400 tokens: time to reload
TOOL = "What is 17*23?"
EMAIL = "My e-mail is jane.doe@example.com, please write me a short greeting."
TABS = ("context", "attention", "timeline", "safety")

pytestmark = [
    pytest.mark.browser,  # its own tier: not `slow` too, so `-m slow` is the real-model tier without it
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"),
]


def notebook(path: Path) -> None:
    cells = [
        "%load_ext jupyter_chatflow",
        f"%%chat --inspect --session e2e --new --temperature 0 --max-tokens 400\n{FIRST}",
    ]
    path.write_text(json.dumps({
        "cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None}
                  for c in cells],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }))  # fmt: skip


@pytest.fixture(scope="module")
def lab(tmp_path_factory, real_model_path):
    """A JupyterLab server on a free localhost port, serving a folder with the test notebook."""
    root = tmp_path_factory.mktemp("lab")
    notebook(root / "panel.ipynb")
    # an empty XLA cache: the kernel's first turn compiles as a new user's does (and the panel must say so)
    with jupyter_lab(root, CHATFLOW_XLA_CACHE=str(root / "xla")) as base:
        yield base
    if os.environ.get("CHATFLOW_E2E_LOG"):
        shutil.copy(root / "lab.log", ARTIFACTS / "lab.log")


def write_notebook(path: Path, *sources: str) -> None:
    """A notebook at `path` with one code cell per source, on the python3 kernel."""
    cells = [{"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}
             for source in sources]  # fmt: skip
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook = {"cells": cells, "metadata": {"kernelspec": kernel}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(notebook))


@contextlib.contextmanager
def jupyter_lab(root: Path, **env: str) -> Iterator[str]:
    """JupyterLab on a free localhost port over `root` (its config, settings, workspaces, the chat database and the
    server's log kept there), `env` added to its environment; yields its base URL, and stops it after."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "CHATFLOW_DB": str(root / "chatflow.db"), "JUPYTER_CONFIG_DIR": str(root / "config"),
           "JUPYTERLAB_SETTINGS_DIR": str(root / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(root / "ws"),
           **env}  # fmt: skip
    jupyter = Path(sys.executable).with_name("jupyter")
    # (the notebooks' trust signatures in memory: nothing written to the user's ~/.local/share/jupyter)
    command = [str(jupyter) if jupyter.exists() else "jupyter", "lab", "--no-browser", f"--port={port}",
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.token={TOKEN}", f"--ServerApp.root_dir={root}",
               "--allow-root", "--NotebookNotary.db_file=:memory:"]  # fmt: skip
    with (root / "lab.log").open("w") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_until(lambda: _answers(f"{base}/api/status?token={TOKEN}"), 60, "JupyterLab did not start")
            yield base
        finally:
            server.terminate()
            server.wait(20)


def lab_settings(root: Path, **settings: dict) -> None:
    """JupyterLab's apputils settings for a lab over `root` (`jupyter_lab` points it there): one file per keyword,
    e.g. `notification={"fetchNews": "false"}` (no "Jupyter news?" toast over the views)."""
    folder = root / "settings" / "@jupyterlab" / "apputils-extension"
    folder.mkdir(parents=True, exist_ok=True)
    for name, values in settings.items():
        (folder / f"{name}.jupyterlab-settings").write_text(json.dumps(values))


def send_and_wait(panel, text: str, timeout: float = 240) -> None:
    """Send `text` from the panel's box and wait for its turn to end with at least three tokens shown."""
    panel.locator("[data-testid=chat-input]").fill(text)
    panel.locator("[data-testid=send]").click()
    tokens = panel.locator("[data-testid=token]")
    _wait_until(lambda: tokens.count() >= 3 and panel.get_attribute("data-status") == "idle", timeout,
                "the turn did not end")  # fmt: skip


@pytest.fixture(scope="module")
def page(lab):
    with open_notebook(lab, "panel.ipynb", "panel-last.png", height=1600) as page:
        yield page


@contextlib.contextmanager
def open_notebook(lab: str, name: str, last_shot: str, height: int):
    """A Chromium page on the lab's notebook `name`, its kernel idle; `page.errors` collects the page's errors (a
    test checks them at its end); a screenshot of the whole page goes to `last_shot` at the end, passed or not."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": height})
        page.set_default_timeout(120_000)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.errors = errors  # type: ignore[attr-defined]
        page.goto(f"{lab}/lab/tree/{name}?token={TOKEN}")
        page.wait_for_selector(".jp-Notebook .jp-Cell")
        page.wait_for_selector("text=Python 3 (ipykernel) | Idle")  # keys pressed before the kernel is up are lost
        try:
            yield page
        finally:
            page.screenshot(path=str(ARTIFACTS / last_shot), full_page=True)
            browser.close()


def test_the_panel_streams_shows_context_and_attention_stops_resumes_and_forks(page):
    page.locator(".jp-Cell").first.click()
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    panel = page.locator(".cf-root").first
    panel.wait_for()

    # the kernel's first turn, on an empty XLA cache: before its first token the panel says what XLA compiles
    compiling = panel.locator("[data-testid=compiling]")
    compiling.wait_for(timeout=120_000)
    assert re.fullmatch(r"XLA is compiling .+ \(\w+\), \d+\.\d s so far…", compiling.inner_text())
    page.screenshot(path=str(ARTIFACTS / "panel-compiling.png"), full_page=True)

    # tokens stream into the DOM: more of them later than earlier, while the turn is generating
    tokens = panel.locator("[data-testid=token]")
    _wait_until(lambda: tokens.count() >= 5, 180, "no tokens streamed into the panel")
    early = tokens.count()
    _wait_until(lambda: tokens.count() > early + 5, 60, "tokens stopped arriving")
    page.screenshot(path=str(ARTIFACTS / "panel-streaming.png"), full_page=True)

    # Stop while generating: the turn ends (cancelled) long before its 400 tokens
    assert panel.get_attribute("data-status") == "generating"
    panel.locator("[data-testid=stop]").click()
    _wait_until(lambda: panel.get_attribute("data-status") == "idle", 60, "Stop did not end the turn")
    stopped_at = tokens.count()
    assert stopped_at < 190
    time.sleep(0.5)
    assert tokens.count() == stopped_at  # nothing arrives after the stop

    # the context bar and the prompt
    panel.locator("[data-testid=tab-context]").click()
    bar = panel.locator("[data-testid=context-bar]").first
    bar.wait_for()
    assert bar.locator("> *").count() >= 3  # segments, generated, free
    assert panel.locator("[data-testid=prompt-tokens]").first.inner_text().count("im_start") >= 2
    page.screenshot(path=str(ARTIFACTS / "panel-context.png"), full_page=True)

    # an attention heatmap, fetched from the kernel and drawn in under a second once it arrived
    panel.locator("[data-testid=tab-attention]").click()
    show = panel.locator("[data-testid=attention-show]")
    if show.count():
        show.first.click()
    heatmap = panel.locator("[data-testid=heatmap][data-render-ms]").first
    heatmap.wait_for(timeout=120_000)
    assert float(heatmap.get_attribute("data-render-ms")) < 1000
    page.screenshot(path=str(ARTIFACTS / "panel-attention.png"), full_page=True)

    # a second turn from the panel's box; reload the page mid-stream; the view resumes and loses nothing
    panel.locator("[data-testid=chat-input]").fill(SECOND)
    panel.locator("[data-testid=send]").click()
    _wait_until(lambda: tokens.count() >= stopped_at + 10, 120, "the second turn did not stream")
    assert panel.get_attribute("data-status") == "generating"
    _save_and_reload(page)
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    panel = page.locator(".cf-root").first
    panel.wait_for(timeout=120_000)
    resumed_status = panel.get_attribute("data-status")
    _wait_until(lambda: panel.get_attribute("data-status") == "idle", 180, "the resumed turn did not end")
    page.screenshot(path=str(ARTIFACTS / "panel-resumed.png"), full_page=True)
    # the session's first completed answer: its title follows the turn's end as one more event (the next sequence
    # number), so the resumed view is compared once it has that too
    # (none follows an answer the output layer stopped)
    _wait_until(lambda: "Untitled" not in panel.locator("[data-testid=title]").inner_text()
                or "finish: content_filter" in panel.inner_text(), 120, "no title arrived")  # fmt: skip
    time.sleep(0.5)
    after_resume = panel.locator("[data-testid=token]").count()
    last_seq = panel.get_attribute("data-last-seq")

    # what the kernel kept (the turns trait, drawn on a fresh load) is what the resumed view showed
    _save_and_reload(page)
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    panel = page.locator(".cf-root").first
    panel.wait_for(timeout=120_000)
    _wait_until(lambda: panel.locator("[data-testid=token]").count() >= after_resume, 60, "turns not restored")
    degraded = []  # known timing defects seen in some runs: reported as xfail at the end, the rest still checked
    if resumed_status != "generating":
        degraded.append("the reload did not land mid-stream (the turn ended first)")
    assert panel.locator("[data-testid=token]").count() == after_resume
    assert panel.get_attribute("data-last-seq") == last_seq
    page.screenshot(path=str(ARTIFACTS / "panel-reloaded.png"), full_page=True)

    # fork: click a token of the latest answer, choose an alternative, the answer is regenerated from there
    # (the fork can end between two looks at the status: its first alternative may be the end-of-turn token on
    # another CPU's arithmetic; so wait for the forked turn itself, and show the panel's notice if it was refused)
    panel.locator("[data-testid=view-tokens]").click()
    latest = panel.locator("[data-testid=token]").last.get_attribute("data-turn")
    panel.locator(f"[data-testid=token][data-turn='{latest}'][data-index='2']").click()
    panel.locator("[data-testid=fork]").first.click()
    forked = panel.locator(".cf-fork-note", has_text="forked from token 2")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not forked.count() and panel.get_attribute("data-status") == "idle":
        time.sleep(0.2)
    notice = panel.locator(".cf-notice-text")
    notes = panel.locator(".cf-fork-note")

    def why():
        return (
            f"the fork did not start; notice: {notice.all_inner_texts()}; page errors: {page.errors}; "
            f"notes: {notes.all_inner_texts()}; status {panel.get_attribute('data-status')}"
        )

    # (after the reloads, JupyterLab's comms over kernel subshells could leave the panel's comm routed to a deleted
    # subshell, and the kernel dropped the fork and every later request: about 1 run in 3, until comm_route.py)
    _wait_until(lambda: forked.count() > 0, 60, why)
    _wait_until(lambda: panel.get_attribute("data-status") == "idle", 180, "the fork did not end")
    assert panel.locator("[data-testid=token]").last.get_attribute("data-turn") != latest
    page.screenshot(path=str(ARTIFACTS / "panel-fork.png"), full_page=True)
    _shoot_tabs(page, panel, "fork")
    # the fork's prompt drawn from its pieces (its parent's messages had carried them: it showed #1#9690#198…),
    # and the turn it replaced folded to the line that says so
    panel.locator("[data-testid=tab-context]").click()
    prompt = panel.locator("[data-testid=prompt-tokens]").first.inner_text()
    assert "<|im_start|>" in prompt and not re.search(r"#\d+#\d+", prompt), prompt[:200]
    replaced = panel.locator(".cf-superseded .cf-fork-note", has_text="replaced by the fork from token 2")
    assert replaced.count() == 1 and not panel.locator(".cf-superseded .cf-msg-user").first.is_visible()

    # a forced tool call, sent from the panel; while it runs, the user looks at an earlier token in the Timeline
    # tab with the conversation scrolled up: the turn's end leaves all of that as it was, in the same view
    _open_settings(panel)
    panel.locator("input[name=tool-calculator]").check()
    panel.locator("select[name=tool_choice]").select_option("required")
    panel.locator("input[name=max_tokens]").fill("40")
    panel.locator("input[name=max_tokens]").dispatch_event("change")
    panel.locator("[data-testid=chat-input]").fill(TOOL)
    panel.locator("[data-testid=send]").click()
    _wait_until(lambda: panel.get_attribute("data-status") == "generating", 30, "the tool turn did not start")
    panel.locator("[data-testid=tab-timeline]").click()
    panel.locator("[data-testid=view-tokens]").click()
    first_turn = panel.locator("[data-testid=token]").first.get_attribute("data-turn")
    chip = panel.locator(f"[data-testid=token][data-turn='{first_turn}'][data-index='1']")
    chip.click()
    # (how much of the conversation overflows depends on where Stop landed and how long the fork ran: a short one
    # did not scroll at all, so the 40 px did not take and the view rightly followed the new turn; a lower view
    # makes sure the reader is scrolled well away from the bottom)
    overflow = page.evaluate("""() => { const s = document.querySelector('.cf-stream'); s.style.maxHeight = '160px';
                                        s.scrollTop = 40; window.__cfRoot = document.querySelector('.cf-root');
                                        return s.scrollHeight - s.clientHeight - s.scrollTop; }""")
    assert overflow > 100, f"the conversation is too short to scroll away from its bottom ({overflow} px below)"
    assert panel.get_attribute("data-status") == "generating", "the tool turn ended before the view was set up"
    _wait_until(lambda: panel.get_attribute("data-status") == "idle", 240, "the tool turn did not end")
    kept = page.evaluate("""() => ({ same: document.querySelector('.cf-root') === window.__cfRoot,
                                     scroll: document.querySelector('.cf-stream').scrollTop })""")
    assert kept == {"same": True, "scroll": 40}
    assert panel.locator("[data-testid=tab-timeline]").get_attribute("aria-selected") == "true"
    assert panel.locator("[data-testid=popover]").is_visible()
    assert chip.evaluate("c => c.classList.contains('cf-tok-selected')")
    card = panel.locator(".cf-answer-tokens [data-testid=tool-card]").last
    assert "391" in card.inner_text(), card.inner_text()
    page.keyboard.press("Escape")
    _shoot_tabs(page, panel, "tool")

    # a message with an e-mail address: the input layer redacts it before the model sees it
    _open_settings(panel)
    panel.locator("select[name=tool_choice]").select_option("auto")
    panel.locator("input[name=tool-calculator]").uncheck()
    panel.locator("[data-testid=chat-input]").fill(EMAIL)
    panel.locator("[data-testid=send]").click()
    _wait_until(lambda: panel.get_attribute("data-status") == "generating", 30, "the e-mail turn did not start")
    _wait_until(lambda: panel.get_attribute("data-status") == "idle", 240, "the e-mail turn did not end")
    last_turn = panel.locator(".cf-turn").last
    assert last_turn.locator(".cf-span-orig").inner_text() == "jane.doe@example.com"
    assert "jane.doe@example.com" not in last_turn.locator("[data-testid=answer-text]").inner_text()
    _shoot_tabs(page, panel, "redaction")
    # the session's title is written after its first completed answer (not one the output layer stopped), and
    # arrives on its own, after that turn ended
    _wait_until(lambda: "Untitled" not in panel.locator("[data-testid=title]").inner_text(), 120, "no title arrived")
    assert page.errors == []

    # the saved notebook carries the static copy (for nbconvert, GitHub), hidden here while the panel is live; it
    # was last updated before the first reload (display ids are not saved, so a reloaded page can't be updated)
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    page.wait_for_selector(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty", state="detached", timeout=30_000)
    outputs = _saved_notebook(page.url.split("/lab")[0], "panel.ipynb")["cells"][1]["outputs"]
    copies = [o["data"]["text/html"] for o in outputs if "cf-static-copy" in o.get("data", {}).get("text/html", "")]
    assert len(copies) == 1 and re.search(rf"tokens: \d+ tokens? generated: {stopped_at} in the answer", copies[0])
    assert re.search(
        r"speed: first token [\d.]+ m?s \([\d.]+ m?s of it [^)]*XLA compiling\).* · stopped</li>", copies[0]
    )
    assert not panel.page.locator(".cf-static-copy").first.is_visible()
    if degraded:  # everything else held; these are open defects, not passes
        pytest.xfail("; ".join(degraded))


def _open_settings(panel) -> None:
    if not panel.locator(".cf-settings").is_visible():
        panel.locator("[data-testid=settings-toggle]").click()


def _shoot_tabs(page, panel, name: str) -> None:
    """A screenshot of the panel with each tab, the latest turn in text and in tokens."""
    panel.locator("select[aria-label='Turn shown in the inspector']").select_option("")  # the latest turn
    if panel.locator(".cf-settings").is_visible():
        panel.locator("[data-testid=settings-toggle]").click()
    page.evaluate("() => { const s = document.querySelector('.cf-stream'); s.scrollTop = s.scrollHeight; }")
    panel.locator("[data-testid=view-text]").click()
    panel.screenshot(path=str(ARTIFACTS / f"{name}-text.png"))
    panel.locator("[data-testid=view-tokens]").click()
    for tab in TABS:
        panel.locator(f"[data-testid=tab-{tab}]").click()
        if tab == "attention":
            _heatmap_of_latest_turn(page, panel)
        page.wait_for_timeout(300)
        panel.screenshot(path=str(ARTIFACTS / f"{name}-{tab}.png"))


def _heatmap_of_latest_turn(page, panel) -> None:
    """Drawn on its own for a short turn; a long one waits for Show."""
    turn = panel.locator(".cf-turn").last.get_attribute("data-turn")
    drawn = panel.locator(f"[data-testid=heatmap][data-turn='{turn}']")
    page.wait_for_timeout(1500)
    if not drawn.count():
        panel.locator("[data-testid=attention-show]").click()
    _wait_until(lambda: drawn.count() > 0, 120, f"no heatmap of turn {turn}")


def _save_and_reload(page) -> None:
    """Save the notebook (its outputs hold the panel's view; the kernel holds the panel's state), then reload."""
    page.keyboard.press("Control+s")
    page.wait_for_selector(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty", state="detached", timeout=30_000)
    page.reload()


def _saved_notebook(base: str, name: str) -> dict:
    """The notebook `name` as the server reads it from disk. A server error or a 404 is read again for a while,
    each reply kept for the failure's message: Jupyter's save rewrites the file in place, so a read during it can
    meet a half-written file (a 500 on CI) and, on a loaded machine, no file (a 500 then a 404, locally with other
    tests running beside this one); the notebook was there before the save."""
    replies: list[str] = []
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/contents/{name}?token={TOKEN}", timeout=30) as reply:
                return json.load(reply)["content"]
        except urllib.error.HTTPError as error:
            replies.append(f"{error.code}: {error.read()[:2000]!r}")
            if (error.code < 500 and error.code != 404) or time.monotonic() > deadline:
                raise AssertionError(f"the server could not read {name}: {replies}") from error
        time.sleep(1)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


def _wait_until(condition, timeout: float, message) -> None:
    """Poll `condition` until it holds; `message` may be a function, to say what the page showed at the end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"{message() if callable(message) else message} (waited {timeout:.0f} s)")
