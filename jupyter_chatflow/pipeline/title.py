"""The session's title: a few words the model writes about the first exchange (`title_task.py`: when).

The title is written from exactly what the model was allowed to see (the user's message after the input layer's
redaction, and the answer as shown, after the output layer), and the title itself passes the output scan like an
answer. A 135M model's attempt is often unusable (a sentence, a repeat of the question, a reply instead of a
title): `clean_title` keeps 2 to 6 whole words or rejects it, and the user's own words are the fallback.
"""

from __future__ import annotations

import re
import threading
import time

from jupyter_chatflow.engine.generation import Engine
from jupyter_chatflow.engine.model import Model
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.events import TitleGenerated, TitleSource

from .safety import SafetyPolicy
from .safety.gate import Release

TITLE_TOKENS = 16
MAX_WORDS, MIN_WORDS = 6, 2
FEW_SHOT = (
    ("How do I bake sourdough bread at home?", "Baking Sourdough Bread at Home"),
    ("Why is the sky blue during the day?", "Why the Sky Is Blue"),
    ("Can you help me write a cover letter for a nursing job?", "Nursing Job Cover Letter"),
)
_INSTRUCTION = "Write a short title (2 to 6 words) for a conversation that starts with this message:\n\n"
_LEAD_INS = re.compile(
    r"^(?:please|hey|hi|hello|ok(?:ay)?|so|also|and|now|then|tell me|explain|describe|give me|show me|"
    r"can you|could you|would you|will you|i want to know|i'd like to know|what(?:'s| is| are| was| were)?|"
    r"who(?:'s| is| are| was)?|how (?:do|does|can|to|much|many)?|why (?:is|are|do|does)?|when (?:is|was|did)?|"
    r"where (?:is|are)?|which|(?:should|shall|can|could|would|will|do|did|may) (?:i|we)|is|are|do|does|the|a|an|"
    r"about|me|i|you|it|write|compose|create|generate|make|give|show|explain|describe|some)\b[\s,]*",
    re.IGNORECASE,
)
_SMALL = {"a", "an", "and", "as", "at", "by", "for", "from", "in", "into", "of", "on", "or", "the", "to", "vs", "with"}
_NO_END = _SMALL | {
    "about",
    "who",
    "that",
    "which",
    "whose",
    "when",
    "where",
    "is",
    "are",
    "was",
    "be",
    "my",
    "your",
    "his",
    "her",
    "their",
    "our",
    "its",
    "this",
    "these",
    "those",
    "i",
    "you",
    "he",
    "she",
    "we",
    "it",
}
SHORT_MESSAGE = 40  # characters: a message shorter than this is titled with the answer's first line beside it
_NOT_A_TITLE = re.compile(r"(?i)^(?:sure|certainly|here|i |i'm|as an|title|the title|okay|yes|no)\b")


def write_title(
    model: Model, user: str, answer: str, policy: SafetyPolicy, cancel: threading.Event, engine: Engine | None = None
) -> TitleGenerated | None:
    """The title event for a conversation that starts with `user` → `answer` (both as the model saw / showed
    them; the answer may be its beginning); None when cancelled or when neither the model nor the user's words
    give a title. `engine`: what runs the generation (a chat's Scheduler, beside the answer); else the model."""
    started = time.perf_counter()
    ids = _prompt_ids(model, user, answer)
    written = ""
    if ids is not None:  # (a window too small for even the bare request: the user's words)
        params = SamplingParams(temperature=0.0, repetition_penalty=1.2, max_tokens=TITLE_TOKENS, stop=("\n",))
        generation = (engine if engine is not None else model).submit(ids, params, cancel=cancel)
        written = "".join(step.text for step in generation).strip()
    if cancel.is_set():
        return None
    title, rejected = _judged(written, user, policy) if ids is not None else ("", "the window has no room to ask")
    source: TitleSource = "model"
    if not title:  # unusable, or the output scan would change it: the user's words (already redacted) instead
        title, source = scanned_title(fallback_title(user), policy), "fallback"
    if not title:
        return None
    return TitleGenerated(title=title, source=source, latency_ms=(time.perf_counter() - started) * 1000,
                          model_title=written, rejected=rejected if source == "fallback" else "")  # fmt: skip


def _judged(written: str, user: str, policy: SafetyPolicy) -> tuple[str, str]:
    """The model's title as it is used, and why it is not ("" when it is)."""
    attempt = unlabelled(clean_title(written), user)
    if not attempt:
        why = f"not a title ({MIN_WORDS} to {MAX_WORDS} plain words)"
        return "", why if written else "the model wrote nothing"
    if not on_topic(attempt, user):
        return "", "it shares no word with the message (off topic)"
    title = scanned_title(attempt, policy)
    return (title, "") if title else ("", "the output scan would have changed it")


