"""The guided tour (examples/tour/): every chapter runs top to bottom on a fresh kernel with the real model, within
Binder's memory, and its HTML export (nbconvert, no network) shows every turn of every panel, read in headless
Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
nbconvert = pytest.importorskip("nbconvert")

pytestmark = pytest.mark.slow

TOUR = Path(__file__).resolve().parents[2] / "examples" / "tour"
CHAPTERS = sorted(TOUR.glob("[0-9][0-9]_*.ipynb"))
QUICKSTART = TOUR.parent / "quickstart.ipynb"
LIMIT_MIB = 1536  # Binder's 2 GiB hold JupyterLab and the kernel: docs/binder.md says each notebook peaks within this
CHROMIUM = Path("/usr/bin/chromium")
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def test_the_tour_has_its_chapters_in_the_order_a_request_travels():
    assert len(CHAPTERS) >= 10, [c.name for c in CHAPTERS]
    numbers = [int(c.name[:2]) for c in CHAPTERS]
    assert numbers == list(range(1, len(CHAPTERS) + 1))
    for chapter in CHAPTERS:
        cells = nbformat.read(chapter, as_version=4).cells
        markdown = sum(c.cell_type == "markdown" for c in cells)
        code = sum(c.cell_type == "code" for c in cells)
        assert markdown >= code, f"{chapter.name}: {markdown} Markdown cells for {code} code cells"
        assert cells[0].source.startswith(f"# {int(chapter.name[:2])}. "), chapter.name
        endings = [line for c in cells if c.cell_type == "markdown" for line in c.source.splitlines()]
        assert "## Things to try" in endings, chapter.name


def test_every_notebook_says_near_its_top_to_shut_the_previous_kernel_down_in_the_same_words():
    notes = {}
    for notebook in [QUICKSTART, *CHAPTERS]:
        first = nbformat.read(notebook, as_version=4).cells[0]
        notes[notebook.name] = next((p for p in first.source.split("\n\n") if "One kernel at a time" in p), "")
    assert all(notes.values()), [name for name, note in notes.items() if not note]
    (note,) = set(notes.values())  # one wording everywhere
    assert "Kernel → Shut Down Kernel" in note and "Running Terminals and Kernels" in note, note
    assert "2 GiB" in note and "1.5 GiB" in note, note


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_a_chapter_runs_on_a_fresh_kernel_and_its_export_shows_every_turn(
    chapter, real_model_path, tmp_path, tmp_path_factory, monkeypatch
):
    as_on_binder(monkeypatch, tmp_path_factory)
    notebook = nbformat.read(chapter, as_version=4)
    client = PeakClient(notebook, timeout=300, kernel_name="python3",
                        resources={"metadata": {"path": str(chapter.parent)}})  # fmt: skip
    client.execute()
    assert client.peak_mib is None or client.peak_mib <= LIMIT_MIB, f"the kernel peaked at {client.peak_mib:,.0f} MiB"
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    errors = [f"{o.ename}: {o.evalue}" for o in outputs if o.output_type == "error"]
    assert not errors, errors
    plain = [o["data"]["text/plain"] for o in outputs if "text/plain" in o.get("data", {})]
    assert not [p for p in plain if re.search(r"object at 0x[0-9a-f]+>", p)], "a bare repr reached the page"
    if chapter.stem in AFTER_RUN:
        AFTER_RUN[chapter.stem](notebook)
    panels = _panels(notebook)
    if panels and CHROMIUM.exists():
        page = tmp_path / f"{chapter.stem}.html"
        body, _ = nbconvert.HTMLExporter().from_notebook_node(notebook)
        page.write_text(body)
        _check_page(page, panels)


def test_chapter_13_as_stored_shows_a_panel_on_the_server_with_its_wire():
    """What a reader of the stored chapter (GitHub, nbviewer, JupyterLab before running it) gets."""
    _a_panel_shows_a_remote_turn(nbformat.read(TOUR / "13_wire.ipynb", as_version=4))


def _a_panel_shows_a_remote_turn(notebook) -> None:
    """Chapter 13 opens a panel on a chat whose turns go to the server the chapter runs in the kernel, so the
    panel's Wire tab is filled: the request (the key masked), the response with its x-request-id, the SSE frames."""
    cell = next(c for c in notebook.cells if c.cell_type == "code" and "ChatWidget(" in c.source)
    assert "cf.Chat(base_url=" in cell.source and "server.url" in cell.source, cell.source
    key = re.search(r'KEY = "(sk-[^"]+)"', "".join(c.source for c in notebook.cells)).group(1)
    state = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    remote = [m["state"] for m in state.values() if m.get("state", {}).get("model_info", {}).get("remote")]
    assert len(remote) == 1, "no panel on a remote chat was saved"
    assert key not in json.dumps(remote), "the API key reached the panel"
    (turn,) = remote[0]["turns"]
    if "events" not in turn:  # (saved since a turn's events cross to the panel once, by message: its row is here)
        _the_static_copy_shows_the_wire(notebook, key)
        return
    events = turn["events"]
    post = next(e for e in events if e["type"] == "http_request" and e["method"] == "POST")
    assert post["url"].endswith("/v1/chat/completions") and post["body"]["stream"] is True
    assert post["headers"]["Authorization"] == f"Bearer sk-…{key[-4:]}"
    answer = next(e for e in events if e["type"] == "http_response" and e["sequence_number"] > post["sequence_number"])
    assert answer["status"] == 200 and answer["headers"]["x-request-id"] == answer["request_id"]
    frames = [e for e in events if e["type"] == "sse_frame"]
    assert len(frames) >= 4 and frames[-1]["text"].strip() == "data: [DONE]"
    arrivals = [f["arrival_ms"] for f in frames]
    assert arrivals == sorted(arrivals) and all(f["bytes"] > 0 for f in frames)
    assert "Paris" in _answer(events)


