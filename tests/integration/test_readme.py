"""Every snippet in README.md and in the guide's pages (docs/, the text that was the README's) runs as written: the
```python blocks in order in one IPython shell (magics included), and each `chatflow …` command line of the ```bash
blocks in a shell of its own. The pages are read when the test runs, so an edit to them is tested as it is."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *(ROOT / "docs" / f"{name}.md" for name in ("notebook", "cli", "python", "inside"))]
"""In this order: the README's first notebook loads the extension, the Python page's `chat` and `response` follow."""
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
COMMAND = re.compile(r"(^|\|\s*)chatflow\s")  # a line that runs the chatflow command (maybe at a pipe's end)

pytestmark = pytest.mark.slow


def blocks(language: str, pages: list[Path] = PAGES) -> list[str]:
    """The pages' fenced blocks in that language, in order."""
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    return [body for lang, body in FENCE.findall(text) if lang == language]


def command_lines(pages: list[Path] = PAGES) -> list[str]:
    """The lines of the bash blocks that run `chatflow` (the install and test commands are left to CI)."""
    return [line for block in blocks("bash", pages) for line in block.splitlines() if COMMAND.search(line)]


def test_the_readme_has_the_snippets_this_test_runs():
    readme = blocks("python", PAGES[:1])
    assert readme[0].strip() == "%load_ext jupyter_chatflow" and readme[1].lstrip().startswith("%%chat")
    assert len(blocks("python")) >= 4 and any("cf.Chat(" in block for block in blocks("python"))
    assert any(line.startswith("chatflow chat") for line in command_lines())
    assert all(re.search(rf"\]\(docs/{page.name}\)", PAGES[0].read_text(encoding="utf-8")) for page in PAGES[1:])
    runnable = {page for page in (ROOT / "docs").glob("*.md") if blocks("python", [page]) or command_lines([page])}
    assert runnable <= set(PAGES), f"pages with snippets this test does not run: {runnable - set(PAGES)}"


@pytest.fixture
def shell(real_model, tmp_path, monkeypatch):
    """An IPython shell in a scratch folder and database, every load_model giving the session's real model."""
    from IPython.core.interactiveshell import InteractiveShell

    import jupyter_chatflow
    from jupyter_chatflow.engine import loader
    from jupyter_chatflow.frontends.notebook import magics
    from jupyter_chatflow.pipeline import chat_model

    for module in (jupyter_chatflow, chat_model, loader, magics):
        monkeypatch.setattr(module, "load_model", lambda *args, **kwargs: real_model)
    monkeypatch.setenv("CHATFLOW_DB", str(tmp_path / "readme.db"))
    monkeypatch.chdir(tmp_path)
    InteractiveShell.clear_instance()
    ip = InteractiveShell.instance()
    ip.run_line_magic("config", "ChatMagics.max_tokens = 48")  # the pages' cells as written, answers kept short
    yield ip
    InteractiveShell.clear_instance()


def test_python_snippets_run_in_order(shell, capsys):
    for block in blocks("python"):
        result = shell.run_cell(block)
        captured = capsys.readouterr()
        assert result.success, f"snippet failed:\n{block}\n{result.error_before_exec or result.error_in_exec}"
        assert "chatflow:" not in captured.err and "Traceback" not in captured.out + captured.err, captured
    response = shell.user_ns["response"]
    assert response.terminal().type == "completed" and response.text()
    exported = [json.loads(line) for line in Path("requests.jsonl").read_text().splitlines()]
    assert response.request.request_id in {record["request_id"] for record in exported}


def test_command_lines_run(real_model_path, tmp_path):
    """Each `chatflow …` line in a fresh shell, as a reader would paste it (the weights cache shared among them)."""
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "CHATFLOW_DB": str(tmp_path / "cli.db"),
        "CHATFLOW_WEIGHTS_CACHE": str(tmp_path / "weights"),
    }
    for line in command_lines():
        result = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=300, env=env)
        assert result.returncode == 0, f"{line}\nstdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-2000:]}"
        assert result.stdout.strip(), line
        assert "Traceback" not in result.stderr, result.stderr
        if "--json" in line:  # one JSON object per line, as the command line's page says
            assert all(isinstance(json.loads(row), dict) for row in result.stdout.splitlines()), line
