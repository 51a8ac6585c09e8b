"""Words as lemmas, and named word families (`Cue`s) found in a text: the vocabulary of the hazard frames.

A text is folded (`folding.fold`), lower-cased and cut into word tokens (letters, digits and underscores;
hyphens and other punctuation separate words, so "self-harm" is "self harm"); each token is lemmatized with
simplemma, so one entry
"make" matches "makes", "making" and "made", and "child" matches "children". A `Cue` is a family of phrases written
as plain words ("nerve agent", "step by step"), lemmatized the same way when the cue is built. In a phrase:

- `*` stands for any one word ("pick * lock": "pick the lock", "pick a lock"), `...` for up to three words
  ("make ... sick": "make him sick", "make my boss really sick");
- `<age>` for a number from 1 to 17 ("<age> year old"), `<num>` for any number;
- `<name>` for a capitalized word that does not start a sentence (a rough sign of a person's or a brand's name).

Number words count as numbers ("an eleven-year-old" is "<age> year old") and a misspelt word as the cue word it is
one edit from ("hopsital"): see `spelling`.

`exclude` phrases drop a hit that lies inside them ("bath bomb" is no bomb, "child process" no child). `Near`
pairs two cues in order, the second within a few words after the first ("kill" ... "my neighbour").

`find(text, cues)` returns every hit of every cue in one pass over the tokens (a dictionary look-up per word), so
a megabyte of text takes a fraction of a second.

>>> doc = find("He was making bombs.", (Cue(name="make", phrases=("make",)), Cue(name="bomb", phrases=("bomb",))))
>>> [(h.cue, h.start, h.end) for h in doc.hits]
[('make', 2, 3), ('bomb', 3, 4)]
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import simplemma

from .folding import Folded, fold, lower
from .spelling import NUMBERS, Repairs, number_value

__all__ = ["Cue", "Doc", "Hit", "Near", "compile_cues", "find", "lemma"]

_WORD = re.compile(r"\w+(?:['’]\w+)?")
_SENTENCE_END = frozenset(".!?\n")
_TITLES = frozenset({"mr", "mrs", "ms", "dr", "st", "prof", "sen", "rep"})
_SPECIAL = ("*", "...", "<age>", "<num>", "<name>")
_GAP = 3  # words a "..." may stand for
_AUXILIARIES = ("am", "is", "are", "was", "were", "be", "been", "being", "do", "does", "did", "done", "has", "have")
_MISREAD = ("ai", "carding", "nulled", "weed", "stranger", "media")  # simplemma makes them other words: "ai" -> "be"
_AS_IS = frozenset((*_AUXILIARIES, "had", "will", "would", *_MISREAD))  # auxiliaries keep their tense


@functools.lru_cache(maxsize=65536)
def lemma(word: str) -> str:
    """The lemma of a lower-case word ("making" -> "make"); "'s" is dropped, long or odd tokens stay as they are.

    Auxiliaries keep their form: "how did" (history) must not read as "how do" (a method).
    """
    if word.endswith(("'s", "’s")):
        word = word[:-2]
    if len(word) > 40 or not word.isalpha() or word in _AS_IS:
        return word
    return str(simplemma.lemmatize(word, lang="en")).lower()  # proper nouns come back capitalized


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cue:
    """A named family of phrases, each a few words (see the module docstring for `*`, `<age>`, `<num>`, `<name>`)."""

    name: str
    phrases: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    """Phrases in which a hit does not count ("bath bomb" for a "bomb" cue)."""
    patterns: tuple[str, ...] = ()
    """Regexes over the folded, lower-cased text, for what has a fixed shape rather than words (code such as
    `shutil.rmtree('/')`); a match is a hit over the words it touches. A match that starts inside a word is
    skipped, so patterns need no leading `\\b` (which would slow every pattern down)."""

    def compiled(self) -> tuple[tuple[str, ...], ...]:
        """The phrases as tuples of lemmas."""
        return _compile(self.phrases)

    def compiled_exclude(self) -> tuple[tuple[str, ...], ...]:
        """The exclude phrases as tuples of lemmas."""
        return _compile(self.exclude)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Near:
    """`first` followed by `second` within `gap` words (a verb and its object: "poison" ... "my husband")."""

    first: Cue
    second: Cue
    gap: int = 4

    @property
    def name(self) -> str:
        """Both cues' names, such as "violence>person"."""
        return f"{self.first.name}>{self.second.name}"

    def cues(self) -> tuple[Cue, Cue]:
        """The two cues this pair is made of."""
        return self.first, self.second


