"""The panel is legible in a classroom, in headless Chromium: the token popover is always wholly visible (a short
answer, a chip near the window's bottom); no text under 12 px; every text colour at WCAG AA (4.5:1) against what
it is drawn on, in the panel's own colours and in JupyterLab's light and dark themes; and at 800 and 1280 px the
title, the tabs and the Timeline's "took" column are whole. Screenshots go to $CHATFLOW_ARTIFACTS/legible/.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import threading
from pathlib import Path

import pytest

from .test_e2e_panel import ARTIFACTS, CHROMIUM

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "js" / "test" / "fixtures"
MEASURES = Path(__file__).with_name("legible.js")  # window.legible: popover(), audit(root), layout()
SHOTS = ARTIFACTS / "legible"
THEMES = ("light", "jl-light", "dark")  # the panel's own colours, JupyterLab's light and dark (harness.html)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"),
]


class _Handler(http.server.SimpleHTTPRequestHandler):
    """The checkout's files, and one recorded turn at /short.json (the turns.html page's data)."""

    def do_GET(self) -> None:
        if self.path.split("?")[0] != "/short.json":
            return super().do_GET()
        data = json.dumps({"answer": json.loads((FIXTURES / "penalty.json").read_text())}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def base():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(ROOT)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser(harness_chromium):
    SHOTS.mkdir(parents=True, exist_ok=True)
    return harness_chromium


@contextlib.contextmanager
def page_at(browser, url: str, width: int, height: int = 900):
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.wait_for_selector("body[data-done='1']", timeout=30000)
    page.add_script_tag(path=str(MEASURES))
    try:
        yield page
    finally:
        page.close()
    assert not errors, errors


# ---- the popover -------------------------------------------------------------------------------------------------


def _open_popover(page, chip: str = "last") -> dict:
    page.click("[data-testid=view-tokens]")
    chips = page.locator("[data-testid=token]")
    (chips.last if chip == "last" else chips.first).click()
    page.wait_for_selector("[data-testid=popover]:not([hidden])")
    return page.evaluate("legible.popover()")


def _wholly_visible(geometry: dict) -> None:
    g = geometry
    assert g["left"] >= 0 and g["right"] <= g["width"] and g["top"] >= 0 and g["bottom"] <= g["height"], g
    assert all(g["seen"]), f"a corner of the popover is covered or cut: {g}"
    assert not g["cut"] and not g["scrollsSideways"], f"labels cut, or a column out of sight: {g}"


@pytest.mark.parametrize("width", [800, 1280])
def test_the_popover_on_a_short_answer_is_wholly_visible(browser, base, width):
    """One short answer, the panel at its normal height: the popover of its last chip (the sampler line and the
    last alternative included) lies inside the window, nothing covers or cuts it, no label is cut."""
    with page_at(browser, f"{base}/js/test/turns.html?data=/short.json", width) as page:
        geometry = _open_popover(page)
        _wholly_visible(geometry)
        assert not geometry["scrolls"]  # the window has room for all of it: nothing to scroll to
        assert page.locator("[data-testid=popover] .cf-td-settings").is_visible()
        page.screenshot(path=str(SHOTS / f"popover-short-{width}.png"))


def test_near_the_bottom_of_the_window_it_opens_above_the_chip(browser, base):
    with page_at(browser, f"{base}/js/test/turns.html?data=/short.json", 1280, height=700) as page:
        page.evaluate("document.body.style.paddingTop = '520px'")  # the answer's chips near the window's bottom
        geometry = _open_popover(page)
        chip = page.locator("[data-testid=token]").last.bounding_box()
        assert geometry["bottom"] <= chip["y"], (geometry, chip)
        _wholly_visible(geometry)
        assert not geometry["scrolls"]
        page.screenshot(path=str(SHOTS / "popover-above.png"))


def test_with_no_room_above_or_below_it_opens_beside_the_chip_whole(browser, base):
    """A short answer in the middle of an 800 px high window (JupyterLab's notebook at 1280 × 800): neither below
    nor above the chip holds the whole popover, so it goes beside it, whole, nothing to scroll."""
    with page_at(browser, f"{base}/js/test/turns.html?data=/short.json", 1280, height=800) as page:
        page.evaluate("document.body.style.paddingTop = '230px'")
        geometry = _open_popover(page)
        chip = page.locator("[data-testid=token]").last.bounding_box()
        assert geometry["left"] >= chip["x"] + chip["width"] or geometry["right"] <= chip["x"], (geometry, chip)
        _wholly_visible(geometry)
        assert not geometry["scrolls"]
        page.screenshot(path=str(SHOTS / "popover-beside.png"))


def test_the_popover_says_what_the_repetition_penalty_did(browser, base):
    """penalty.json (a second turn at repetition penalty 1.1): a token whose favourite under the model the penalty
    lowered shows the three probabilities of the chosen token and marks the lowered alternatives."""
    with page_at(browser, f"{base}/js/test/turns.html?data=/short.json", 1280) as page:
        page.click("[data-testid=view-tokens]")
        index = _raised_token(json.loads((FIXTURES / "penalty.json").read_text()))
        page.locator(f"[data-testid=token][data-index='{index}']").click()
        popover = page.locator("[data-testid=popover]")
        assert popover.locator("[data-testid=penalized]").count() >= 1
        assert "after penalty" in popover.inner_text() and "raised: the penalty lowered" in popover.inner_text()
        _wholly_visible(page.evaluate("legible.popover()"))
        page.screenshot(path=str(SHOTS / "popover-penalty.png"))


def _raised_token(turn: dict) -> int:
    """The first token the penalty raised: the model's favourite was lowered, another was drawn."""
    for event in turn["events"]:
        if event["type"] == "token" and event["alternatives"]:
            top = max(event["alternatives"], key=lambda a: a["logprob"])
            if top["penalized"] and top["token_id"] != event["token_id"]:
                return event["index"]
    raise AssertionError("penalty.json has no token the penalty raised: record it again (make_fixtures.py)")


# ---- fonts and contrast ------------------------------------------------------------------------------------------


def _audit(page) -> list[dict]:
    return page.evaluate("(root) => legible.audit(root)", page.locator(".cf-root").element_handle())


def _every_view(page):
    """The harness panel, each tab in turn, with a token's popover open. The harness's model mixes sliding and
    global layers (`sliding=1`, as Gemma 3's): the attention tab shows a sliding layer, its caption and its key."""
    page.click("[data-testid=view-tokens]")
    for tab in ("context", "attention", "timeline", "safety", "wire"):
        page.click(f"[data-testid=tab-{tab}]")
        if tab == "attention":
            page.select_option("[data-testid=attention-layer]", "4")
            page.click("[data-testid=attention-show]")
            page.wait_for_selector("[data-testid=attention-outside]:not([hidden])")
        yield tab
    page.click("[data-testid=token][data-index='3']")
    page.wait_for_selector("[data-testid=popover]:not([hidden])")
    yield "popover"


@pytest.mark.parametrize("theme", THEMES)
def test_no_text_is_under_12_px_and_every_colour_is_at_wcag_aa(browser, base, theme):
    small, faint = {}, {}
    with page_at(browser, f"{base}/js/test/harness.html?theme={theme}&fast=1&sliding=1", 1280) as page:
        for view in _every_view(page):
            for item in _audit(page):
                key = (item["cls"], item["text"])
                if item["size"] < 12:
                    small[key] = (view, item["size"])
                if item["contrast"] < 4.5:
                    faint[key] = (view, item["contrast"])
            page.screenshot(path=str(SHOTS / f"{theme}-{view}.png"), full_page=True)
    assert not small, f"text under 12 px: {small}"
    assert not faint, f"text under 4.5:1 contrast: {faint}"


# ---- narrow and wide ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("panel", [480, 640, 768, 1248])
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_title_tabs_and_timeline_read_whole_at_800_and_1280(browser, base, panel, theme):
    """The panel as wide as an 800 px window gives it in JupyterLab (480: the file browser open; 640: closed; 768:
    the harness page's) and as a 1280 px one does (1248)."""
    width = 800 if panel < 800 else 1280
    with page_at(browser, f"{base}/js/test/harness.html?theme={theme}&fast=1", width) as page:
        page.evaluate(f"document.getElementById('app').style.width = '{panel}px'")
        page.click("[data-testid=tab-timeline]")
        layout = page.evaluate("legible.layout()")
        page.screenshot(path=str(SHOTS / f"panel-{panel}-{theme}-timeline.png"), full_page=True)
    assert not layout["title"], layout
    assert not layout["tabs"] and layout["tabRows"] == 1, layout
    assert not layout["took"] and not layout["tookPast"], layout
