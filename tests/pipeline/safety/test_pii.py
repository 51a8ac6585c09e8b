"""PII and secrets: what is found and redacted, what is left alone, and that hostile input stays fast."""

from __future__ import annotations

import time

import pytest

from jupyter_chatflow.pipeline.safety.pii import find_pii, luhn_ok, redact

FOUND = [
    ("write to ada.lovelace@example.com today", "write to [EMAIL] today"),
    ("x+tag@mail.co.uk.", "[EMAIL]."),
    ("call (555) 123-4567 now", "call [PHONE] now"),
    ("call 555-123-4567 or 555.123.4567", "call [PHONE] or [PHONE]"),
    ("us +1 555 123 4567, uk +44 20 7946 0958", "us [PHONE], uk [PHONE]"),
    ("visa 4111 1111 1111 1111 ok", "visa [CARD] ok"),
    ("visa 4111-1111-1111-1111", "visa [CARD]"),
    ("amex 378282246310005 and 3782 822463 10005", "amex [CARD] and [CARD]"),
    ("key sk-proj-abcdefghijklmnopqrstuvwx12 end", "key [SECRET] end"),
    ("aws AKIAIOSFODNN7EXAMPLE", "aws [SECRET]"),
    ("gh ghp_" + "a1" * 18, "gh [SECRET]"),
    ("slack xoxb-1234567890-abcdef", "slack [SECRET]"),
    ("google AIza" + "B" * 35, "google [SECRET]"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_X", "jwt [SECRET]"),
    ('password = "hunter2!" and DB_PASSWORD: s3cretpass', 'password = "[SECRET]" and DB_PASSWORD: [SECRET]'),
    ("api_key=abcdef123456", "api_key=[SECRET]"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nafter", "[SECRET]\nafter"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNz", "[SECRET]"),  # no END yet: to the end
]

LEFT_ALONE = [
    "the year 1999, 2024-01-15 and 10:30",
    "id 1234567890 and timestamp 1700000000000",
    "4111 1111 1111 1112 fails Luhn",  # 16 digits, grouped like a card, not a card
    "1234 5678 9012 3456",
    "4111111111111112",
    "small numbers 12, 555-1234 and 3.14159",
    "an @ sign alone, user@localhost, and a@b",
    "sk-short and the password field is empty",
    "ISBN 978-0-306-40615-7",
]


@pytest.mark.parametrize(("text", "expected"), FOUND)
def test_pii_is_redacted(text, expected):
    assert redact(text) == expected


@pytest.mark.parametrize("text", LEFT_ALONE)
def test_lookalikes_are_left_alone(text):
    assert find_pii(text) == []
    assert redact(text) == text


def test_spans_carry_category_replacement_and_offsets():
    text = "mail ada@example.com, card 4111 1111 1111 1111"
    spans = find_pii(text)
    assert [(s.category, text[s.start : s.end], s.replacement) for s in spans] == [
        ("pii:email", "ada@example.com", "[EMAIL]"),
        ("pii:card", "4111 1111 1111 1111", "[CARD]"),
    ]


def test_luhn():
    assert luhn_ok("4111111111111111") and luhn_ok("378282246310005")
    assert not luhn_ok("4111111111111112")


def test_full_width_and_invisible_characters_do_not_hide_pii():
    text = "ｊｏｈｎ＠ｅｘａｍｐｌｅ．ｃｏｍ or ada\u200b@example.com or ４１１１ １１１１ １１１１ １１１１"
    assert redact(text) == "[EMAIL] or [EMAIL] or [CARD]"


def test_lone_surrogates_and_replacement_characters_do_not_crash():
    broken = b"\xff\xfe\xc3 bad".decode("utf-8", "replace") + " \ud800 and \udcff " + "x\udc80@y.io"
    text = broken + " mail ada@example.com"
    assert redact(text) == broken + " mail [EMAIL]"
    surrogates = "\ud800" * 1000 + "ada@example.com" + "\udfff"
    assert redact(surrogates) == "\ud800" * 1000 + "[EMAIL]\udfff"


HOSTILE = {
    "letters": "a" * 1_000_000,
    "digits": "1" * 1_000_000,
    "digit groups": "1 " * 500_000,
    "dashes": "1-" * 500_000,
    "dots": "a." * 500_000,
    "at signs": "a@" * 500_000,
    "domains": "a@a." * 250_000,
    "plus": "+1" * 500_000,
    "key prefixes": "sk-eyJAKIAxox-" * 70_000,
    "pem headers": "-----BEGIN PRIVATE KEY-----" * 37_000,
    "assignments": "password=" * 110_000,
    "surrogates": "\ud800" * 1_000_000,
    "zero width": "a\u200b" * 500_000,
}


@pytest.mark.slow  # a time budget on a megabyte: seconds of CPU, and only meaningful on an idle machine
@pytest.mark.parametrize("name", HOSTILE)
def test_a_megabyte_of_hostile_text_is_scanned_in_well_under_a_second(name):
    started = time.perf_counter()
    redact(HOSTILE[name])
    assert time.perf_counter() - started < 0.5, name