def _prompt_ids(model: Model, user: str, answer: str) -> list[int] | None:
    """The title request's ids: with the few-shot examples when they fit the window, else without; else None."""
    room = model.config.context_length - TITLE_TOKENS
    for examples in (FEW_SHOT, ()):
        ids = model.tokenizer.apply_chat_template(_messages(user, answer, examples))
        if len(ids) < room:
            return ids
    return None


def _messages(user: str, answer: str, examples: tuple[tuple[str, str], ...] = FEW_SHOT) -> list[dict[str, str]]:
    """Few-shot: the model is shown finished examples, then asked for this one (the user's message only: the
    answer adds length and little the title needs; its first line helps when the message is short)."""
    messages = [{"role": "system", "content": "You write short, plain titles for conversations."}]
    for message, title in examples:
        messages += [{"role": "user", "content": _INSTRUCTION + message}, {"role": "assistant", "content": title}]
    context = user.strip()[:600]
    if len(context) < SHORT_MESSAGE and answer.strip():
        context += "\n(The answer began: " + answer.strip().splitlines()[0][:160] + ")"
    return [*messages, {"role": "user", "content": _INSTRUCTION + context}]


def clean_title(text: str) -> str:
    """A usable title from the model's attempt: first line, quotes and markup stripped, whole words only, 2 to 6
    of them; "" when the attempt is not a title (a reply, a sentence, too short)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = re.sub(r"(?i)^\s*(?:title\s*:\s*)", "", line)
    line = line.strip().strip("\"'*#`“”‘’ ").strip()
    line = re.sub(r"[.!?:;,]+$", "", line).strip()
    words = line.split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS or _NOT_A_TITLE.match(line):
        return ""
    if not all(re.fullmatch(r"[\w'’&/+.-]+|[-–—:]", w) for w in words):
        return ""
    return " ".join(words)


def unlabelled(title: str, user: str) -> str:
    """The title without a last word "Title(s)" that names the model's job, not the topic ("The City of Light
    History Titles" for a question on Paris), unless the user's message is about titles."""
    words = title.split()
    if len(words) > MIN_WORDS and words[-1].lower() in ("title", "titles") and "title" not in user.lower():
        return " ".join(words[:-1])
    return title


def on_topic(title: str, user: str) -> bool:
    """Whether the title shares a content word with the user's message (the 135M model sometimes answers instead,
    "Paris Answer", or drifts: "One Thousand Two Thirty-Three" for "What is 17*23?")."""
    return bool(_content_words(title) & _content_words(user))


def _content_words(text: str) -> set[str]:
    words = (w.lower().rstrip("s") for w in re.findall(r"[^\W_]+", text))
    return {w for w in words if len(w) >= 3 and w not in _SMALL and not _LEAD_INS.fullmatch(w)}


def fallback_title(user: str) -> str:
    """The user's first phrase, lead-in words ("what is the", "can you") dropped: at most six whole words, cut at
    punctuation, capitalised as a title ("What is the capital of France?" → "Capital of France"); a clause that
    is all lead-in ("Tell me,") gives way to the next."""
    text = re.sub(r"\[[A-Z_]+\]", " ", user)  # the input layer's placeholders ([EMAIL]) are not a topic
    for clause in re.split(r"[.?!;:,\n]", text):
        words = _topic_words(clause)
        if words:
            return " ".join(w if i and w.lower() in _SMALL else _capitalized(w) for i, w in enumerate(words))
    return ""


def _topic_words(clause: str) -> list[str]:
    """A clause's words after its lead-in, at most six, never starting or ending on a small word."""
    phrase = re.sub(r"[^\w\s'’&/+*×÷^%=-]", " ", clause)
    previous = None
    while previous != phrase:
        previous, phrase = phrase, _LEAD_INS.sub("", phrase.strip())
    words = phrase.split()
    while words and words[0].lower() in _SMALL:  # nor start on one
        words.pop(0)
    words = words[:MAX_WORDS]
    while words and words[-1].lower() in _NO_END:  # never end on "of", "the", "about", "who"
        words.pop()
    return words


def _capitalized(word: str) -> str:
    """The word with its first letter upper-cased ("'good" → "'Good")."""
    letter = re.search(r"[^\W\d_]", word)
    return word if letter is None else word[: letter.start()] + letter[0].upper() + word[letter.end() :]


def scanned_title(title: str, policy: SafetyPolicy) -> str:
    """The title if the output scan, run as on an answer, lets it through unchanged; "" if it would redact or
    block any of it (a title is too short to show with a hole in it)."""
    if not title:
        return ""
    gate = policy.output_gate()
    items = gate.feed(0, title) + gate.close()
    shown = "".join(item.text for item in items if isinstance(item, Release))
    return title if gate.blocked is None and shown == title and gate.summary().action in ("allow", "flag") else ""
