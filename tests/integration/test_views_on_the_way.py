"""What the panel says on the way (issue 34), as a user sees it: JupyterLab at 800 px with its file browser open
(the panel ~370 px wide), light and dark, a panel over the tiny model showing the turns of `view_turns.py` (the
kinds the views got wrong, with their accounts); then the same panel in a 1,400 px window. The heatmap's labels
are checked on the harness page (its fake kernel answers attention requests), narrowed after it drew them.

Screenshots go to $CHATFLOW_ARTIFACTS/views-34/ (default: test-artifacts/ in the checkout).
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
from jupyter_chatflow.testing import write_tiny_gguf

from .test_e2e_panel import ARTIFACTS, CHROMIUM, TOKEN, jupyter_lab, lab_settings, write_notebook
from .view_turns import PREWARM, turns

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ARTIFACTS / "views-34"
THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"),
]

PANEL = """import json, jupyter_chatflow as cf
w = cf.ChatWidget(cf.Chat(model="tiny.gguf", session="views"))
w.show_records(json.load(open("turns.json")).values())
w.prewarm = json.load(open("prewarm.json"))
w.title = "Issue 34: what the views say on the way"
w"""
WARM_BY_PANEL = 'w.ask("Hello", max_tokens=3, temperature=0).text()'  # a turn through the panel: the kernel is warm
CELL_TURN = ("%load_ext jupyter_chatflow\n%config ChatMagics.model_path = 'tiny.gguf'",
             "%%chat --max-tokens 3 --temperature 0\nHello again")  # fmt: skip

GEOMETRY = """(root) => {
  const box = (e) => e.getBoundingClientRect();
  const panel = box(root);
  const seen = (e) => {
    const r = box(e);
    const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
    return !!hit && (hit === e || e.contains(hit));
  };
  const inside = (e) => box(e).left >= panel.left - 1 && box(e).right <= panel.right + 1;
  const cut = (e) => e.scrollWidth > e.clientWidth + 1;
  const shown = (sel) => [...root.querySelectorAll(sel)].filter((e) => e.getClientRects().length);
  return {
    width: panel.width,
    tabs: shown('.cf-tab').map((t) => ({ text: t.textContent, seen: seen(t), inside: inside(t), cut: cut(t) })),
    title: !cut(root.querySelector('[data-testid=title]')),
    categories: shown('.cf-msg-user .cf-span-cat').map((c) => [c.textContent, c.getClientRects().length]),
    tool: shown('.cf-stream .cf-tool-args-inline').map((a) => ({ text: a.textContent,
      whole: !cut(a) && box(a).right <= box(a.closest('.cf-tool')).right })),
    parts: shown('.cf-tok-part').map((c) => box(c).width),
  };
}"""


@pytest.fixture(scope="module")
def chromium(harness_chromium):
    SHOTS.mkdir(parents=True, exist_ok=True)
    return harness_chromium


@pytest.fixture(scope="module", params=list(THEMES))
def lab_panel(request, tmp_path_factory, chromium):
    """(theme, page, panel locator, the turns by kind): JupyterLab in `theme`, an 800 px window, its file browser
    open, the notebook's panel drawn."""
    theme, root = request.param, tmp_path_factory.mktemp(f"views-{request.param}")
    write_tiny_gguf(root / "tiny.gguf")
    shown = turns()
    (root / "turns.json").write_text(json.dumps(shown, ensure_ascii=False))
    (root / "prewarm.json").write_text(json.dumps(PREWARM))
    write_notebook(root / "views.ipynb", PANEL, WARM_BY_PANEL, *CELL_TURN)
    lab_settings(root, themes={"theme": THEMES[theme]}, notification={"fetchNews": "false"})
    with jupyter_lab(root) as base:
        page = chromium.new_page(viewport={"width": 800, "height": 1000})
        page.set_default_timeout(120_000)
        page.goto(f"{base}/lab/tree/views.ipynb?token={TOKEN}")
        page.wait_for_selector("text=Python 3 (ipykernel) | Idle")
        browser_tab = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id=filebrowser]")
        if "lm-mod-current" not in (browser_tab.get_attribute("class") or ""):
            browser_tab.click()  # the file browser open, as in the issue
        page.locator(".jp-Cell").first.click()
        page.keyboard.press("Shift+Enter")
        panel = page.locator(".cf-root").first
        panel.wait_for()
        panel.locator(f"[data-turn='{shown['live']['turn_id']}']").wait_for()
        yield theme, page, panel, shown
        page.close()


def show(panel, turn: dict, tab: str) -> None:
    panel.locator("select[aria-label='Turn shown in the inspector']").select_option(turn["turn_id"])
    panel.locator(f"[data-testid=tab-{tab}]").click()


