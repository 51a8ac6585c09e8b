"""docs/environment.md lists every environment variable the package reads, and only those."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _named(folder: Path) -> set[str]:
    return {name for path in folder.rglob("*.py") for name in re.findall(r"CHATFLOW_[A-Z_]+", path.read_text())}


def test_every_environment_variable_the_code_names_is_in_the_table_and_no_other():
    named = _named(ROOT / "jupyter_chatflow")
    package, outside = (ROOT / "docs" / "environment.md").read_text().split("Outside the package:")
    assert named == _listed(package)
    assert _named(ROOT / "safety_lab") - named <= _listed(outside)


def _listed(table: str) -> set[str]:
    return set(re.findall(r"^\| `(CHATFLOW_[A-Z_]+)`", table, flags=re.MULTILINE))
