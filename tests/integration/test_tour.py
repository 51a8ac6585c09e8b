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
CHAPTERS = sorted(c for c in TOUR.glob("*.ipynb") if re.match(r"\d\d[a-z]?_", c.name))
"""NN_name.ipynb in the order a request travels; NNx_name.ipynb (5b) a chapter added after NN without renumbering."""
QUICKSTART = TOUR.parent / "quickstart.ipynb"
LIMIT_MIB = 1536  # Binder's 2 GiB hold JupyterLab and the kernel: docs/binder.md says each notebook peaks within this
CHROMIUM = Path("/usr/bin/chromium")
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def test_the_tour_has_its_chapters_in_the_order_a_request_travels():
    assert len(CHAPTERS) >= 10, [c.name for c in CHAPTERS]
    numbered = [c for c in CHAPTERS if c.name[2] == "_"]
    assert [int(c.name[:2]) for c in numbered] == list(range(1, len(numbered) + 1))
    for chapter in CHAPTERS:
        label = chapter.name.split("_")[0].lstrip("0")  # "5", or "5b" for a chapter after 5
        assert re.fullmatch(r"\d+(?:[b-z])?", label) and int(chapter.name[:2]) <= len(numbered), chapter.name
        cells = nbformat.read(chapter, as_version=4).cells
        markdown = sum(c.cell_type == "markdown" for c in cells)
        code = sum(c.cell_type == "code" for c in cells)
        assert markdown >= code, f"{chapter.name}: {markdown} Markdown cells for {code} code cells"
        assert cells[0].source.startswith(f"# {label}. "), chapter.name
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


def test_chapter_5b_as_stored_says_what_its_outputs_show():
    _the_inside_chapter_says_what_it_shows(nbformat.read(TOUR / "05b_inside.ipynb", as_version=4))