def shoot(page, panel, name: str) -> None:
    page.wait_for_timeout(300)  # (the inspector redraws on the next frame)
    panel.locator(".cf-inspector").screenshot(path=str(SHOTS / f"{name}.png"))


def test_at_800_px_with_the_file_browser_open_the_panel_reads_whole(lab_panel):
    """Every tab in sight (Wire too), the title whole, no category label broken mid-word, the tool call's
    arguments whole, an emoji's first-bytes chip something to hover."""
    theme, page, panel, _ = lab_panel
    page.set_viewport_size({"width": 800, "height": 1000})
    panel.locator("[data-testid=view-tokens]").click()
    panel.locator(".cf-tabs").scroll_into_view_if_needed()  # (in sight: a tab scrolled out of its bar is not)
    page.wait_for_timeout(300)
    g = page.evaluate(GEOMETRY, panel.element_handle())
    page.screenshot(path=str(SHOTS / f"lab-800-{theme}.png"))
    panel.screenshot(path=str(SHOTS / f"panel-800-{theme}.png"))
    assert g["width"] < 420, g["width"]  # (the 353 px: JupyterLab's sidebar and margins)
    assert [t["text"] for t in g["tabs"]] == ["Context", "Attention", "Timeline", "Safety & tools", "Wire", "Why"]
    assert all(t["seen"] and t["inside"] and not t["cut"] for t in g["tabs"]), g["tabs"]
    assert g["title"], "the title is cut"
    assert g["categories"] == [["prompt_injection", 1], ["pii:email", 1]], g["categories"]
    assert g["tool"] == [{"text": '{"expression":"17 * 23"}', "whole": True}], g["tool"]
    assert g["parts"] and all(width >= 6 for width in g["parts"]), g["parts"]
    panel.locator("[data-testid=view-text]").click()


def test_in_a_1400_px_window_a_tool_card_shows_its_arguments_whole(lab_panel):
    theme, page, panel, _ = lab_panel
    page.set_viewport_size({"width": 1400, "height": 1000})
    try:
        page.wait_for_timeout(300)
        g = page.evaluate(GEOMETRY, panel.element_handle())
        panel.screenshot(path=str(SHOTS / f"panel-1400-{theme}.png"))
        assert g["tool"] == [{"text": '{"expression":"17 * 23"}', "whole": True}], g["tool"]
    finally:
        page.set_viewport_size({"width": 800, "height": 1000})


def test_before_its_context_a_turn_says_where_it_is_not_that_none_was_assembled(lab_panel):
    theme, page, panel, shown = lab_panel
    show(panel, shown["live"], "context")
    said = panel.locator("[data-testid=context-waiting]")
    said.wait_for()
    assert said.inner_text().startswith("Assembling the context comes after the input safety layer has read")
    assert "No context was assembled" not in panel.locator(".cf-inspector").inner_text()
    assert not panel.locator("[data-testid=prompt-tokens]").is_visible()
    shoot(page, panel, f"context-live-{theme}")


def test_the_intent_probes_compile_is_hatched_in_the_safety_bar_and_in_the_compile_total(lab_panel):
    theme, page, panel, shown = lab_panel
    account = shown["cold"]["account"]
    show(panel, shown["cold"], "timeline")
    timeline = panel.locator("[data-testid=timeline]")
    track = timeline.locator(".cf-tl-track").filter(has=page.locator("[data-kind=safety]")).first
    bar, compiled = track.locator("[data-kind=safety]").bounding_box(), track.locator("[data-kind=compile]")
    assert compiled.count() == 1
    hatched = compiled.bounding_box()
    assert abs(hatched["x"] - bar["x"]) < 1 and hatched["width"] == pytest.approx(bar["width"] * 2500 / 2600, abs=2)
    assert timeline.locator("[data-testid=stat-compile] .cf-stat-value").inner_text() == ms(account["compile_ms"])
    assert account["compile_ms"] >= 2500
    shoot(page, panel, f"timeline-cold-{theme}")


def test_a_flagged_span_is_marked_and_only_a_redaction_is_struck_through(lab_panel):
    theme, page, panel, shown = lab_panel
    show(panel, shown["flagged"], "safety")
    text = panel.locator(".cf-safety-tab .cf-user-text")
    flagged, redacted = text.locator("[data-action=flag]"), text.locator("[data-action=redact]")
    assert flagged.locator("mark").inner_text() == "Ignore all previous instructions"
    assert flagged.locator("del").count() == 0
    decoration = "(e) => getComputedStyle(e).textDecorationLine"
    assert "line-through" not in flagged.locator("mark").evaluate(decoration)
    assert redacted.locator("del").inner_text() == "jane.doe@example.com"
    assert "line-through" in redacted.locator("del").evaluate(decoration)
    assert redacted.locator("ins").inner_text() == "[EMAIL]"
    shoot(page, panel, f"safety-flagged-{theme}")


