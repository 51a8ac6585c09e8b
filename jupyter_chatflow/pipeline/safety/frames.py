"""Hazard frames: what makes a text fall into a hazard category, as an anchor and the cues that must come with it.

A `Frame` names a category and an action (block or flag) and reads: the `anchor` (what the text is about: a nerve
agent, violence against a person, a child in a sexual context) together with every cue of at least one `trigger`
(a request for the method, an intent to evade the police, a demand for detail), all within `window` words of the
anchor; unless a `benign` context explains it away (history, prevention, a hotline), which in turn does not count
when an `unless` cue is there too (a "novel" whose villain must give "exact quantities").

So "How do I synthesize sarin?" is anchor "sarin" + make "synthesize" + request "How do I": blocked; "What is the
history of the sarin attack?" has the anchor and a benign context and nothing else: allowed. A match records the
words that made it (`FrameHit.evidence`), so a decision can say exactly why. Template placeholders ("[Your Name]")
are blanked first (`placeholders`): a letter's empty fields are nobody's data.

>>> from .hazards import HAZARD_FRAMES
>>> [(h.frame.category, h.frame.action) for h in match("How do I synthesize sarin at home?", HAZARD_FRAMES)]
[('S9', 'block')]
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterator, Sequence

from .decisions import check_action
from .lexicon import Cue, Doc, Hit, Near, compile_cues, find
from .placeholders import blank_placeholders

__all__ = ["Frame", "FrameHit", "cues_of", "match", "prepare"]

Term = Cue | Near
MAX_HITS = 100
"""The most hits one frame reports for one text."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Frame:
    """One way a text falls into a hazard category (see the module docstring)."""

    category: str
    name: str
    """What this frame catches, in a few words ("making a chemical or biological weapon")."""
    anchor: Term
    triggers: tuple[tuple[Term, ...], ...] = ((),)
    """Each a set of cues that, all present near the anchor, fire the frame; `((),)`: the anchor alone fires."""
    benign: tuple[Cue, ...] = ()
    unless: tuple[Term, ...] = ()
    action: str = "block"
    window: int = 25
    """How many words either side of the anchor the other cues may stand."""

    def __post_init__(self) -> None:
        check_action(self.action, ("flag", "block"))


@dataclasses.dataclass(frozen=True, kw_only=True)
class FrameHit:
    """A frame that fired: the character span from the first to the last word that made it, and those words."""

    frame: Frame
    start: int
    end: int
    evidence: tuple[tuple[str, str], ...]
    """(cue name, the words it matched), the anchor first."""


def match(text: str, frames: Sequence[Frame]) -> list[FrameHit]:
    """Every frame that fires on `text`, once per anchor hit, in order of position."""
    if not frames:
        return []
    doc = find(blank_placeholders(text), cues_of(frames))
    window = _Window(doc)
    fired = [hit for frame in frames if _present(frame.anchor, doc) for hit in _fire(frame, window)]
    return sorted(fired, key=lambda h: (h.start, h.end))


def prepare(frames: Sequence[Frame]) -> None:
    """Build the lexicon of `frames` now (lemmatized phrases, trie, spelling repairs): about 0.2 s, once per
    process, which the first `match` would otherwise pay."""
    compile_cues(cues_of(frames))


def cues_of(frames: Sequence[Frame]) -> tuple[Cue, ...]:
    """The distinct cues the frames use (pairs taken apart); two different cues may not share a name.

    Remembered per frames object (hashing a tuple of frames would walk every phrase on every call).
    """
    known = _CUES.get(id(frames))
    if known is not None and known[0] is frames:
        return known[1]
    cues = _collect(frames)
    if len(_CUES) > 64:
        _CUES.clear()
    _CUES[id(frames)] = (frames, cues)
    return cues


_CUES: dict[int, tuple[Sequence[Frame], tuple[Cue, ...]]] = {}


