"""The safety lab's scripts (`safety_lab/`, beside the package and left out of the wheel) import each other as plain
modules, as running a script there does; the tests that score the lab's rows import them the same way."""

from __future__ import annotations

import sys
from pathlib import Path

LAB = Path(__file__).resolve().parents[3] / "safety_lab"
"""The lab's folder: its scripts (`rules_eval`, `intent_data`, `intent_eval`, …) and its rows (`data/`)."""

if str(LAB) not in sys.path:
    sys.path.insert(0, str(LAB))
