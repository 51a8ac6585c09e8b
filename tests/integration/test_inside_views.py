"""Looking inside an answer in JupyterLab (issue 36), as a user does it: a panel over the default model in a
notebook opened in headless Chromium (Debian's package, driven by Playwright); a message sent from the panel's box;
the lens shading toggled on the answer's tokens; a token's lens opened in its popover; "Why this token?", then
"rather than" an alternative and integrated gradients with their progress bar. The numbers the views show are
checked against the kernel's own `model.lens` and `model.attribution` on the turn's ids, computed in a second cell.

Screenshots go to $CHATFLOW_ARTIFACTS/inside-views/ (default: test-artifacts/ in the checkout).
"""

from __future__ import annotations

import json
import math
import re

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

SHOTS = ARTIFACTS / "inside-views"
QUESTION = "What is the capital of France?"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"),
]

PANEL = """import jupyter_chatflow as cf
w = cf.ChatWidget(session="inside", settings={"temperature": 0.0, "max_tokens": 12, "memory": False})
w"""
# The kernel's own numbers for the token the test looks at (" Paris", else the fourth): what the views must show.
REFERENCE = """import json, resource
from jupyter_chatflow.events import TokenDelta, Tokenized
events = w.chat.history()[-1].events
ids = list(next(e for e in events if isinstance(e, Tokenized)).ids)
tokens = [e for e in events if isinstance(e, TokenDelta)]
I = next((t.index for t in tokens if t.text == " Paris"), 3)
values = w.chat.model.attribution(ids + [t.token_id for t in tokens[:I]], tokens[I].token_id)
lens = w.chat.model.lens(ids + [t.token_id for t in tokens[:-1]], k=5)
rss = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS"))
print(json.dumps({"index": I, "values": [float(v) for v in values], "top": lens.top_ids[:, len(ids) - 1 + I].tolist(),
                  "rss_mib": rss / 1024, "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory, real_model_path):
    root = tmp_path_factory.mktemp("inside")
    SHOTS.mkdir(parents=True, exist_ok=True)
    write_notebook(root / "inside.ipynb", PANEL, REFERENCE)
    lab_settings(root, notification={"fetchNews": "false"})
    with jupyter_lab(root) as base:
        yield base


def shot(target, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(SHOTS / f"{name}.png"))


def test_the_lens_and_why_this_token_show_the_kernels_numbers(lab):
    with open_notebook(lab, "inside.ipynb", "inside-views/last.png", height=1100) as page:
        page.set_viewport_size({"width": 1400, "height": 1100})
        page.locator(".jp-Cell").first.click()
        page.keyboard.press("Shift+Enter")
        panel = page.locator(".cf-root").first
        panel.wait_for()

        # a turn from the panel's box, on the default model
        send_and_wait(panel, QUESTION)
        tokens = panel.locator("[data-testid=token]")
        count = tokens.count()

        # the lens shading: every chip gets its layer; the definition is named under the bar
        panel.locator("[data-testid=lens-toggle]").click()
        definition = panel.locator("[data-testid=lens-definition]")
        assert "shaded by the layer from which it was the model's top choice" in definition.inner_text()
        shaded = panel.locator("[data-testid=token][data-lens]")
        _wait_until(lambda: shaded.count() == count, 180, lambda: f"the chips were not shaded ({shaded.count()})")
        status = panel.locator("[data-testid=lens-bar-status]").inner_text()
        assert re.search(r"The latest answer's lens: \d+\.\d s, of which XLA compiling \d+\.\d s", status), status
        panel.locator(".cf-convo").scroll_into_view_if_needed()
        shot(panel.locator(".cf-convo"), "lens-shading")
        # the prompt's positions are lensed too, in the Context tab
        panel.locator("[data-testid=tab-context]").click()
        panel.locator("[data-testid=prompt-lens-note]").wait_for()
        lensed = panel.locator("[data-testid=prompt-tokens] .cf-ptok[data-lens]")
        assert lensed.count() > 20 and "next: “" in (lensed.first.get_attribute("title") or "")
        panel.locator("[data-testid=prompt-tokens]").scroll_into_view_if_needed()
        shot(panel.locator(".cf-inspector"), "lens-prompt")

        # a token's lens in its popover: " Paris" if the answer has it
        texts = [tokens.nth(i).inner_text() for i in range(count)]
        index = texts.index(" Paris") if " Paris" in texts else 3
        tokens.nth(index).click()
        popover = page.locator("[data-testid=popover]")
        lens_panel = popover.locator("[data-testid=lens-panel]")
        lens_panel.wait_for()
        rows = lens_panel.locator("tbody tr")
        layers = int(rows.first.get_attribute("data-row"))
        assert rows.count() == layers + 1 == 31  # SmolLM2-135M: the embeddings and 30 layers
        settled = int(lens_panel.get_attribute("data-settled"))
        summary = popover.locator("[data-testid=lens-summary]").inner_text()
        assert "top choice" in summary and (settled < 0 or str(settled) in summary or settled == 0)
        page.wait_for_timeout(300)
        page.screenshot(path=str(SHOTS / "lens-popover-page.png"))
        shot(popover, "lens-popover")

        # why this token: the Why tab, its heat map over the prompt and a bar per segment
        popover.locator("[data-testid=why-this]").click()
        why = panel.locator("[data-testid=why]")
        segments = why.locator("[data-testid=why-segment]")
        segments.first.wait_for(timeout=180_000)
        page.keyboard.press("Escape")
        why.scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        shot(panel.locator(".cf-inspector"), "why-heatmap")

        # the kernel's own numbers, from the second cell
        page.locator(".jp-Cell").nth(1).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        output = page.locator(".jp-Cell").nth(1).locator(".jp-OutputArea-output")
        output.first.wait_for(timeout=180_000)
        _wait_until(
            lambda: output.first.inner_text().strip().startswith("{"), 180, "the reference cell printed nothing"
        )
        reference = json.loads(output.first.inner_text())
        assert reference["index"] == index
        chips = why.locator("[data-testid=why-token]")
        shown = [float(v) for v in chips.evaluate_all("(cs) => cs.map((c) => c.dataset.value)")]
        assert len(shown) == len(reference["values"])
        assert all(
            math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-7) for a, b in zip(shown, reference["values"], strict=True)
        )
        kinds = chips.evaluate_all("(cs) => cs.map((c) => [...c.classList].find((k) => k.startsWith('cf-kind-')))")
        bars = segments.evaluate_all("(bs) => bs.map((b) => [b.dataset.kind, Number(b.dataset.value)])")
        for kind, value in bars:  # (one segment of each kind in this prompt)
            own = sum(v for v, k in zip(reference["values"], kinds, strict=True) if k == f"cf-kind-{kind}")
            assert math.isclose(value, own, rel_tol=1e-4, abs_tol=1e-6), (kind, value, own)
        top = [[int(i) for i in row.split(",")] for row in rows.evaluate_all("(rs) => rs.map((r) => r.dataset.top)")]
        assert top[::-1] == reference["top"]  # (the table lists the output first)

        # "why not this?": the chosen token rather than an alternative
        tokens.nth(index).click()
        rather = popover.locator("[data-testid=why-rather-this]")
        rather.first.wait_for()
        rather.first.click()
        page.keyboard.press("Escape")
        _wait_until(lambda: "rather than" in why.locator(".cf-why-head").inner_text()
                    and why.locator("[data-testid=why-progress]").is_hidden(), 180, "no contrastive why")  # fmt: skip
        why.scroll_into_view_if_needed()
        shot(panel.locator(".cf-inspector"), "why-rather")

        # integrated gradients on request, with a progress bar
        why.locator("[data-testid=why-integrated]").click()
        progress = why.locator("[data-testid=why-progress]")
        _wait_until(lambda: int(progress.get_attribute("data-done") or 0) > 0, 300, "no integrated gradients' steps")
        shot(panel.locator(".cf-inspector"), "why-integrated-progress")
        _wait_until(lambda: progress.is_hidden() and why.locator("[data-testid=why-segment]").count() > 0, 300,
                    "integrated gradients did not end")  # fmt: skip
        assert why.locator("[data-testid=why-method]").inner_text() == "integrated gradients"
        shot(panel.locator(".cf-inspector"), "why-integrated")
        print(f"kernel RSS {reference['rss_mib']:.0f} MiB, peak {reference['max_rss_mib']:.0f} MiB; lens: {status}")
        assert not page.errors, page.errors