def _the_static_copy_shows_the_wire(notebook, key: str) -> None:
    """A panel saved as rows (no events in its state): the copy beside it has the wire's line, not the key."""
    outputs = [o.get("data", {}) for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    copies = [d["text/plain"] for d in outputs if "cf-static-copy" in d.get("text/html", "")]
    copies = [text for text in copies if "server: POST" in text]
    assert len(copies) == 1, "no static copy of the panel on the server"
    wire = re.search(
        r"server: POST \S+/v1/chat/completions → 200 OK, \S+, (\d+) SSE frames \(([\d,]+) bytes\)", copies[0]
    )
    assert wire and int(wire.group(1)) >= 4, copies[0]
    assert key not in copies[0] and "Paris" in copies[0]


def as_on_binder(monkeypatch, tmp_path_factory) -> None:
    """The kernels started next map prepared weights, as Binder's do (postBuild prepared them), instead of each
    dequantizing the file as the tests' default (CHATFLOW_WEIGHTS_CACHE=off) has them do, which peaks at ~1.4 GiB
    while it loads. One folder for a worker's notebooks: the first prepares the weights, the others map them."""
    monkeypatch.setenv("CHATFLOW_WEIGHTS_CACHE", str(tmp_path_factory.getbasetemp() / "binder-weights"))


class PeakClient(nbclient.NotebookClient):
    """A client that reads its kernel's peak resident memory (`VmHWM`, MiB) just before shutting it down (a turn
    can run on past its cell); `peak_mib` stays None where /proc has no such figure."""

    peak_mib: float | None = None

    async def _async_cleanup_kernel(self) -> None:
        if self.km is not None and self.km.has_kernel:
            self.peak_mib = kernel_peak_mib(self.km.provisioner.pid)
        await super()._async_cleanup_kernel()


def kernel_peak_mib(pid: int | None) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
    return int(found.group(1)) / 1024 if found else None


AFTER_RUN = {"13_wire": _a_panel_shows_a_remote_turn}
"""Checks of a chapter's own, on its outputs once it has run."""


def _panels(notebook) -> dict[str, list[str]]:
    """{widget model id: a text of each of its turns} for every inspector panel in the saved widget state: the
    answer where the state holds the turn's events, else (a row: the events crossed by message) the user's message."""
    state = notebook.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    panels = {}
    for model_id, model in state.items():
        turns = model.get("state", {}).get("turns")
        if isinstance(turns, list) and "model_info" in model.get("state", {}):
            status = model["state"].get("status")
            assert status == "idle", f"panel {model_id} was saved {status}: wait for its turn (panel.wait())"
            panels[model_id] = [_answer(t["events"]) if "events" in t else t["user"] for t in turns]
    return panels


def _answer(events: list[dict]) -> str:
    end = next((e for e in reversed(events) if e["type"] in ("completed", "cancelled", "error")), None)
    return str(end.get("text", "")) if end else ""


def _check_page(page: Path, panels: dict[str, list[str]]) -> None:
    """The exported page, read with the network cut off (no widget manager from a CDN): each panel's static
    copy holds each of its turns, with the answer's words on it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox"])
        tab = browser.new_page()
        tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
        tab.goto(page.as_uri())
        for model_id, answers in panels.items():
            copy = tab.locator(f".cf-static-copy[data-model-id='{model_id}']")
            if not copy.count():
                continue  # a panel made but never displayed
            shown = copy.first
            assert shown.is_visible(), f"panel {model_id}: its static copy is hidden"
            assert shown.locator(".cf-static-turn").count() == len(answers), (model_id, json.dumps(answers)[:300])
            text = " ".join(shown.inner_text().split())
            for answer in answers:
                words = " ".join(re.sub(r"[*_`#>|-]", " ", answer).split())[:40]
                assert not words or words.split()[0] in text, (model_id, words)
        browser.close()
