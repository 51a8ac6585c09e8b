"""The panel's front end: its own type check and unit tests (vitest), and the bundle the package ships."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
JS = ROOT / "js"
STATIC = ROOT / "jupyter_chatflow" / "static"


@pytest.mark.slow  # npm test: Biome, tsc and vitest in jsdom (about 13 s of CPU); `npm test` in js/ alone
def test_the_front_end_type_checks_and_its_unit_tests_pass():
    if shutil.which("npm") is None:
        pytest.fail("npm is not on PATH: the panel's front end cannot be built or tested (install Node.js 20+).")
    if not (JS / "node_modules").exists():
        pytest.skip("js/node_modules is missing: `pip install -e .` (or `cd js && npm install`) installs it.")
    result = subprocess.run(["npm", "test", "--silent"], cwd=JS, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]


def test_the_package_ships_a_self_contained_bundle():
    bundle = (STATIC / "widget.js").read_text()
    assert (STATIC / "widget.css").stat().st_size > 0
    assert "export" in bundle and "render" in bundle
    # esbuild inlined every dependency: no import statement or dynamic import left, no URL to fetch from
    assert not re.findall(r"(?:^|[;}\n])\s*import\s*[{*\"'\w]", bundle)
    assert not re.findall(r"\bimport\s*\(", bundle)
    # (markdown-it's "http://" prefix for links is no URL; nor is the SVG namespace, the name the lens's chart
    # gives document.createElementNS, which nothing fetches)
    assert not re.findall(r"https?://[\w-]+\.[\w.-]+", bundle.replace("http://www.w3.org/2000/svg", ""))
    assert "innerHTML" not in bundle  # model and user text only ever go in as text
