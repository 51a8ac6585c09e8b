"""Word families shared by the hazard frames: requests, intent, evasion, detail, people, explanations.

The cues are data (`data/cues.json`, read by `tables`): plain phrases, lemmatized when built, so "getting caught"
also matches "get caught" and "got caught". They say what a notion is, not any one test sentence: a request for a
method is "how do I", "what's the easiest way", "walk me through", "give me"…; a question about a thing ("what is",
"why did", "how does it work") is an explanation, which the frames read as a benign context. `cue` builds one in
code, from comma-separated phrases (`injection` writes its markers so).
"""

from __future__ import annotations

from .lexicon import Cue
from .tables import shared_cues

__all__ = ["DETAIL", "EVASION", "EXPLAIN", "PERSON", "REQUEST", "SELF", "WRITE", "cue"]


def cue(name: str, phrases: str, exclude: str = "", patterns: tuple[str, ...] = ()) -> Cue:
    """A cue from comma-separated phrases (and regexes for what has a fixed shape, see `lexicon.Cue`)."""
    split = lambda text: tuple(p.strip() for p in text.split(",") if p.strip())  # noqa: E731
    return Cue(name=name, phrases=split(phrases), exclude=split(exclude), patterns=patterns)


_SHARED = shared_cues()
REQUEST = _SHARED["request"]
"""Asking for a method, a text or help; or saying what one means to do."""
WRITE = _SHARED["write"]
"""Asking for a text to be produced."""
DETAIL = _SHARED["detail"]
"""Asking for operational detail: what turns a story or a question into a recipe."""
EVASION = _SHARED["evasion"]
"""Wanting not to be caught, traced or noticed."""
PERSON = _SHARED["person"]
"""A person (a possible victim or target)."""
SELF = _SHARED["self"]
"""The speaker (or a generic "you"): whose body a self-harm question is about."""
EXPLAIN = _SHARED["explain"]
"""Asking what something is or why: an explanation, not a method."""
