"""Spelling the lexicon can read: number words as numbers, and misspelt words as the cue word they were meant to be.

- Number words count as numbers: "eleven" is read as "11" (so "an eleven-year-old" matches "<age> year old"),
  "twenty-two" as 22 (its "two" is no age of its own), "forty" as 40.
- A word that is not English (simplemma does not know it) and is one edit (a letter dropped, added, changed, or
  two swapped) away from exactly one word of the cues' vocabulary is also read as that word: "hopsital" as
  "hospital", "pasword" as "password", "twise" as "twice". Only words of 5 to 24 letters are repaired, and only
  towards vocabulary words of four letters or more, so short words, names and long tokens are left alone.

>>> number_value(["twenty", "two"], 1), number_value(["an", "eleven"], 1)
(None, 11)
>>> Repairs(["hospital", "password"]).fix("hopsital")
'hospital'
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

import simplemma

__all__ = ["NUMBERS", "Repairs", "number_value"]

_UNITS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
_UNITS += "seventeen eighteen nineteen"
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
NUMBERS: dict[str, int] = {word: value for value, word in enumerate(_UNITS.split())} | _TENS | {"hundred": 100}
"""Number words and their values."""


def number_value(words: Sequence[str], at: int) -> int | None:
    """The value of the number word at `at` (lower case), counting a tens word before a unit ("twenty two": 22).

    None for a unit that only completes a tens word (its value is the tens word's), and for words that are no
    numbers.
    """
    value = NUMBERS.get(words[at])
    if value is None or (0 < value < 10 and at and words[at - 1] in _TENS):
        return None
    following = NUMBERS.get(words[at + 1], 10) if at + 1 < len(words) else 10
    return value + following if words[at] in _TENS and following < 10 else value


class Repairs:
    """One-edit repairs of unknown words towards a vocabulary (a symmetric-delete index: fast, no dictionary)."""

    MIN_WORD = 5
    MAX_WORD = 24
    """Longer tokens (hashes, runs of one letter) are not words: repairing them would cost their length squared."""
    MIN_TARGET = 4

    def __init__(self, vocabulary: Iterable[str]):
        self._index: dict[str, set[str]] = {}
        self._fixed: dict[str, str | None] = {}
        self.vocabulary = frozenset(vocabulary)
        for word in self.vocabulary:
            if len(word) >= self.MIN_TARGET and word.isalpha():
                for variant in (word, *_deletes(word)):
                    self._index.setdefault(variant, set()).add(word)

    def fix(self, word: str) -> str | None:
        """The one vocabulary word `word` is a misspelling of, or None (known words and ties are not repaired)."""
        fixed = self._fixed.get(word, _UNSET)
        if fixed == _UNSET:
            if len(self._fixed) > 100_000:
                self._fixed.clear()
            fixed = self._fixed[word] = self._find(word) if self.MIN_WORD <= len(word) <= self.MAX_WORD else None
        return fixed

    def _find(self, word: str) -> str | None:
        if word in self.vocabulary or not word.isalpha() or not self._index:
            return None
        found = set().union(*(self._index.get(v, ()) for v in (word, *_deletes(word))))
        found.discard(word)
        if len(found) != 1 or _known(word):
            return None
        return found.pop()


_UNSET = ""
"""Not looked up yet (a repair is never the empty word)."""


def _deletes(word: str) -> set[str]:
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


@functools.lru_cache(maxsize=65536)
def _known(word: str) -> bool:
    return bool(simplemma.is_known(word, lang="en"))
