"""Memory: remember / forget / list / clear, FTS5 recall with safe queries, and commands in chat messages."""

from __future__ import annotations

import random
import string

import pytest

from jupyter_chatflow.events import Snippet
from jupyter_chatflow.store.database import Database
from jupyter_chatflow.store.memory import Memory, MemoryCommand, fts_query, parse_command


@pytest.fixture
def memory(tmp_path):
    with Database(tmp_path / "chatflow.db") as db:
        yield Memory(db)


@pytest.fixture
def stocked(memory):
    for text in ("I prefer short answers", "My dog is called Rex", "I live in Paris, France", "I write Python at work"):
        memory.remember(text)
    return memory


def test_remember_list_and_clear(memory):
    first = memory.remember("  I prefer short answers ", session_id="s1")
    second = memory.remember("My dog is called Rex")
    records = memory.list()
    assert [(r.id, r.text, r.session_id) for r in records] == [
        (first, "I prefer short answers", "s1"),
        (second, "My dog is called Rex", None),
    ]
    assert memory.clear() == 2
    assert memory.list() == []
    assert memory.recall("dog") == []


def test_remember_nothing_is_an_error(memory):
    with pytest.raises(ValueError, match="non-empty"):
        memory.remember("   ")


def test_recall_ranks_the_relevant_memory_first(stocked):
    snippets = stocked.recall("How short should your answers be?")
    assert isinstance(snippets[0], Snippet)
    assert snippets[0].text == "I prefer short answers"
    assert all(s.score > 0 for s in snippets)
    assert [s.score for s in snippets] == sorted((s.score for s in snippets), reverse=True)


def test_recall_stems_and_limits(stocked):
    assert [s.text for s in stocked.recall("tell me about dogs")] == ["My dog is called Rex"]
    assert len(stocked.recall("dog paris python short", limit=2)) == 2
    assert stocked.recall("dog", limit=0) == []


def test_recall_of_stop_words_only_finds_nothing(stocked):
    assert stocked.recall("What is it that you do?") == []
    assert stocked.recall("") == []


@pytest.mark.parametrize(
    "text", ['"AND (', "NEAR", "NEAR(a b)", "*", "x:y", "col:dog", "dog*", "^dog", "a OR", ")(", "'"]
)
def test_fts_syntax_in_user_text_never_escapes(stocked, text):
    stocked.recall(text)
    stocked.forget(text)


def test_random_punctuation_never_breaks_recall(stocked):
    rng = random.Random(0)
    alphabet = string.punctuation + string.ascii_letters + " é中"
    for _ in range(300):
        stocked.recall("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30))))


def test_fts_query_quotes_content_words():
    assert fts_query("What about my DOG, Rex?") == '"dog" OR "rex"'
    assert fts_query("dog dog rex", "AND") == '"dog" AND "rex"'
    assert fts_query("a the _ __") == ""


def test_forget_by_id(stocked):
    rex = next(r.id for r in stocked.list() if "Rex" in r.text)
    assert stocked.forget(rex) == [rex]
    assert stocked.forget(str(rex)) == []
    assert all("Rex" not in r.text for r in stocked.list())


def test_forget_by_query_needs_every_word(stocked):
    assert stocked.forget("short pizza") == []
    (forgotten,) = stocked.forget("I prefer short answers")
    assert len(stocked.list()) == 3
    assert stocked.recall("short answers") == []
    assert forgotten not in [r.id for r in stocked.list()]


def test_forget_nothing_matching(stocked):
    assert stocked.forget("the") == []
    assert len(stocked.list()) == 4


# ---- commands in chat messages --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "kind", "text"),
    [
        (
            "What is the capital of France? Also, remember that I prefer short answers.",
            "remember",
            "I prefer short answers",
        ),
        ("remember that I prefer short answers", "remember", "I prefer short answers"),
        ("Please remember: my dog is called Rex.", "remember", "my dog is called Rex"),
        ("Can you please remember that I use vim? Thanks", "remember", "I use vim"),
        ("Remember my email is bob@example.com. Thanks!", "remember", "my email is bob@example.com"),
        ("Don't forget that I'm vegetarian!", "remember", "I'm vegetarian"),
        ("Hi.\nRemember that I live in Paris\nWhat's the weather?", "remember", "I live in Paris"),
        ("Okay, now please remember: “I like tea”.", "remember", "I like tea"),
        ("Forget that I prefer short answers.", "forget", "I prefer short answers"),
        ("Could you forget about my dog?", "forget", "my dog"),
        ("forget my email address", "forget", "my email address"),
        ("Please forget what I said about cats.", "forget", "cats"),
        ("Forget that I like tea and remember that I like coffee.", "forget", "I like tea"),
    ],
)
def test_parse_command(message, kind, text):
    command = parse_command(message)
    assert command is not None
    assert (command.kind, command.text) == (kind, text)
    start, end = command.span
    assert text in message[start:end]


@pytest.mark.parametrize(
    "message",
    [
        "What is the capital of France?",
        "Do you remember that movie we talked about?",
        "Remember to buy milk",
        "I forgot that.",
        "Forget it.",
        "remember that",
        "How do I make git forget a file?",
        "The function should remember that state between calls.",
    ],
)
def test_parse_command_ignores_ordinary_messages(message):
    assert parse_command(message) is None


def test_memory_command_validates_kind():
    with pytest.raises(ValueError, match="remember"):
        MemoryCommand(kind="recall", text="x")  # type: ignore[arg-type]
