"""Every figure agrees, in the panel: the real model's turns of every kind (record_turns.py) drawn by the panel in
headless Chromium (js/test/turns.html, the real bundle over the records a kernel sends), each figure on screen
read back and compared with the turn's account. Screenshots of each kind's Timeline and Context tabs go to
$CHATFLOW_ARTIFACTS (default: test-artifacts/), light and dark, at 1280 and 800 px.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import threading
from pathlib import Path

import pytest

from jupyter_chatflow.account.words import ms

from .record_turns import KINDS
from .test_e2e_panel import ARTIFACTS, CHROMIUM

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"),
]


class _Handler(http.server.SimpleHTTPRequestHandler):
    """The checkout's files, and the recorded turns at /turns.json."""

    data = b""

    def do_GET(self) -> None:
        if self.path.split("?")[0] != "/turns.json":
            return super().do_GET()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.data)))
        self.end_headers()
        self.wfile.write(self.data)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving(turns: dict):
    handler = functools.partial(type("H", (_Handler,), {"data": json.dumps(turns).encode()}), directory=str(ROOT))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def browser(harness_chromium):
    return harness_chromium


@contextlib.contextmanager
def panel(browser, base: str, width: int = 1280, theme: str = "light"):
    page = browser.new_page(viewport={"width": width, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{base}/js/test/turns.html?data=/turns.json&theme={theme}")
    page.wait_for_selector("body[data-done='1']")
    try:
        yield page
    finally:
        page.close()
    assert not errors, errors


def show(page, turn_id: str, tab: str) -> None:
    page.select_option("select[aria-label='Turn shown in the inspector']", turn_id)
    page.click(f"[data-testid=tab-{tab}]")


def stat(page, name: str) -> str:
    return page.locator(f"[data-testid=timeline] [data-testid=stat-{name}] .cf-stat-value").inner_text()


def test_every_figure_the_panel_shows_is_the_accounts(browser, recorded_turns):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serving(recorded_turns) as base, panel(browser, base) as page:
        for kind in KINDS:
            turn, a = recorded_turns[kind], recorded_turns[kind]["account"]
            show(page, turn["turn_id"], "timeline")
            assert stat(page, "ttft") == ms(a["ttft_ms"]), kind
            assert stat(page, "tps") == f"{a['tokens_per_s']:.1f}", kind
            assert stat(page, "queued") == ms(a["queued_ms"]), kind
            assert stat(page, "answer") == ms(a["answer_ms"]), kind
            if a["title_after_ms"] > 0:
                assert stat(page, "title") == f"+{ms(a['title_after_ms'])}", kind
            timeline = page.locator("[data-testid=timeline]")
            bars = timeline.locator(".cf-tl-bar:not(.cf-tl-compile)")
            assert bars.count() == len(a["stages"]), kind
            ticks = sum(len(s["ticks_ms"]) for s in a["stages"])
            assert timeline.locator(".cf-tl-tok").count() == ticks, kind
            took = timeline.locator(".cf-tl-grid > .cf-tl-dur").all_inner_texts()[1:]
            assert took == [ms(s["end_ms"] - s["start_ms"]) for s in a["stages"]], kind
            page.screenshot(path=str(ARTIFACTS / f"consistency-{kind}-timeline.png"), full_page=True)
            foot = page.locator(f"[data-turn='{turn['turn_id']}'] .cf-turn-foot").inner_text()
            assert foot.startswith(f"{a['answer_tokens']} answer token"), (kind, foot)
            if a["status"] == "completed":
                assert f"{a['tokens_per_s']:.1f} tok/s · first token {ms(a['ttft_ms'])}" in foot, (kind, foot)
            if a["rounds"]:
                show(page, turn["turn_id"], "context")
                last = a["rounds"][-1]
                used = page.locator("[data-testid=context-used]").inner_text()
                assert used == f"{last['used_tokens']:,} / {last['window']:,} tokens", kind
                parts = page.locator("[data-testid=context-bar] > span")
                assert [int(t) for t in parts.evaluate_all("ps => ps.map(p => p.dataset.tokens)")] == [
                    p["tokens"] for p in last["gauge"]
                ], kind
                assert page.locator("[data-testid=prefill-note]").inner_text() == last["prefill_note"], kind
                page.screenshot(path=str(ARTIFACTS / f"consistency-{kind}-context.png"), full_page=True)


@pytest.mark.parametrize(("width", "theme"), [(800, "light"), (1280, "dark")])
def test_a_cold_first_turns_timeline_reads_right_narrow_and_dark(browser, recorded_turns, width, theme):
    """The kernel's cold first turn: each compile drawn inside its bar, before the first-token line."""
    turn = recorded_turns["cold"]
    with serving(recorded_turns) as base, panel(browser, base, width, theme) as page:
        show(page, turn["turn_id"], "timeline")
        decode = page.locator("[data-testid=timeline] .cf-tl-track").filter(has=page.locator("[data-kind=decode]"))
        compiles = decode.locator("[data-kind=compile]")
        assert compiles.count() >= 1
        line = decode.locator(".cf-tl-ttft").first.bounding_box()
        for box in (compiles.nth(k).bounding_box() for k in range(compiles.count())):
            assert box["x"] + box["width"] <= line["x"] + 1  # compiled before the first token was shown
        page.screenshot(path=str(ARTIFACTS / f"consistency-cold-timeline-{width}-{theme}.png"), full_page=True)
