"""Find and redact personal data and secrets: emails, phone numbers, payment cards, API keys, private keys.

`find_pii(text)` returns the spans, `redact(text)` the text with each span replaced by a label such as "[EMAIL]".
Both are plain functions so the telemetry log can use them too.

Every pattern is linear-time on any input: each starts behind a look-behind boundary (so a long run of letters or
digits is tried once, not at every offset), every repeat is bounded, and no repeat can match the same text two
ways. Patterns run on the folded text (`folding.fold`), so full-width digits or zero-width spaces do not hide a
number. What each kind matches:

- email: local@domain.tld, up to 64 characters before the @.
- phone: "+" and 8–15 digits with optional single separators (international), or US style with separators:
  "(555) 123-4567", "555-123-4567", "+1 555 123 4567". Bare digit runs (years, ids, timestamps) are not phones.
- card: 13–19 digits, contiguous or in 4-4-4-4(-3) / 4-6-5 groups split by one space or dash, starting with an
  issuer digit 2–6, and passing the Luhn check. A number that fails Luhn is not flagged.
- secret: OpenAI/Anthropic "sk-…", AWS "AKIA…/ASIA…", GitHub "ghp_…/github_pat_…", Slack "xox…-", Google "AIza…",
  JWTs, the value of `password=`/`api_key:`-style assignments (the key name stays), and PEM private keys from the
  BEGIN line to the END line (to the end of the text while no END line has come).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator

from jupyter_chatflow.events import Span

from .folding import IGNORABLE, fold

__all__ = ["PII_CATEGORIES", "REPLACEMENTS", "find_pii", "holds_across", "luhn_ok", "redact", "redact_spans", "resolve"]

REPLACEMENTS = {"pii:email": "[EMAIL]", "pii:phone": "[PHONE]", "pii:card": "[CARD]", "pii:secret": "[SECRET]"}
PII_CATEGORIES = tuple(REPLACEMENTS)
_PRIORITY = {"pii:secret": 0, "pii:card": 1, "pii:email": 2, "pii:phone": 3}


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Pattern:
    """One detector: a regex, which group is the span, a check on the matched text, and a cheap pre-filter."""

    category: str
    regex: re.Pattern[str]
    group: int = 0
    valid: Callable[[str], bool] = lambda _text: True
    needs: tuple[str, ...] = ()
    """The regex is only run when the text contains one of these (lower-cased text if `regex` ignores case)."""


def luhn_ok(digits: str) -> bool:
    """Whether a string of digits passes the Luhn checksum used by payment cards."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char) * (2 if position % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def _card_ok(text: str) -> bool:
    digits = re.sub(r"[ -]", "", text)
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_ok(digits)


def _phone_ok(text: str) -> bool:
    return 8 <= sum(c.isdigit() for c in text) <= 15


_D = "[0-9]"
_DIGITS = tuple("0123456789")
_PATTERNS = (
    _Pattern(
        category="pii:email",
        regex=re.compile(
            r"(?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,24}(?![\w-])"
        ),
        needs=("@",),
    ),
    _Pattern(
        category="pii:phone",
        regex=re.compile(rf"(?<![\w+])\+{_D}{{1,3}}(?:[ .-]?\({_D}{{1,4}}\))?(?:[ .-]?{_D}){{6,14}}(?![ .-]?{_D})"),
        valid=_phone_ok,
        needs=("+",),
    ),
    _Pattern(
        category="pii:phone",
        regex=re.compile(
            rf"(?<![\w+(])(?<!{_D}[ .-])(?:\+?1[ .-]?)?(?:\({_D}{{3}}\)[ .-]?|{_D}{{3}}[ .-]){_D}{{3}}[ .-]{_D}{{4}}"
            rf"(?![ .-]?{_D})"
        ),
        needs=_DIGITS,
    ),
    _Pattern(
        category="pii:card",
        regex=re.compile(
            rf"(?<![0-9])(?:{_D}{{13,19}}|{_D}{{4}}([ -]){_D}{{4}}\1{_D}{{4}}\1{_D}{{4}}(?:\1{_D}{{3}})?"
            rf"|{_D}{{4}}([ -]){_D}{{6}}\2{_D}{{4,5}})(?![0-9])"
        ),
        valid=_card_ok,
        needs=_DIGITS,
    ),
    _Pattern(category="pii:secret", regex=re.compile(r"(?<![\w-])sk-[A-Za-z0-9_-]{20,512}"), needs=("sk-",)),
    _Pattern(
        category="pii:secret",
        regex=re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"),
        needs=("AKIA", "ASIA"),
    ),
    _Pattern(
        category="pii:secret",
        regex=re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"),
        needs=("gh",),
    ),
    _Pattern(
        category="pii:secret", regex=re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,250}"), needs=("xox",)
    ),
    _Pattern(category="pii:secret", regex=re.compile(r"(?<![\w-])AIza[0-9A-Za-z_-]{35}"), needs=("AIza",)),
    _Pattern(
        category="pii:secret",
        regex=re.compile(r"(?<![\w-])eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{8,4096}"),
        needs=("eyJ",),
    ),
    _Pattern(
        category="pii:secret",
        regex=re.compile(
            r"(?<![A-Za-z0-9])(?:password|passwd|pwd|passphrase|secret|api[_-]?key|access[_-]?key|secret[_-]?key"
            r"|private[_-]?key|client[_-]?secret|access[_-]?token|auth[_-]?token)[\"']?[ \t]{0,3}[:=][ \t]{0,3}[\"']?"
            r"([^\s\"',;]{6,256})",
            re.IGNORECASE,
        ),
        group=1,
        needs=("pass", "pwd", "secret", "key", "token"),
    ),
)
_PEM_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_HEADER_TAIL = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}$")