def _the_inside_chapter_says_what_it_shows(notebook) -> None:
    """Chapter 5b's claims, read from its outputs, and its prose's figures, read from the same outputs: ' Rome'
    becomes the lens's top choice only at the last layer; the tool's result is the prompt part with the largest
    attribution to the result's first digit, and that digit follows an edited result in most cases; knocking out the
    head with the highest induction score raises the second copy's loss, leaves the first copy's, and moves it far
    more than any random head does."""
    out = "\n".join(o.text for c in notebook.cells if c.cell_type == "code" for o in c.outputs if "text" in o)
    prose = " ".join(" ".join(c.source.split()) for c in notebook.cells if c.cell_type == "markdown")

    # 1. The lens: the rank of ' Rome' after each layer (row 0: the embeddings).
    rows = re.findall(r"^ *(embeddings|\d+)  '.*?' [\d.]+% +([\d,]+) +([\d.]+)%$", out, re.M)
    ranks = [int(rank.replace(",", "")) for _, rank, _ in rows]
    p_rome = [float(p) for _, _, p in rows]
    layers = len(rows) - 1
    assert layers == 30 and ranks[-1] == 1 and min(ranks[:-1]) > 1, ranks
    assert f"' Rome' is first the top choice at layer {layers} of {layers}" in out
    assert 'The answer is (d): " Rome" becomes the top choice only at layer 30' in prose
    thousand = max(i for i, rank in enumerate(ranks) if rank > 1000) + 1  # within the top 1,000 from this layer
    assert f"Through layer {thousand - 1} the lens ranks it in the thousands" in prose, thousand
    assert min(ranks[: thousand - 1]) >= 1000 and f"From layer {thousand} on it is within the top thousand" in prose
    assert f"After layer 29 it ranks {ranks[29]}th with about {p_rome[29]:.0f}%" in prose, (ranks[29], p_rome[29])
    assert f"the last layer alone lifts it to {p_rome[30]:.0f}%" in prose

    # 2. Attribution: per part of the prompt, the plain and the contrastive totals; then the edited tool results.
    assert "answer: '17 * 23 = 391.'" in out
    parts = {name: (float(plain), float(versus)) for name, plain, versus in
             re.findall(r"^ +(.+?) +\d+ +([+-]\d\.\d{3}) +([+-]\d\.\d{3})$", out, re.M) if name != "all"}  # fmt: skip
    assert len(parts) == 7, parts
    assert max(parts, key=lambda name: parts[name][1]) == "tool result", parts
    prompt_parts = {name: plain for name, (plain, _) in parts.items() if name != "answer so far"}
    assert max(prompt_parts, key=prompt_parts.__getitem__) == "tool result", prompt_parts
    said = [f"{parts[name][1]:+.2f}" for name in ("tool result", "user", "tools")]
    assert f'"4" ({said[0]}), ahead of the user\'s question ({said[1]}) and the instruction' in prose, said
    assert re.search(r"^ +\d+ +'3' +\+[\d.]+ +\(tool result\)$", out, re.M)
    fourth = re.findall(r"^ +\d+ +'(.+?)' +\+[\d.]+ +\((.+?)\)$", out, re.M)[3]
    assert fourth == ("3", "tool result") and 'The tool result\'s own "3" comes fourth' in prose, fourth
    edits = dict(re.findall(r"the tool says (\d)91: the model writes '(\d)'", out))
    assert len(edits) == 10 and edits["3"] == "3" and edits["4"] == "4", edits
    followed = sum(digit == wrote for digit, wrote in edits.items())
    assert followed >= 6 and f"follows the tool's in {followed} of the 10 cases" in prose, edits
    missed = [digit for digit, wrote in edits.items() if digit != wrote]
    listed = f"says {_listed([d + '91' for d in missed], 'or')}, the model writes {_listed([edits[d] for d in missed])}"
    assert listed in prose, listed

    # 3. Knocking out heads: the losses (first copy, second copy) with none, the top head, the top three, random ones.
    table = re.findall(r"^ +(.+?) +(\d+\.\d\d) +(\d+\.\d\d) +([+-]\d+\.\d\d)$", out, re.M)
    losses = {label: (float(one), float(two)) for label, one, two, _ in table}
    (first, second), (top_first, top_second) = losses["none"], next(v for k, v in losses.items() if "top head" in k)
    three = next(v for k, v in losses.items() if k.startswith("the top three"))[1]
    randoms = [two - second for label, (_, two) in losses.items() if label.startswith("random:")]
    head = re.search(r"the top head, layer (\d+) head (\d+)", out).groups()
    assert len(randoms) == 12 and second < first - 5, losses
    assert top_second - second >= 1.0 and abs(top_first - first) < 0.1, losses
    assert max(abs(change) for change in randoms) < (top_second - second) / 4, randoms
    assert three > top_second, losses
    assert f"layer {head[0]} head {head[1]} knocked out, every token of the second copy is less likely" in prose
    assert re.search(r"^(\d+) of \1 tokens are less likely", out, re.M)
    assert f"rises from {second:.2f} to {top_second:.2f} nats" in prose
    assert f"({first:.2f}, then {top_first:.2f})" in prose and f"the loss rises to {three:.2f} nats" in prose
    small = sum(abs(change) < 0.1 for change in randoms)
    assert f"{small} of the 12 moved the second copy's loss by less than 0.1 nats" in prose
    moved = [label.removeprefix("random: ") for label, (_, two) in losses.items() if label.startswith("random:")
             and abs(two - second) >= 0.1]  # fmt: skip
    assert all(f"({label})" in prose for label in moved), moved  # each named
    chapter_5 = nbformat.read(TOUR / "05_transformer.ipynb", as_version=4)
    assert f"induction: layer {head[0]} head {head[1]}:" in str(chapter_5.cells), "not chapter 5's top head"
    chapter_9 = nbformat.read(TOUR / "09_tools.ipynb", as_version=4)
    assert "17 * 23 = 405." in str(chapter_9.cells) and "(it answered 405)" in prose


def _listed(items: list[str], last: str = "and") -> str:
    """The items as prose lists them: a, b and c (or: a, b or c)."""
    return f"{', '.join(items[:-1])} {last} {items[-1]}" if len(items) > 1 else "".join(items)


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


AFTER_RUN = {"05b_inside": _the_inside_chapter_says_what_it_shows, "13_wire": _a_panel_shows_a_remote_turn}
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
