"""Forking a turn from one of its tokens, and prewarming a draft: on the tiny random model."""

from __future__ import annotations

import time

import pytest

from jupyter_chatflow.events import Completed, PrefillDone, TokenDelta, TurnStarted
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.pipeline.request import RequestError
from jupyter_chatflow.store.database import Database

SETTINGS = {"max_tokens": 12, "temperature": 0.0, "seed": 3, "safety": "off", "memory": False}


@pytest.fixture
def chat(tiny_model, tmp_path):
    tiny_model.prompt_cache.clear()
    return Chat(model=tiny_model, db=Database(tmp_path / "chat.db"), session="fork")


def tokens(response) -> list[TokenDelta]:
    return [e for e in response if isinstance(e, TokenDelta)]


def test_a_fork_keeps_the_answer_up_to_the_token_and_puts_the_alternative_there(chat):
    parent = chat.send("Hello there", **SETTINGS)
    old = tokens(parent)
    index = 4
    alternative = next(a for a in old[index].alternatives if a.token_id != old[index].token_id)
    fork = chat.fork(parent.turn_id, index, alternative.token_id)
    new = tokens(fork)
    assert [t.token_id for t in new[:index]] == [t.token_id for t in old[:index]]
    assert new[index].token_id == alternative.token_id
    assert new[index].logprob == pytest.approx(alternative.logprob)
    assert fork.request.fork_of == parent.turn_id and fork.request.fork_index == index
    assert isinstance(fork.terminal(), Completed)


def test_a_fork_prefills_only_what_the_prompt_cache_lacks(chat):
    parent = chat.send("Hello there", **SETTINGS)
    prompt = next(e for e in parent if isinstance(e, PrefillDone)).prompt_tokens
    first = tokens(parent)[5]
    fork = chat.fork(parent.turn_id, 5, first.alternatives[-1].token_id)
    prefill = next(e for e in fork if isinstance(e, PrefillDone))
    assert prefill.prompt_tokens == prompt + 6  # the prompt, the kept tokens and the chosen one
    assert prefill.computed_tokens == 1  # only the chosen token: the rest came from the cache
    started, done = fork.events()[0], fork.terminal()
    first_new = tokens(fork)[6]  # the kept tokens and the chosen one are shown at once; this one was generated
    assert done.timings.ttft_ms >= (prefill.timestamp - started.timestamp) * 1000
    waited = started.queued_ms  # ttft counts from submission
    assert done.timings.ttft_ms == pytest.approx((first_new.timestamp - started.timestamp) * 1000 + waited, abs=2)


def test_the_fork_replaces_the_forked_turn_in_the_conversation(chat):
    first = chat.send("First message", **SETTINGS)
    first.events()
    parent = chat.send("Second message", **SETTINGS)
    token = tokens(parent)[2]
    chat.fork(parent.turn_id, 2, token.alternatives[1].token_id).events()
    active = chat._active()
    assert [r.user for r in active] == ["First message", "Second message"]
    assert parent.turn_id not in {r.id for r in active}
    assert len(chat.history()) == 3  # nothing is deleted: the forked turn stays stored
    history = chat._history()
    assert len(history) == 2 and history[1][1]["content"] == active[1].answer


def test_only_the_latest_turn_can_be_forked_and_only_to_a_token_the_sampler_saw(chat):
    first = chat.send("First message", **SETTINGS)
    first.events()
    chat.send("Second message", **SETTINGS).events()
    with pytest.raises(RequestError, match="latest turn"):
        chat.fork(first.turn_id, 0, 0)
    latest = chat._active()[-1]
    with pytest.raises(RequestError, match="no token 99"):
        chat.fork(latest.id, 99, 0)
    step = next(e for e in latest.events if isinstance(e, TokenDelta))
    seen = {a.token_id for a in step.alternatives} | {step.token_id}
    unseen = next(i for i in range(400) if i not in seen)
    with pytest.raises(RequestError, match="not among the alternatives"):
        chat.fork(latest.id, 0, unseen)


def test_a_prefix_ending_in_an_end_of_turn_token_ends_the_answer_there(tiny_model):
    import threading

    from jupyter_chatflow.engine.generation import Step
    from jupyter_chatflow.engine.sampling import SamplingParams
    from jupyter_chatflow.pipeline.stream import Streamer

    events = []
    streamer = Streamer(tiny_model, events.append, threading.Event(), gate=None)
    ids = tiny_model.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])
    decode = tiny_model.tokenizer.decode
    word = [Step(index=i, token_id=t, text=decode([t]), logprob=-1.0, entropy=1.0, top_alternatives=(),
                 elapsed_ms=0.0) for i, t in enumerate(tiny_model.tokenizer.encode("ok"))]  # fmt: skip
    stop = Step(index=len(word), token_id=next(iter(tiny_model.tokenizer.stop_ids)), text="", logprob=-2.0,
                entropy=1.0, top_alternatives=(), elapsed_ms=0.0)  # fmt: skip
    result = streamer.free(ids, SamplingParams(max_tokens=8, temperature=0.0), (), (*word, stop))
    assert streamer.shown == "ok" and result.finish_reason == "stop" and result.completion_tokens == 3
    assert not any(isinstance(e, PrefillDone) for e in events)  # nothing was generated after it


def test_a_prewarm_puts_the_draft_prompt_in_the_cache_and_the_turn_reuses_it(chat):
    chat.send("Warm up the session", **SETTINGS).events()
    draft = "Tell me a story about a lighthouse keeper"
    prewarm = chat.prewarm(draft, **SETTINGS).result()
    assert prewarm.computed_tokens > 0 and prewarm.prompt_tokens == prewarm.cached_before + prewarm.computed_tokens
    response = chat.send(draft + " and a cat", **SETTINGS)
    prefill = next(e for e in response if isinstance(e, PrefillDone))
    assert prefill.reused_tokens > prewarm.cached_before  # the prewarm was used
    again = chat.prewarm(draft, **SETTINGS).result()
    assert again.cached_before > 0


def test_a_prewarm_never_holds_up_a_send(chat, monkeypatch):
    """A draft's prewarm runs beside the turns: a send starts at once; a send of other text cancels it, a send of
    the same text lets it go on (whichever prefill comes first, the other reuses it)."""
    from jupyter_chatflow.pipeline.local import LocalRounds

    ids = LocalRounds.prompt_ids
    monkeypatch.setattr(LocalRounds, "prompt_ids", lambda self: (time.sleep(0.5), ids(self))[1])  # a slow context build
    stale = chat.prewarm("An old draft about lighthouses", **SETTINGS)
    started = next(e for e in chat.send("Something else entirely", **SETTINGS) if isinstance(e, TurnStarted))
    assert started.queued_ms < 100  # it did not wait behind the prewarm
    assert stale.result().computed_tokens == 0  # cancelled by the send of other text: nothing computed
    same = chat.prewarm("A story about a lighthouse keeper", **SETTINGS)
    started = next(e for e in chat.send("A story about a lighthouse keeper", **SETTINGS) if isinstance(e, TurnStarted))
    assert started.queued_ms < 100 and not same.cancelled() and same.result().prompt_tokens > 0  # kept, not waited
