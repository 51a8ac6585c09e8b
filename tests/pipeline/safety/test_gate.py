"""The streaming output gate: what it shows equals redacting the whole answer, however the stream is split."""

from __future__ import annotations

import random

import pytest

from jupyter_chatflow.events import SafetyDecision
from jupyter_chatflow.pipeline.safety import OutputGate, PiiGuard, Release, RuleGuard, SafetyPolicy, redact

ANSWERS = [
    "Sure! Write to ada.lovelace@example.com or call (555) 123-4567 before noon.",
    "Your card 4111 1111 1111 1111 is on file; 4111 1111 1111 1112 is not a card. Mail bob@mail.example.org.",
    "Keys: sk-proj-abcdefghijklmnopqrstuvwx12, AKIAIOSFODNN7EXAMPLE and password = 'hunter2!!' end.",
    "Call +44 20 7946 0958, or +1 555 123 4567; the year 1999 and 2024-01-15 stay. Amex 3782 822463 10005 too.",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nq83Jd0zQ==\n-----END RSA PRIVATE KEY-----\nThat was a key.",
    "ｆｕｌｌ＠ｗｉｄｔｈ．ｃｏｍ and a\u200bzero@width.io, 4111\u00a01111\u00a01111\u00a01111 — done\ud800 ok.",
    "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U fin",
    "no pii here at all, just 12 apples and 1,000 pears at 10:30 on 3/4.",
]


def stream(gate: OutputGate, pieces: list[str]) -> list[Release | SafetyDecision]:
    """Feed the pieces as tokens 0, 1, 2… and close."""
    out = [item for index, piece in enumerate(pieces) for item in gate.feed(index, piece)]
    return out + gate.close()


def random_pieces(text: str, rng: random.Random) -> list[str]:
    """Cut `text` into pieces of 1–7 characters, like tokens of a stream."""
    pieces, at = [], 0
    while at < len(text):
        size = rng.randint(1, 7)
        pieces.append(text[at : at + size])
        at += size
    return pieces


def word_pieces(text: str) -> list[str]:
    """Cut `text` the way BPE tokens usually come: a word with its leading space."""
    pieces, word = [], ""
    for char in text:
        if char == " " and word.strip():
            pieces.append(word)
            word = ""
        word += char
    return [*pieces, word]


def shown(items: list[Release | SafetyDecision]) -> str:
    return "".join(item.text for item in items if isinstance(item, Release))


@pytest.mark.parametrize("answer", ANSWERS)
def test_released_text_equals_redacting_the_whole_answer(answer):
    rng = random.Random(len(answer))
    splits = [word_pieces(answer), list(answer), *(random_pieces(answer, rng) for _ in range(25))]
    for pieces in splits:
        items = stream(OutputGate(guards=(PiiGuard(),)), pieces)
        assert shown(items) == redact(answer), pieces
        indices = [item.index for item in items if isinstance(item, Release)]
        assert indices == list(range(len(pieces)))  # every token released once, in order


def test_splits_inside_an_email_and_a_card_number_hide_them_until_complete():
    gate = OutputGate(guards=(PiiGuard(),))
    assert shown(gate.feed(0, "Mail")) == ""  # the last word is held until the next one starts
    assert shown(gate.feed(1, " ada")) == "Mail"
    assert shown(gate.feed(2, "@exa")) == ""  # the email may still be growing: held
    assert shown(gate.feed(3, "mple.com")) == ""
    items = gate.feed(4, " or")
    assert [(r.text, r.redacted) for r in items if isinstance(r, Release)] == [
        (" [EMAIL]", True), ("", True), ("", True),
    ]  # fmt: skip
    for index, piece in enumerate([" pay", " 4111", " 1111", " 1111", " 1111"], start=5):
        assert shown(gate.feed(index, piece)) in (" or", " pay", "")
    assert shown(gate.feed(10, " today")) == " [CARD]"
    assert shown(gate.close()) == " today"


