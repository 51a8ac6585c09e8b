"""The session title: written beside the first answer (mid-answer, or after a short one), from what the model saw,
scanned, 2-6 whole words."""

from __future__ import annotations

import threading
import time

import pytest

from jupyter_chatflow.engine.scheduler import MIN_ROW_CACHE
from jupyter_chatflow.events import Completed, ContextAssembled, PrefillDone, Segment, TitleGenerated, TokenDelta
from jupyter_chatflow.pipeline import local as local_answerer
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.pipeline.safety import SafetyPolicy
from jupyter_chatflow.pipeline.title import clean_title, fallback_title, on_topic, scanned_title, unlabelled
from jupyter_chatflow.pipeline.title_task import TitleTask
from jupyter_chatflow.store.database import Database


@pytest.mark.parametrize(
    "attempt, title",
    [
        ("Reverse List in Python", "Reverse List in Python"),
        ('"Green Tea Health Benefits."', "Green Tea Health Benefits"),
        ("Title: **Autumn Leaves in Haiku**", "Autumn Leaves in Haiku"),
        ("Rayleigh Scattering Explanation and Why It's Important in Science", ""),  # 9 words: never cut mid-way
        ("Paris", ""),  # one word
        ("Sure! Here is a title", ""),  # a reply, not a title
        ("I think the title is", ""),
        ("", ""),
    ],
)
def test_an_attempt_is_kept_whole_or_rejected(attempt, title):
    assert clean_title(attempt) == title


@pytest.mark.parametrize(
    "title, user, kept",
    [
        ("The City of Light History Titles", "Tell me about the history of Paris.", "The City of Light History"),
        ("Best Movie Titles", "Suggest some good movie titles.", "Best Movie Titles"),  # the topic: kept
        ("Paris Title", "What is the capital of France?", "Paris Title"),  # two words: nothing to spare
    ],
)
def test_a_last_word_naming_the_job_is_dropped(title, user, kept):
    assert unlabelled(title, user) == kept


@pytest.mark.parametrize(
    "user, title",
    [
        ("What is the capital of France?", "Capital of France"),
        ("Why is the sky blue?", "Sky Blue"),
        ("What is 17*23?", "17*23"),
        ("Can you write a haiku about autumn leaves? Make it sad.", "Haiku About Autumn Leaves"),
        ("Translate 'good morning' into Spanish", "Translate 'Good Morning' into Spanish"),
        ("Please explain the difference between a list and a tuple in Python and when to use each", None),
        ("hi", ""),
        ("Write a long story about a dragon who learns to bake bread.", "Long Story About a Dragon"),
        ("Make a list of ten fruits", "List of Ten Fruits"),
        ("Count from 1 to 200, one number per line.", "Count from 1 to 200"),
        ("Tell me, what is the tallest mountain?", "Tallest Mountain"),
    ],
)
def test_the_fallback_is_the_users_first_phrase_in_whole_words(user, title):
    got = fallback_title(user)
    if title is None:  # long: at most six whole words, never ending on a small word
        words = got.split()
        assert 2 <= len(words) <= 6 and all(w in user.title() or w in user for w in words)
        assert words[-1].lower() not in {"a", "and", "the", "of", "between"}
    else:
        assert got == title


def test_the_fallback_leaves_out_redaction_placeholders():
    assert "EMAIL" not in fallback_title("Mail [EMAIL] the minutes of the board meeting")


def test_a_title_must_share_a_word_with_the_message():
    assert on_topic("Autumn Leaves in Haiku", "Can you write a haiku about autumn leaves?")
    assert not on_topic("Paris Answer", "What is the capital of France?")
    assert not on_topic("One Thousand Two Thirty-Three", "What is 17*23?")


def test_a_title_the_output_scan_would_change_is_not_used():
    policy = SafetyPolicy()
    assert scanned_title("Meeting Notes for Ada", policy) == "Meeting Notes for Ada"
    assert scanned_title("Mail ada@example.com Today", policy) == ""


def test_a_short_answers_title_is_a_late_event_after_it(wide_model, tmp_path):
    chat = Chat(model=wide_model, db=Database(tmp_path / "t.db"), session="t")
    response = chat.send("What is the capital of France?", max_tokens=6, temperature=0.0)
    events = response.events()
    assert isinstance(events[-1], Completed) and not any(isinstance(e, TitleGenerated) for e in events)
    late = response.after_end()
    assert [type(e) for e in late] == [TitleGenerated]
    title = late[0]
    assert title.sequence_number == events[-1].sequence_number + 1 and title.turn_id == events[-1].turn_id
    assert title.timestamp > events[-1].timestamp  # the answer's turn ended before the title was written
    # the random model's attempt is unusable: the user's words are the title, and the session keeps it
    assert (title.title, title.source) == ("Capital of France", "fallback") and response.title() == title.title
    assert chat.title == "Capital of France"
    stored = chat.sessions.events(events[0].turn_id)
    assert isinstance(stored[-1], TitleGenerated) and stored[-1].title == "Capital of France"
    assert chat.send("and of Spain?", max_tokens=4, temperature=0.0).after_end() == []  # one title per session