class Hit(NamedTuple):
    """Where a cue matched: token positions [start, end) and the character span in the original text."""

    cue: str
    start: int
    end: int
    char_start: int
    char_end: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class Doc:
    """A text's cue hits, in order of position; `by_cue` groups them by cue name."""

    text: str
    hits: tuple[Hit, ...]
    by_cue: dict[str, list[Hit]]

    def spans(self, cue: Cue | Near) -> list[Hit]:
        """The hits of a cue (or of a pair: from the first cue's start to the second cue's end)."""
        if isinstance(cue, Cue):
            return self.by_cue.get(cue.name, [])
        seconds = self.by_cue.get(cue.second.name, [])
        starts = [s.start for s in seconds]
        pairs = []
        for first in self.by_cue.get(cue.first.name, []):
            at = bisect.bisect_left(starts, first.end)
            second = seconds[at] if at < len(seconds) and starts[at] <= first.end + cue.gap else None
            if second is not None:
                pairs.append(Hit(cue=cue.name, start=first.start, end=second.end,
                                 char_start=first.char_start, char_end=second.char_end))  # fmt: skip
        return pairs

    def text_of(self, hit: Hit) -> str:
        """The original text of a hit."""
        return self.text[hit.char_start : hit.char_end]


def find(text: str, cues: Sequence[Cue]) -> Doc:
    """Every hit of every cue in `text` (cues must have distinct names), exclusions applied."""
    root, excludable, repairs, patterns = _compiled(cues)
    folded = fold(text)
    tokens = _tokens(folded.text, repairs)
    hits: list[Hit] = []
    for position, word in enumerate(tokens.lemmas):
        node, more = root.next.get(word), tokens.extra.get(position)
        if node is None and more is None:
            continue
        ends: dict[tuple[str, int], None] = {}
        for key in (word, *(more or ())):
            if (child := root.next.get(key)) is not None:
                _walk(tokens, child, position + 1, ends)
        for cue_name, end in ends:
            start, stop = tokens.starts[position], tokens.ends[end - 1]
            if folded.origin is not None:
                start, stop = folded.original(start, stop)
            hits.append(Hit(cue_name, position, end, start, stop))
    if patterns is not None:
        hits = sorted([*hits, *_pattern_hits(folded, tokens, patterns)], key=lambda h: (h.start, h.end))
    kept = _drop_excluded(hits, excludable)
    by_cue: dict[str, list[Hit]] = {}
    for hit in kept:
        by_cue.setdefault(hit.cue, []).append(hit)
    return Doc(text=text, hits=tuple(kept), by_cue=by_cue)


@dataclasses.dataclass
class _Node:
    """A trie node: the next words of the phrases through it, and the cues whose phrases end here."""

    next: dict[str, _Node] = dataclasses.field(default_factory=dict)
    ends: list[str] = dataclasses.field(default_factory=list)
    """Cue names ("!name" for an exclude phrase of cue "name")."""


@dataclasses.dataclass(frozen=True)
class _Tokens:
    """The words of a folded text: lemmas, character offsets, and the special keys of some (numbers, names)."""

    lemmas: list[str]
    starts: list[int]
    ends: list[int]
    extra: dict[int, tuple[str, ...]]

    def keys(self, at: int) -> tuple[str, ...]:
        """What the word at `at` can match: its lemma, its special keys and "*"."""
        return (self.lemmas[at], *self.extra.get(at, ()), "*")


def _walk(tokens: _Tokens, node: _Node, at: int, ends: dict[tuple[str, int], None]) -> None:
    """Record (cue, end) for every phrase through `node` (matched up to token `at`) that goes on matching."""
    for name in node.ends:
        ends[name, at] = None
    if not node.next:
        return
    if at < len(tokens.lemmas):
        for key in tokens.keys(at):
            if (child := node.next.get(key)) is not None:
                _walk(tokens, child, at + 1, ends)
    if (gap := node.next.get("...")) is not None:
        for skip in range(min(_GAP + 1, len(tokens.lemmas) - at)):
            for key in tokens.keys(at + skip):
                if (child := gap.next.get(key)) is not None:
                    _walk(tokens, child, at + skip + 1, ends)