def find_pii(text: str) -> list[Span]:
    """Spans of personal data and secrets in `text`, sorted and non-overlapping, each with its replacement."""
    folded = fold(text)
    found = [*_pattern_spans(folded.text), *_pem_spans(folded.text)]
    spans = []
    for start, end, category in _non_overlapping(found):
        start, end = folded.original(start, end)
        spans.append(Span(start=start, end=end, category=category, replacement=REPLACEMENTS[category]))
    return spans


def redact(text: str) -> str:
    """`text` with every email, phone, card number and secret replaced by "[EMAIL]", "[PHONE]", "[CARD]", "[SECRET]"."""
    return redact_spans(text, find_pii(text))


def redact_spans(text: str, spans: Iterable[Span]) -> str:
    """`text` with each span replaced by its replacement; of overlapping spans the first (then longest) wins."""
    parts, done = [], 0
    for span in resolve(spans):
        parts += [text[done : span.start], span.replacement]
        done = span.end
    parts.append(text[done:])
    return "".join(parts)


def resolve(spans: Iterable[Span]) -> list[Span]:
    """The spans sorted by start, without overlaps: of overlapping spans the first, then longest, wins."""
    by_range = {(s.start, s.end, s.category): s for s in spans}
    return [by_range[key] for key in _non_overlapping(by_range)]


def holds_across(text: str, start: int, end: int) -> bool:
    """Whether a PII match could run across the whitespace `text[start:end]` (needs the character after it).

    Matches cross whitespace only between digit groups ("555 123", "(555) 123"), around ":"/"=" in an
    assignment ("password = x"), and inside a private-key block, which `find_pii` spans as a whole.
    """
    left, right = _visible_before(text, start), text[end : end + 1]
    if end - start == 1 and (left.isdigit() or left == ")") and (right.isdigit() or right == "("):
        return True
    return left in (":", "=") or right in (":", "=") or bool(_PEM_HEADER_TAIL.search(text, max(0, start - 60), start))


def _visible_before(text: str, index: int) -> str:
    """The last character before `index` that is not an invisible format character ("" if none)."""
    index -= 1
    while index >= 0 and text[index] in IGNORABLE:
        index -= 1
    return text[index] if index >= 0 else ""


def _pattern_spans(text: str) -> Iterator[tuple[int, int, str]]:
    lowered = text.lower()
    for pattern in _PATTERNS:
        haystack = lowered if pattern.regex.flags & re.IGNORECASE else text
        if pattern.needs and not any(needle in haystack for needle in pattern.needs):
            continue
        for match in pattern.regex.finditer(text):
            if pattern.valid(match.group(pattern.group)):
                yield (*match.span(pattern.group), pattern.category)


def _pem_spans(text: str) -> Iterator[tuple[int, int, str]]:
    """Private-key blocks, BEGIN line to END line; the END search moves forward only, so this stays linear."""
    end_at = -1
    for begin in _PEM_BEGIN.finditer(text):
        if end_at < begin.end():
            end = _PEM_END.search(text, begin.end())
            end_at = end.end() if end else len(text) + 1
        yield begin.start(), min(end_at, len(text)), "pii:secret"


def _non_overlapping(spans: Iterable[tuple[int, int, str]]) -> Iterator[tuple[int, int, str]]:
    """(start, end, category) in order of start; of overlapping spans the earliest, longest, most specific wins."""
    order = sorted((start, -end, _PRIORITY.get(category, 9), category) for start, end, category in spans)
    done = -1
    for start, negative_end, _priority, category in order:
        if start >= done:
            done = -negative_end
            yield start, done, category