def test_a_joined_prewarm_is_prefill_and_its_figures_are_the_boxs(lab_panel):
    theme, page, panel, shown = lab_panel
    box = panel.locator("[data-testid=prewarm]").inner_text()
    assert box == "prefix prewarmed: 38 tokens (21 computed), 8.78 s"
    show(panel, shown["joined"], "timeline")
    note = panel.locator("[data-testid=prewarm-note]").inner_text()
    assert note.startswith("Prewarmed while typing, still running when the message was sent: this turn joined it: "
                           "38 tokens (21 computed) in 8.78 s · used"), note  # fmt: skip
    labels = panel.locator("[data-testid=timeline] .cf-tl-name").all_inner_texts()
    assert "prefill, joined" in labels and "wait" not in labels, labels
    assert "another sequence's prefill" not in panel.locator("[data-testid=timeline]").inner_text()
    shoot(page, panel, f"timeline-joined-{theme}")


# ---- the heatmap's labels, on the harness page ----------------------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def harness(chromium, width: int, theme: str):
    """The harness page (the panel on a fake kernel that answers attention requests) at `width`, in `theme`."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(ROOT)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    page = chromium.new_page(viewport={"width": width, "height": 1000})
    try:
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/js/test/harness.html?theme={theme}&fast=1&n=200")
        page.wait_for_selector(".cf-root")
        yield page
    finally:
        page.close()
        server.shutdown()


OVERLAPS = """() => {
  const boxes = (sel) => [...document.querySelectorAll(sel)].map((e) => e.getBoundingClientRect());
  const meet = (a, b) =>
    a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  const pairs = (list) => list.flatMap((a, i) => list.slice(i + 1).filter((b) => meet(a, b)).map((b) => [a, b]));
  const rows = boxes('.cf-heat-rows .cf-heat-label'), top = boxes('.cf-heat-top .cf-heat-label');
  const words = document.createRange();  // (the corner's words, not its padding)
  words.selectNodeContents(document.querySelector('.cf-heat-corner'));
  const corner = words.getBoundingClientRect();
  return { rows: rows.length, top: top.length, overlaps: pairs(rows).length + pairs(top).length,
           corner: [...rows, ...top].filter((b) => meet(b, corner)).length };
}"""


@pytest.mark.parametrize("theme", ["jl-light", "dark"])
def test_the_heatmaps_labels_never_run_into_each_other_when_the_panel_narrows(chromium, theme):
    """Drawn at 768 px, then the panel narrowed to 353 px (the issue's, a sidebar opened): the labels are laid out
    again for the smaller heatmap; none touches another or the corner's words."""
    with harness(chromium, 800, theme) as page:
        page.click("[data-testid=tab-attention]")
        page.click("[data-testid=attention-show]")
        page.wait_for_selector("[data-testid=heatmap][data-render-ms]")
        wide = page.evaluate(OVERLAPS)
        page.evaluate("document.getElementById('app').style.width = '353px'")
        page.wait_for_timeout(300)
        narrow = page.evaluate(OVERLAPS)
        page.locator(".cf-inspector").screenshot(path=str(SHOTS / f"heatmap-353-{theme}.png"))
    assert wide["overlaps"] == wide["corner"] == 0, wide
    assert narrow["overlaps"] == narrow["corner"] == 0 and 0 < narrow["rows"] < wide["rows"], (wide, narrow)


def test_a_cell_after_panel_turns_is_not_a_kernels_first_turn_and_keeps_no_clock(lab_panel):
    """The issue's kernel: turns ran through a panel, then a %%chat cell. Its status line never says the kernel's
    first turn compiles, and no tick of a compile clock stays above the answer."""
    theme, page, _, _ = lab_panel
    cells = page.locator(".jp-Notebook .jp-Cell")
    cells.nth(1).click()
    for _ in (WARM_BY_PANEL, *CELL_TURN):
        page.keyboard.press("Shift+Enter")
    last = cells.nth(3)
    last.locator(".jp-InputPrompt", has_text="[4]").wait_for()
    page.wait_for_selector("text=Python 3 (ipykernel) | Idle")
    shown = last.locator(".jp-OutputArea-output").all_inner_texts()
    last.screenshot(path=str(SHOTS / f"cell-after-panel-{theme}.png"))
    assert any("session default" in text for text in shown), shown  # the turn ran
    status = [text for text in shown if text.startswith("chatflow:")]
    assert not any("first turn" in text or "XLA is compiling" in text for text in status), status