_LEMMAS: dict[str, str] = {}
_NUMBER_WORDS = frozenset(NUMBERS)


def _tokens(text: str, repairs: Repairs | None = None) -> _Tokens:
    """The word tokens of folded text: lemmas, offsets, and "<num>", "<age>", "<name>" or a repair where they apply."""
    words = _WORD.findall(text)
    starts = [m.start() for m in _WORD.finditer(text)]
    if len(_LEMMAS) > 100_000:
        _LEMMAS.clear()
    for word in set(words).difference(_LEMMAS):
        _LEMMAS[word] = lemma(word.lower())
    lemmas = [_LEMMAS[word] for word in words]
    extra: dict[int, tuple[str, ...]] = {}
    for at, word in enumerate(words):
        base, previous = lemmas[at], lemmas[at - 1] if at else ""
        if base.isdigit():
            extra[at] = _number_keys(int(base) if len(base) <= 6 else 10**6)
        elif word[0].isupper() and not _pronoun_i(word) and not _starts_sentence(text, starts[at], previous):
            extra[at] = () if _code_identifier(text, starts[at], starts[at] + len(word)) else ("<name>",)
        elif base in _NUMBER_WORDS:
            value = number_value(lemmas, at)
            extra[at] = () if value is None else (str(value), *_number_keys(value))
        elif repairs is not None and (fixed := repairs.fix(word.lower())):
            # (not in code: `dataclasses.asdict(` is no misspelt "addict")
            extra[at] = () if _code_identifier(text, starts[at], starts[at] + len(word)) else (fixed,)
    ends = [start + len(word) for start, word in zip(starts, words, strict=True)]
    return _Tokens(lemmas=lemmas, starts=starts, ends=ends, extra=extra)


def _pronoun_i(word: str) -> bool:
    """ "I" and its contractions ("I'm", "I'd", "I've", "I'll"): capitalized, but nobody's name."""
    return word.split("'")[0].split("\u2019")[0] == "I"


def _number_keys(value: int) -> tuple[str, ...]:
    return ("<num>", "<age>") if 0 < value < 18 else ("<num>",)


_PYTHON_CONSTANTS = frozenset({"None", "True", "False"})  # `x: float | None = None` names nobody


def _code_identifier(text: str, start: int, end: int) -> bool:
    """Whether a word is a name in pasted code, not prose (a capitalized one no person's, a near-miss no
    misspelling): a return type (`-> Response`), or glued to a call, subscript or attribute (`Chat(`, `List[`,
    `Response.from_dicts`, `asdict(`); prose puts a space there."""
    if text[start:end] in _PYTHON_CONSTANTS:
        return True
    after = text[end : end + 2]
    attribute = after[:1] == "." and (after[1:].isalnum() or after[1:] == "_")  # not a sentence's full stop
    return text[max(0, start - 3) : start].rstrip(" ").endswith("->") or after[:1] in ("(", "[") or attribute


def _starts_sentence(text: str, start: int, previous: str) -> bool:
    """Whether the word at `start` begins the text or a sentence (after "Mr." a name does not)."""
    before = text[max(0, start - 12) : start].rstrip(" \t\"'“‘([")
    if not before:
        return start <= 12
    return (before[-1] in _SENTENCE_END and previous not in _TITLES) or before[-1] == ":"


def _drop_excluded(hits: list[Hit], excludable: frozenset[str]) -> list[Hit]:
    """The hits that lie inside no exclude phrase of their own cue (exclude hits are named "!cue").

    Each hit is compared only with the exclude hits that start at most one exclude-length before it (bisect), so
    a text full of exclude phrases ("I hope this finds you well" a thousand times) stays linear.
    """
    excluded: dict[str, _Spans] = {}
    for hit in hits:
        if hit.cue[0] == "!":
            excluded.setdefault(hit.cue[1:], _Spans()).add(hit)
    if not excluded:
        return hits
    return [h for h in hits if h.cue[0] != "!" and (h.cue not in excluded or not excluded[h.cue].cover(h))]