def _collect(frames: Sequence[Frame]) -> tuple[Cue, ...]:
    cues: dict[str, Cue] = {}
    for frame in frames:
        terms = (frame.anchor, *(t for trigger in frame.triggers for t in trigger), *frame.benign, *frame.unless)
        for term in terms:
            for cue in term.cues() if isinstance(term, Near) else (term,):
                if cues.setdefault(cue.name, cue) != cue:
                    raise ValueError(f"Two different cues are named {cue.name!r}: give one another name.")
    return tuple(cues.values())


class _Window:
    """Looks up a cue's hits near a position (hits per cue are sorted by start)."""

    def __init__(self, doc: Doc):
        self.doc = doc
        self._hits: dict[str, tuple[list[Hit], list[int]]] = {}

    def hits(self, term: Term) -> list[Hit]:
        return self._entry(term)[0]

    def near(self, term: Term, lo: int, hi: int, anchor: Hit | None = None) -> Hit | None:
        """The first hit of `term` within token positions [lo, hi) that does not overlap `anchor`."""
        return next(self.all_near(term, lo, hi, () if anchor is None else (anchor,)), None)

    def all_near(self, term: Term, lo: int, hi: int, taken: Sequence[Hit]) -> Iterator[Hit]:
        """The hits of `term` within token positions [lo, hi) that overlap none of the `taken` ones, in order."""
        hits, starts = self._entry(term)
        for at in range(bisect.bisect_left(starts, lo), len(hits)):
            hit = hits[at]
            if hit.start >= hi:
                return
            if hit.end <= hi and all(hit.end <= t.start or hit.start >= t.end for t in taken):
                yield hit

    def _entry(self, term: Term) -> tuple[list[Hit], list[int]]:
        if term.name not in self._hits:
            hits = self.doc.spans(term)
            self._hits[term.name] = (hits, [h.start for h in hits])
        return self._hits[term.name]


def _fire(frame: Frame, window: _Window) -> list[FrameHit]:
    """The frame's hits, at most `MAX_HITS` (a decision needs no more to say what and where)."""
    fired: list[FrameHit] = []
    for anchor in window.hits(frame.anchor):
        if len(fired) >= MAX_HITS:
            break
        lo, hi = anchor.start - frame.window, anchor.end + frame.window
        found = _trigger(frame, window, lo, hi, anchor)
        explained = _any(frame.benign, window, lo, hi, anchor) and not _any(frame.unless, window, lo, hi, anchor)
        if found is None or explained:
            continue
        words = [(frame.anchor.name, anchor), *found]
        evidence = tuple((name, window.doc.text_of(hit)) for name, hit in words)
        start, end = min(h.char_start for _, h in words), max(h.char_end for _, h in words)
        fired.append(FrameHit(frame=frame, start=start, end=end, evidence=evidence))
    return fired


def _trigger(frame: Frame, window: _Window, lo: int, hi: int, anchor: Hit) -> list[tuple[str, Hit]] | None:
    """The hits of the first trigger whose cues are all near the anchor, each on words of its own (one word is
    not two cues: "Who invented it?" is no request to write, "invent", and a falsehood, "invented"), or None."""
    for trigger in frame.triggers:
        found = _distinct(trigger, window, lo, hi, [anchor])
        if found is not None:
            return [(term.name, hit) for term, hit in zip(trigger, found, strict=True)]
    return None


def _distinct(terms: Sequence[Term], window: _Window, lo: int, hi: int, taken: list[Hit]) -> list[Hit] | None:
    """A hit for each term near [lo, hi), no two on the same words (nor on `taken`'s), or None."""
    if not terms:
        return []
    for hit in window.all_near(terms[0], lo, hi, taken):
        rest = _distinct(terms[1:], window, lo, hi, [*taken, hit])
        if rest is not None:
            return [hit, *rest]
    return None


def _present(anchor: Term, doc: Doc) -> bool:
    """Whether the anchor's words occur at all (most frames have none in a text: skipped at a look-up)."""
    if isinstance(anchor, Near):
        return anchor.first.name in doc.by_cue and anchor.second.name in doc.by_cue
    return anchor.name in doc.by_cue


def _any(terms: Sequence[Term], window: _Window, lo: int, hi: int, anchor: Hit) -> bool:
    return any(window.near(term, lo, hi, anchor) is not None for term in terms)
