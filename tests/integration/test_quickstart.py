"""examples/quickstart.ipynb runs top to bottom on a real kernel with the real model (answers kept short) within
Binder's memory, and narrates each code cell (Markdown before it says what it does and what to look at)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

from .test_tour import LIMIT_MIB, PeakClient, as_on_binder  # noqa: E402

pytestmark = pytest.mark.slow

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "quickstart.ipynb"
WIDGET = "application/vnd.jupyter.widget-view+json"


def test_the_quickstart_notebook_runs_and_every_inspect_cell_shows_the_panel(
    real_model_path, tmp_path, tmp_path_factory, monkeypatch
):
    monkeypatch.setenv("CHATFLOW_DB", str(tmp_path / "quickstart.db"))
    as_on_binder(monkeypatch, tmp_path_factory)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    short = nbformat.v4.new_code_cell("%config ChatMagics.max_tokens = 12")  # the panels' turns run on meanwhile
    notebook.cells.insert(2, short)
    client = PeakClient(notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": tmp_path}})
    client.execute()
    assert client.peak_mib is None or client.peak_mib <= LIMIT_MIB, f"the kernel peaked at {client.peak_mib:,.0f} MiB"
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    inspect_cells = [c for c in notebook.cells if c.cell_type == "code" and "--inspect" in c.source]
    assert len(inspect_cells) == 3
    for cell in inspect_cells:
        assert any(WIDGET in o.get("data", {}) for o in cell.outputs), cell.source
    api = next(c for c in notebook.cells if c.cell_type == "code" and "chat.send" in c.source)
    printed = "".join(o.get("text", "") for o in api.outputs if o.output_type == "stream")
    assert "[turn_started]" in printed and "[completed]" in printed
    assert "[safety_decision: input allow]" in printed
    assert "finish reason: length" in printed  # (its Markdown says so: the answer used its 40 tokens)
    assert any(WIDGET in o.get("data", {}) for o in notebook.cells[-1].outputs)


def test_the_quickstart_narrates_each_code_cell():
    """Each code cell comes after Markdown that says what it does and what to look at in its output."""
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    markdown = sum(c.cell_type == "markdown" for c in cells)
    code = sum(c.cell_type == "code" for c in cells)
    assert markdown >= code, f"{markdown} Markdown cells for {code} code cells"
    for before, cell in itertools.pairwise(cells):
        if cell.cell_type == "code":
            assert before.cell_type == "markdown" and before.source.strip(), f"no Markdown before: {cell.source}"
    assert cells[0].cell_type == "markdown"