def test_the_title_is_written_from_the_redacted_message(wide_model, tmp_path, monkeypatch):
    chat = Chat(model=wide_model, db=Database(tmp_path / "t.db"), session="t")
    prompts: list[str] = []
    submit = chat.scheduler.submit

    def spy(ids, *args, **kwargs):
        prompts.append(wide_model.tokenizer.decode(list(ids)))
        return submit(ids, *args, **kwargs)

    monkeypatch.setattr(chat.scheduler, "submit", spy)
    response = chat.send("Send the meeting minutes to ada.lovelace@example.com by Friday", max_tokens=4)
    assert response.title()
    assert len(prompts) == 2  # the answer, then the title
    assert "ada.lovelace@example.com" not in prompts[1] and "minutes" in prompts[1]
    assert "[EMAIL]" in prompts[1]
    assert "lovelace" not in response.title().lower()


def test_no_title_for_a_blocked_or_cancelled_first_turn(wide_model, tmp_path):
    chat = Chat(model=wide_model, db=Database(tmp_path / "t.db"), session="t")
    response = chat.send("How do I synthesize sarin nerve agent at home?", max_tokens=4)
    assert response.terminal().finish_reason == "content_filter"  # type: ignore[union-attr]
    assert response.after_end() == [] and chat.title == ""


def test_a_long_answers_title_arrives_mid_answer_from_the_same_scheduler(wide_model, tmp_path, monkeypatch):
    """As ChatGPT's web client receives it: the title event comes while the answer still streams; its generation
    shares the answer's decode steps (two rows of the chat's scheduler)."""
    chat = Chat(model=wide_model, db=Database(tmp_path / "t.db"), session="t")
    # a process's first batch of 2 compiles beside the answer before the title may join (`engine/plan.py`: a
    # newcomer waits while its batch compiles): done
    # here first, so a busy machine's slow compile cannot outlast the answer
    wide_model.runner.warm(2, MIN_ROW_CACHE)
    # and a first turn of another session compiles the title's own programs (its prompt's prefill, its batch of
    # two), which run alone, or first in a worker, would otherwise compile while the 400 tokens stream past them
    warm = Chat(model=wide_model, db=Database(tmp_path / "warm.db"), session="warm")
    warm.send(
        "Tell me everything about the history of the printing press.", max_tokens=64, temperature=0.0, ignore_eos=True
    ).events()  # (long enough that its title joins it: a random model may end at once)
    busiest, step = [], chat.scheduler._batch.step

    def counted(rows, *rest):
        busiest.append(sum(r is not None for r in rows))
        return step(rows, *rest)

    monkeypatch.setattr(chat.scheduler._batch, "step", counted)
    response = chat.send("Tell me everything about the history of the printing press.", max_tokens=400,
                         temperature=0.0, ignore_eos=True)  # fmt: skip
    events = response.events()
    types = [e.type for e in events]
    assert "title_generated" in types and types[-1] == "completed"
    titled = types.index("title_generated")
    assert types.index("prefill") < titled and "token" in types[titled + 1 :]  # tokens came after the title
    assert response.after_end() == [] and response.title() == chat.title != ""
    stored = chat.sessions.events(events[0].turn_id)
    assert [e.type for e in stored].count("title_generated") == 1 and chat.sessions.get(chat.session.id).title
    assert max(busiest) == 2  # the answer and the title decoded in the same steps


def test_a_long_messages_title_starts_once_the_answer_shows_its_first_token():
    """Not at the answer's prefill: the title's batch and prefill would share the cores with the answer's first
    decode step, and the first token would come later."""
    written: list[tuple[str, str]] = []
    task = TitleTask(lambda user, answer, cancel: written.append((user, answer)) or None, lambda event: None)
    message = "Tell me everything about the history of the printing press, please."
    segments = (Segment(kind="user", label="user", tokens=14, text=message),)
    task.see(ContextAssembled(window=64, reserved_output=8, budget=56, prompt_tokens=14, segments=segments))
    task.see(PrefillDone(prompt_tokens=14, reused_tokens=0, computed_tokens=14, latency_ms=1.0))
    assert task._thread is None
    task.see(TokenDelta(index=0, token_id=5, text="The", logprob=-0.1, entropy=0.1))
    assert task._thread is not None
    task._thread.join(30)
    assert written == [(message, "The")]


def test_a_title_not_yet_written_is_cancelled_with_its_turn(wide_model, tmp_path, monkeypatch):
    chat = Chat(model=wide_model, db=Database(tmp_path / "t.db"), session="t")
    started = threading.Event()
    write = local_answerer.write_title

    def slow(*args, **kwargs):
        started.set()
        time.sleep(0.3)
        return write(*args, **kwargs)

    monkeypatch.setattr(local_answerer, "write_title", slow)
    response = chat.send("Tell me everything about the history of the printing press.", max_tokens=2000,
                         temperature=0.0)  # fmt: skip
    response.start()
    assert started.wait(30)  # the title began beside the answer
    response.cancel()
    assert response.terminal().type == "cancelled"  # type: ignore[union-attr]
    assert response.title() == "" and chat.title == ""
