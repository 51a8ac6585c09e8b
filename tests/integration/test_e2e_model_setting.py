"""Choosing a model file in the panel's settings, end to end: JupyterLab on localhost, headless Chromium, a panel
over a tiny random model. What a user sees: the model field holds the file in use and a line on what it is; a path
that does not load shows its error and the header keeps the model's name; a file that loads puts its name in the
header and the next turn runs on it. Screenshots go to $CHATFLOW_ARTIFACTS (default: test-artifacts/).
"""

from __future__ import annotations

import pytest

from .test_e2e_panel import ARTIFACTS, CHROMIUM, _wait_until, jupyter_lab, open_notebook, write_notebook

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: apt-get install chromium"),
]
SETUP = """\
import os
import jupyter_chatflow as cf
from jupyter_chatflow import testing
from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

first = os.path.abspath(write_tiny_gguf("first.gguf"))
plain = testing._add_metadata  # the second file's card names it "Tiny-Other" (its general.basename)
testing._add_metadata = lambda w, spec, tokens: (plain(w, spec, tokens), w.add_basename("Tiny-Other"))
write_tiny_gguf("other.gguf", TinySpec(n_layers=1, context_length=256))
testing._add_metadata = plain
panel = cf.ChatWidget(model=first, session="model-setting", new=True, settings={"max_tokens": 4, "memory": False})
panel"""
TIGHT = """\
from jupyter_chatflow.model import memory
room = memory.available_memory
memory.available_memory = lambda: memory.Available(200 << 20, "MemAvailable in /proc/meminfo")
print("memory: tight")"""
LOOSE = """\
memory.available_memory = room
print("memory: as it is")"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a free localhost port, over a folder with a notebook that opens a panel."""
    root = tmp_path_factory.mktemp("lab")
    write_notebook(root / "model.ipynb", SETUP, TIGHT, LOOSE)
    with jupyter_lab(root, CHATFLOW_WEIGHTS_CACHE=str(root / "weights")) as base:
        yield base, root


def test_a_model_file_chosen_in_the_settings_loads_and_its_name_shows_in_the_header(lab):
    base, root = lab
    with open_notebook(base, "model.ipynb", "model-setting-last.png", height=900) as page:
        page.locator(".jp-Cell").first.click()
        page.keyboard.press("Shift+Enter")
        panel = page.locator(".cf-root").first
        panel.wait_for()
        meta = panel.locator(".cf-header-meta")
        assert "tiny-random-llama" in meta.inner_text()
        panel.locator("[data-testid=settings-toggle]").click()
        field, about = panel.locator("[data-testid=model-path]"), panel.locator("[data-testid=model-about]")
        assert field.input_value() == str(root / "first.gguf")
        assert about.inner_text().startswith("tiny-random-llama: llama, 91,136 parameters, F32, context 512 tokens")
        panel.screenshot(path=str(ARTIFACTS / "model-setting.png"))

        # a path that does not load: the error notice, with its fix; the model in use stays
        field.fill(str(root / "missing.gguf"))
        panel.locator("[data-testid=load-model]").click()
        notice = panel.locator(".cf-notice-text")
        _wait_until(lambda: "No model file at" in notice.inner_text(), 30, lambda: notice.inner_text())
        assert "tiny-random-llama" in meta.inner_text()
        panel.screenshot(path=str(ARTIFACTS / "model-setting-error.png"))

        # a file too large for the memory available (the kernel is told there are 200 MiB): refused with its figures
        _run_cell(page, 1, "memory: tight")
        field.fill(str(root / "other.gguf"))
        panel.locator("[data-testid=load-model]").click()
        _wait_until(lambda: "Tiny-Other needs" in notice.inner_text(), 30, lambda: notice.inner_text())
        assert notice.inner_text().startswith(
            "Tiny-Other needs 0.25 GiB as float32 (0.25 GiB as bfloat16) and 0.20 GiB are available (MemAvailable in "
            "/proc/meminfo): free memory (close other kernels, or models you no longer use), or choose a model with "
            "fewer parameters"
        ) and notice.inner_text().endswith("The model in use is still tiny-random-llama.")
        assert "tiny-random-llama" in meta.inner_text()
        panel.screenshot(path=str(ARTIFACTS / "model-setting-too-large.png"))
        _run_cell(page, 2, "memory: as it is")

        # a file that loads: its name in the header, its line under the field, and the next turn runs on it
        field.fill(str(root / "other.gguf"))
        panel.locator("[data-testid=load-model]").click()
        _wait_until(lambda: "Tiny-Other" in meta.inner_text(), 60, lambda: meta.inner_text())
        assert about.inner_text().startswith("Tiny-Other: llama, 54,144 parameters, F32, context 256 tokens")
        assert field.input_value() == str(root / "other.gguf") and notice.inner_text() == ""
        panel.screenshot(path=str(ARTIFACTS / "model-setting-loaded.png"))
        panel.locator("[data-testid=chat-input]").fill("Hello")
        panel.locator("[data-testid=send]").click()
        _wait_until(lambda: panel.locator("[data-testid=token]").count() >= 1, 120, "no answer streamed")
        _wait_until(lambda: panel.get_attribute("data-status") == "idle", 120, "the turn did not end")
        assert page.errors == []  # type: ignore[attr-defined]


def _run_cell(page, index: int, says: str) -> None:
    """Run the notebook's cell `index` and wait for its output to say `says`."""
    cell = page.locator(".jp-Cell").nth(index)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    cell.locator(".jp-OutputArea-output", has_text=says).wait_for(timeout=60_000)
