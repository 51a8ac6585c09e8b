"""The real model's turns of every kind, recorded once per test run for the consistency suite (record_turns.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def recorded_turns(tmp_path_factory, real_model_path) -> dict:
    """A cold first turn (a fresh process, an empty XLA cache), then a warm, a tool, a prewarmed, a forked, a
    trimmed, a stopped and a remote turn, each as the panel's `turns` trait holds it (events, pieces, account)."""
    folder = tmp_path_factory.mktemp("turns")
    out = folder / "turns.json"
    env = {**os.environ, "CHATFLOW_XLA_CACHE": str(folder / "xla"), "CHATFLOW_DB": str(folder / "chatflow.db")}
    done = subprocess.run([sys.executable, "-m", "tests.integration.record_turns", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="session")
def gemma3_path() -> Path:
    """Gemma 3 270M's GGUF, assembled by its carrier package (installed by the README's test command)."""
    from jupyter_chatflow.errors import ModelNotFoundError
    from jupyter_chatflow.model.files import known_model_path

    try:
        return known_model_path("gemma-3-270m")
    except ModelNotFoundError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def harness_chromium():
    """Debian's chromium through Playwright, with the panel's harness page built (`node build.mjs --harness`)."""
    from playwright.sync_api import sync_playwright

    from .test_e2e_panel import CHROMIUM, FLAGS

    subprocess.run(["node", "build.mjs", "--harness"], cwd=ROOT / "js", check=True, capture_output=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield browser
        browser.close()