def test_a_chunk_with_findings_comes_with_one_decision_before_its_tokens():
    items = stream(OutputGate(guards=(PiiGuard(),)), word_pieces("write to ada@example.com now please"))
    decisions = [i for i in items if isinstance(i, SafetyDecision)]
    assert len(decisions) == 1
    (decision,) = decisions
    assert (decision.layer, decision.action, decision.categories) == ("output", "redact", ("pii:email",))
    assert (decision.spans[0].start, decision.spans[0].end) == (9, 24)  # offsets in the raw answer
    assert decision.sequence_number == -1 and decision.turn_id == ""  # the Emitter stamps these
    assert items.index(decision) < next(i for i, item in enumerate(items) if getattr(item, "redacted", False))


def test_a_blocking_match_stops_the_stream_and_hides_the_rest():
    gate = OutputGate(guards=(RuleGuard(rules=()), PiiGuard()))
    items = stream(gate, word_pieces("Here is how to make a pipe bomb: first take some pipes and more text"))
    blocks = [i for i in items if isinstance(i, SafetyDecision) and i.action == "block"]
    assert len(blocks) == 1 and gate.blocked == blocks[0]
    assert blocks[0].categories == ("S9",) and blocks[0].replacement
    assert "bomb" not in shown(items)
    assert gate.feed(99, " more") == [] and gate.close() == []
    assert gate.summary().action == "block"


def test_flags_are_reported_once_and_text_is_unchanged():
    answer = "Honestly the election was rigged, people say, and more words follow here."
    items = stream(OutputGate(guards=(RuleGuard(rules=()),)), word_pieces(answer))
    decisions = [i for i in items if isinstance(i, SafetyDecision)]
    assert [d.action for d in decisions] == ["flag"] and decisions[0].categories == ("S13",)
    assert shown(items) == answer


def test_the_gate_never_holds_more_than_max_hold_characters():
    gate = OutputGate(guards=(PiiGuard(),), max_hold=64)
    longest = 0
    for index in range(400):  # no whitespace at all: nothing is a safe place to cut
        gate.feed(index, "x")
        longest = max(longest, len(gate._pending))
    assert longest <= 65


def test_a_private_key_is_held_whole_and_redacted_even_when_long():
    key = "-----BEGIN PRIVATE KEY-----\n" + "\n".join("A" * 64 for _ in range(30)) + "\n-----END PRIVATE KEY-----"
    answer = f"Here: {key}\nDone."
    items = stream(OutputGate(guards=(PiiGuard(),)), word_pieces(answer.replace("\n", " \n")))
    assert shown(items) == redact(answer.replace("\n", " \n")) == "Here: [SECRET] \nDone."


def test_more_text_for_the_same_token_is_joined():
    gate = OutputGate(guards=(PiiGuard(),))
    items = [*gate.feed(0, "Hello"), *gate.feed(0, " there"), *gate.feed(1, " friend"), *gate.close()]
    assert [(r.index, r.text) for r in items if isinstance(r, Release)] == [(0, "Hello there"), (1, " friend")]


def test_without_guards_text_passes_straight_through():
    gate = SafetyPolicy(mode="input").output_gate()
    assert gate.feed(0, "ada@example.com") == [Release(index=0, text="ada@example.com")]
    assert gate.close() == [] and gate.summary().action == "allow"


def test_summary_allows_a_clean_answer_and_times_the_scans():
    gate = SafetyPolicy().output_gate()
    items = stream(gate, word_pieces("A clean answer about <b>bold</b> text and nothing else."))
    assert not any(isinstance(i, SafetyDecision) for i in items)
    summary = gate.summary()
    assert (summary.layer, summary.action) == ("output", "allow") and summary.latency_ms > 0


def test_html_and_script_in_the_answer_are_flagged_not_altered():
    answer = 'Try <script>alert("x")</script> or <img src=x onerror=alert(1)> in a page.'
    items = stream(SafetyPolicy().output_gate(), word_pieces(answer))
    assert shown(items) == answer
    assert {c for i in items if isinstance(i, SafetyDecision) for c in i.categories} == {"markup"}


def test_lone_surrogates_and_replacement_characters_stream_safely():
    answer = "bad \ud800 bytes \udcff and " + b"\xff\xfe ok".decode("utf-8", "replace") + " mail a@b.co end"
    items = stream(SafetyPolicy().output_gate(), list(answer))
    assert shown(items) == redact(answer) == answer.replace("a@b.co", "[EMAIL]")
