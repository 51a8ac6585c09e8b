"""Interventions as forks in JupyterLab, as a user does it: a panel over the default model in a notebook opened in
headless Chromium (Debian's package, driven by Playwright); a short message sent from the panel's box at temperature
0; two heads picked in the Attention tab's grid; "Answer again without these heads"; the turn answered again drawn
beside the original: its header names the heads, the two answers side by side, the token where they part marked in
both. (On SmolLM2-135M, knocking out heads 10.2 and 10.5 turns "The waves of the sea…" into "The sea is…".)

Screenshots go to $CHATFLOW_ARTIFACTS/intervention/ (default: test-artifacts/ in the checkout).
"""

from __future__ import annotations

import pytest

from .test_e2e_panel import (
    ARTIFACTS,
    CHROMIUM,
    _wait_until,
    jupyter_lab,
    lab_settings,
    open_notebook,
    send_and_wait,
    write_notebook,
)  # fmt: skip

SHOTS = ARTIFACTS / "intervention"
QUESTION = "Write a haiku about the sea."
HEADS = [(10, 2), (10, 5)]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"),
]

PANEL = """import jupyter_chatflow as cf
w = cf.ChatWidget(session="intervention", settings={"temperature": 0.0, "max_tokens": 24, "memory": False})
w"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory, real_model_path):
    root = tmp_path_factory.mktemp("intervention")
    SHOTS.mkdir(parents=True, exist_ok=True)
    write_notebook(root / "intervention.ipynb", PANEL)
    lab_settings(root, notification={"fetchNews": "false"})
    with jupyter_lab(root) as base:
        yield base


def shot(target, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(SHOTS / f"{name}.png"))


def test_heads_knocked_out_from_the_attention_tab_answer_again_beside_the_original(lab):
    with open_notebook(lab, "intervention.ipynb", "intervention/last.png", height=1100) as page:
        page.set_viewport_size({"width": 1400, "height": 1100})
        page.locator(".jp-Cell").first.click()
        page.keyboard.press("Shift+Enter")
        panel = page.locator(".cf-root").first
        panel.wait_for()

        send_and_wait(panel, QUESTION)

        # the Attention tab: two heads picked in the grid, marked and counted; the probe's categories are offered
        panel.locator("[data-testid=tab-attention]").click()
        intervene = panel.locator("[data-testid=intervene]")
        for layer, head in HEADS:
            intervene.locator(f"[data-testid=head-cell][data-layer='{layer}'][data-head='{head}']").click()
        pressed = intervene.locator("[data-testid=head-cell][aria-pressed=true]")
        assert pressed.count() == 2
        assert intervene.locator("[data-testid=heads-count]").inner_text() == "2 heads selected: 10.2, 10.5"
        sources = intervene.locator("[data-testid=steer-source] option").evaluate_all("(os) => os.map((o) => o.value)")
        assert sources == ["texts", "probe"]  # (the default model has a safety probe)
        intervene.scroll_into_view_if_needed()
        shot(panel.locator(".cf-inspector"), "heads-picked")

        button = intervene.locator("[data-testid=intervene-heads]")
        assert button.is_enabled()
        button.click()

        # the turn answered again, beside the original
        compare = panel.locator("[data-testid=intervention-compare]")
        compare.wait_for(timeout=240_000)
        _wait_until(lambda: panel.get_attribute("data-status") == "idle", 240, "the answer again did not end")
        header = compare.locator("[data-testid=intervention-header]").inner_text()
        assert "heads 10.2 and 10.5 knocked out" in header, header
        original, again = (
            compare.locator("[data-testid=compare-original]"),
            compare.locator("[data-testid=compare-intervened]"),
        )
        left, right = original.bounding_box(), again.bounding_box()
        assert left and right and left["x"] + left["width"] <= right["x"] and abs(left["y"] - right["y"]) < 2
        assert original.locator("[data-testid=compare-token]").count() >= 3
        assert again.locator("[data-testid=compare-token]").count() >= 3
        parting = int(compare.get_attribute("data-parting") or "-1")
        assert parting >= 0, compare.inner_text()
        for column in (original, again):
            mark = column.locator("[data-testid=parting]")
            assert mark.count() == 1 and mark.get_attribute("data-index") == str(parting)
        summary = compare.locator("[data-testid=parting-summary]").inner_text()
        assert f"part at token {parting}" in summary and "logprob" in summary
        assert compare.locator("[data-testid=divergence] tr.cf-differs").count() >= 1
        replaced = panel.locator(".cf-turn").nth(0)
        assert "cf-superseded" not in (replaced.get_attribute("class") or "")
        assert "✕ replaced by the next turn, answered again with heads 10.2 and 10.5" in replaced.inner_text()
        page.keyboard.press("Escape")
        compare.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        shot(panel.locator(".cf-convo"), "answered-again")
        page.screenshot(path=str(SHOTS / "page.png"))

        # the steering form, shown (not sent: one answer again keeps the test short)
        intervene.locator("[data-testid=steer-source]").select_option("probe")
        assert intervene.locator("[data-testid=steer-layer] option").evaluate_all(
            "(os) => os.map((o) => Number(o.value))"
        ) == [7, 11, 15, 19]
        intervene.locator("[data-testid=steer-form]").scroll_into_view_if_needed()
        shot(panel.locator(".cf-inspector"), "steer-form")
        assert not page.errors, page.errors  # type: ignore[attr-defined]