class _Spans:
    """Exclude hits of one cue, in order of start (hits come sorted by start)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.longest = 0

    def add(self, hit: Hit) -> None:
        self.starts.append(hit.start)
        self.ends.append(hit.end)
        self.longest = max(self.longest, hit.end - hit.start)

    def cover(self, hit: Hit) -> bool:
        """Whether one of these spans contains `hit`."""
        lo = bisect.bisect_left(self.starts, hit.start - self.longest)
        hi = bisect.bisect_right(self.starts, hit.start)
        return any(hit.end <= self.ends[at] for at in range(lo, hi))


@functools.lru_cache(maxsize=256)
def _compile(phrases: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    compiled = []
    for phrase in phrases:
        words = tuple(w if w in _SPECIAL else lemma(w) for w in _words(phrase))
        if not words or words[0] in ("*", "...") or words[-1] == "...":
            raise ValueError(f"A cue phrase must start with a word: {phrase!r}")
        compiled.append(words)
    return tuple(compiled)


def _words(phrase: str) -> Iterable[str]:
    for part in phrase.lower().split():
        yield from ([part] if part in _SPECIAL else _WORD.findall(part))


_Patterns = tuple[re.Pattern[str], tuple[str, ...]] | None
_COMPILED: dict[int, tuple[Sequence[Cue], _Node, frozenset[str], Repairs, _Patterns]] = {}


def compile_cues(cues: Sequence[Cue]) -> tuple[_Node, frozenset[str], Repairs, _Patterns]:
    """The trie of `cues`, the names of those with exclude phrases, the repairs towards their words, and one regex
    of every cue's patterns (a named group per cue).

    Remembered per cues object: the first `find` with a cue set builds it (call this to build it ahead).
    """
    known = _COMPILED.get(id(cues))
    if known is None or known[0] is not cues:
        if len(_COMPILED) > 64:
            _COMPILED.clear()
        excludable = frozenset(c.name for c in cues if c.exclude)
        vocabulary = {w for c in cues for phrase in c.compiled() for w in phrase if w not in _SPECIAL}
        with_patterns = [c for c in cues if c.patterns]
        named = [f"(?P<p{i}>{'|'.join(c.patterns)})" for i, c in enumerate(with_patterns)]
        patterns = (re.compile("|".join(named)), tuple(c.name for c in with_patterns)) if named else None
        known = _COMPILED[id(cues)] = (cues, _trie(cues), excludable, Repairs(vocabulary), patterns)
    return known[1], known[2], known[3], known[4]


def _inside_word(text: str, at: int) -> bool:
    """Whether position `at` continues a word (both it and the character before are word characters)."""
    return (text[at].isalnum() or text[at] == "_") and (text[at - 1].isalnum() or text[at - 1] == "_")


def _pattern_hits(folded: Folded, tokens: _Tokens, patterns: tuple[re.Pattern[str], tuple[str, ...]]) -> list[Hit]:
    """The pattern cues' matches, as hits over the words they touch (group "p3" is the fourth pattern cue)."""
    regex, cues = patterns
    hits = []
    lowered = lower(folded.text)
    for found in regex.finditer(lowered):
        group, at = found.lastgroup, found.start()
        if group is None or (at and _inside_word(lowered, at)):
            continue
        first = bisect.bisect_right(tokens.ends, found.start())
        last = max(first + 1, bisect.bisect_left(tokens.starts, found.end()))
        start, stop = found.span()
        if folded.origin is not None:
            start, stop = folded.original(start, stop)
        hits.append(Hit(cues[int(group[1:])], first, last, start, stop))
    return hits


_compiled = compile_cues


def _trie(cues: Sequence[Cue]) -> _Node:
    """One trie of every phrase of every cue (exclude phrases end in "!name")."""
    root = _Node()
    for cue in cues:
        for names, phrases in ((cue.name, cue.compiled()), ("!" + cue.name, cue.compiled_exclude())):
            for phrase in phrases:
                node = root
                for word in phrase:
                    node = node.next.setdefault(word, _Node())
                if names not in node.ends:
                    node.ends.append(names)
    return root
