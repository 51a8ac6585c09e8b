"""Answering a turn again with heads knocked out or the residual steered (`Chat.intervene`): on the tiny random
model. The intervened model's own arithmetic is checked in tests/engine/test_intervention.py and against
transformers in tests/model/test_inside_reference.py."""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_chatflow.errors import GenerationError
from jupyter_chatflow.events import Completed, Head, Intervened, TokenDelta, TurnStarted
from jupyter_chatflow.frontends.panel.turn_rows import StaticCopy
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.pipeline.request import RequestError
from jupyter_chatflow.store.database import Database

SETTINGS = {"max_tokens": 12, "temperature": 0.0, "seed": 3, "safety": "off", "memory": False}
EVERY_HEAD = {0: [0, 1, 2, 3], 1: [0, 1, 2, 3]}


@pytest.fixture
def chat(tiny_model, tmp_path):
    tiny_model.prompt_cache.clear()
    return Chat(model=tiny_model, db=Database(tmp_path / "chat.db"), session="intervene")


def token_ids(response) -> list[int]:
    return [e.token_id for e in response if isinstance(e, TokenDelta)]


def test_the_turn_answered_again_says_what_changed_and_answers_as_the_changed_model_does(chat, tiny_model):
    parent = chat.send("Hello there", **SETTINGS)
    original = token_ids(parent)
    again = chat.intervene(parent.turn_id, ablate_heads=EVERY_HEAD)
    events = again.events()
    assert isinstance(events[0], TurnStarted) and events[0].fork_of == parent.turn_id
    assert events[0].fork_index == -1  # (answered anew: no token kept)
    assert isinstance(events[1], Intervened)
    assert events[1].heads == tuple(Head(layer=layer, head=h) for layer in (0, 1) for h in range(4))
    assert events[1].describe().startswith("heads 0.0, 0.1") and "knocked out" in events[1].describe()
    assert isinstance(again.terminal(), Completed)
    changed = token_ids(again)
    prompt = list(next(e for e in parent.events() if e.type == "tokenized").ids)
    expected = [s.token_id for s in tiny_model.intervened(EVERY_HEAD).generate(prompt, max_tokens=12, temperature=0.0)]
    assert changed == expected and changed != original
    # the chat's model is as it was: the same message in a new session is answered as the first time
    chat.new_session("plain")
    assert token_ids(chat.send("Hello there", **SETTINGS, session="plain")) == original


def test_the_intervened_turn_replaces_its_parent_and_the_static_copy_says_both(chat):
    parent = chat.send("Hello there", **SETTINGS)
    parent.events()
    direction = chat.model.direction(1, "yes yes", "no no")
    again = chat.intervene(parent.turn_id, steer={1: direction * 3})
    again.events()
    assert [r.id for r in chat._active()] == [again.turn_id]
    copy = StaticCopy()
    for record in chat.history():
        copy.add(record.id, record.events)
    plain = copy.bundle("intervene", "", "tiny")["text/plain"]
    said = 'steered after layer 1 along "yes yes" − "no no" (strength 3)'
    assert f"✕ replaced by the next turn, answered again with {said}: no longer in the chat" in plain
    assert f"↪ the answer above, answered again with {said} (for this turn only); replaces it" in plain


def test_interventions_that_cannot_run_say_why(chat):
    first = chat.send("First", **SETTINGS)
    first.events()
    latest = chat.send("Second", **SETTINGS)
    latest.events()
    with pytest.raises(RequestError, match="latest turn of the session can be changed and answered again"):
        chat.intervene(first.turn_id, ablate_heads={0: [1]})
    with pytest.raises(RequestError, match=r"no ended turn 'turn_nope'.*read its response to the end first"):
        chat.intervene("turn_nope", ablate_heads={0: [1]})
    with pytest.raises(RequestError, match="changes nothing"):
        chat.intervene(latest.turn_id, ablate_heads={0: []}, steer={1: np.zeros(chat.model.config.dim)})
    with pytest.raises(GenerationError, match="heads are 0 to 3"):
        chat.intervene(latest.turn_id, ablate_heads={0: [9]})
