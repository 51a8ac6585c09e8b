"""Template placeholders ("[Your Name]", "{first_name}", "<Shipping Address>") are blanked before the frames read.

A letter or an e-mail template names the fields someone will fill in: "[Email Address]" or "[Your Last Name]" is
nobody's data, yet read as words it is private data ("address") and a person (two capitalized words). A
placeholder is a bracketed span (`[…]`, `{…}`, `{{…}}`, `<…>`) on one line, of at most six words, one of which
names a field (name, address, e-mail, phone, date, company…) and none a third person: "[her home address]" stays
text. A bracket still open at the end of the text is blanked while its words are capitalized ("[Your Last" while
an answer streams: the output gate scans before the "]" has come).

Blanks are spaces of the same length, so what the frames find keeps the text's offsets.

>>> blank_placeholders("Dear [Recipient's Name], ships to {shipping_address}; [her address]")
'Dear                   , ships to                   ; [her address]'
"""

from __future__ import annotations

import re

__all__ = ["FIELDS", "blank_placeholders"]


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


FIELDS = _set(
    "name names surname address addresses email mail phone number mobile date time day company organization "
    "organisation business title position role job city state zip postcode code country recipient sender "
    "signature contact details information info website url link department school team street location "
    "amount topic project event"
)
"""Words that name a template's field."""

_THIRD = _set("he him his she her hers they them their theirs")
_CONNECTORS = _set("of or and the a an s")
_MAX_WORDS = 6
_CLOSED = re.compile(r"\{\{[^{}\n]{1,60}\}\}|\[[^\[\]\n]{1,60}\]|\{[^{}\n]{1,60}\}|<[^<>\n=/]{1,60}>")
_OPEN = re.compile(r"[\[{<][^\[\]{}<>\n]{0,60}\Z")
_WORD = re.compile(r"[^\W_]+")  # snake_case and kebab-case split into words


def blank_placeholders(text: str) -> str:
    """`text` with every template placeholder replaced by spaces (see the module docstring)."""
    if not any(c in text for c in "[{<"):
        return text
    blanked = _CLOSED.sub(lambda m: " " * len(m[0]) if _is_field(m[0]) else m[0], text)
    tail = max(0, len(blanked) - 62)  # an open bracket counts only within the last 60 characters
    return blanked[:tail] + _OPEN.sub(lambda m: " " * len(m[0]) if _is_open_field(m[0]) else m[0], blanked[tail:])


def _words(span: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(span)]


def _is_field(span: str) -> bool:
    words = _words(span)
    return 0 < len(words) <= _MAX_WORDS and not _THIRD.intersection(words) and bool(FIELDS.intersection(words))


def _is_open_field(span: str) -> bool:
    words = _WORD.findall(span)
    return len(words) <= _MAX_WORDS and all(w[0].isupper() or w.lower() in _CONNECTORS for w in words)
