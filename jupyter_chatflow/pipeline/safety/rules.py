"""Literal pattern rules: each names a category, an action (flag or block) and one readable regex.

These catch what has a fixed shape: shell and Python that attack the machine (S14), phrases and role markers of
prompt injection, active HTML, and refusals. The hazard categories in prose are read by the frames (`hazards`),
which know lemmas and context; a regex per keyword could not tell "kill a process" from "kill my neighbour".
Each pattern is matched on lower-cased, folded text (`folding.fold`: full-width letters and zero-width spaces do
not hide a keyword), starting and ending on word boundaries. Patterns begin with a literal word and use only
bounded or unambiguous repeats, so a scan is linear in the text (a megabyte takes tens of milliseconds per rule
set). They flag: the text goes on, the decision records what was seen (tool arguments block on `CODE_RULES`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from jupyter_chatflow.events import Span

from .decisions import check_action
from .folding import fold, lower

__all__ = [
    "CODE_RULES",
    "INJECTION_RULES",
    "MARKUP_RULES",
    "REFUSAL_RULES",
    "Rule",
    "RuleHit",
    "scan",
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Rule:
    """One rule: a category, an action, and a regex over lower-cased text that starts at a word boundary."""

    category: str
    pattern: str
    """Lower-case regex; a match whose first character continues a word is skipped (no leading \\b needed)."""
    action: str = "flag"
    """flag | block."""
    line_start: bool = False
    """Only match at the start of a line (after spaces or tabs)."""
    regex: re.Pattern[str] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_action(self.action, ("flag", "block"))
        object.__setattr__(self, "regex", re.compile(self.pattern))

    def accepts(self, text: str, start: int) -> bool:
        """Whether a match at `start` of `text` begins where this rule may begin."""
        if start > 0 and _is_word(text[start]) and _is_word(text[start - 1]):
            return False
        return not self.line_start or _at_line_start(text, start)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RuleHit:
    """Where a rule matched (a span of the original, unfolded text)."""

    rule: Rule
    span: Span


def scan(text: str, rules: Iterable[Rule]) -> list[RuleHit]:
    """Every match of every rule in `text`, in order of position."""
    folded = fold(text)
    lowered = lower(folded.text)
    hits = []
    for rule in rules:
        for match in rule.regex.finditer(lowered):
            if rule.accepts(lowered, match.start()):
                start, end = folded.original(*match.span())
                hits.append(RuleHit(rule=rule, span=Span(start=start, end=end, category=rule.category)))
    return sorted(hits, key=lambda h: (h.span.start, h.span.end))


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _at_line_start(text: str, start: int) -> bool:
    """Whether only up to 8 spaces or tabs stand between `start` and the start of its line."""
    begin = start
    while begin > 0 and start - begin < 8 and text[begin - 1] in " \t":
        begin -= 1
    return begin == 0 or text[begin - 1] == "\n"


def _any(*phrases: str) -> str:
    """One regex for any of the phrases, ending on a word boundary."""
    return "(?:" + "|".join(phrases) + r")\b"


CODE_RULES: tuple[Rule, ...] = (
    Rule(category="S14", pattern=r"rm\s+-(?:rf|fr|r)\s+(?:/|~|\*|\$home)(?=\s|$|\*|;|&|\|)"),
    Rule(category="S14", pattern=r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"),
    Rule(category="S14", pattern=r"(?:os\.system|os\.popen|subprocess\.\w+|__import__)\s*\("),
    Rule(category="S14", pattern=r"/etc/(?:passwd|shadow|sudoers)|~/\.ssh/|mkfs\.\w+|dd\s+if=\S{1,200}\s+of=/dev/"),
    Rule(category="S14", pattern=r"(?:curl|wget)\s+[^|\n]{1,300}\|\s*(?:sudo\s+)?(?:ba|z)?sh\b"),
)
"""Code that attacks the machine running it (S14): flagged in text, blocked in tool arguments."""

INJECTION_RULES: tuple[Rule, ...] = (
    Rule(
        category="prompt_injection",
        pattern=r"(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+)?(?:of\s+)?"
        r"(?:the\s+|your\s+|my\s+|these\s+)?(?:previous|prior|above|earlier|preceding|system|original)\s+"
        + _any(r"instructions?|prompts?|messages?|rules?|directions?|guidelines?"),
    ),
    Rule(
        category="prompt_injection",
        pattern=r"(?:you\s+are\s+now|from\s+now\s+on,?\s+you\s+(?:are|will))\s+"
        + _any(r"a|an|the|in|my|dan|no\s+longer"),
    ),
    Rule(
        category="prompt_injection",
        pattern=r"(?:reveal|print|show|repeat|output|leak)\s+(?:me\s+)?(?:your|the)\s+"
        + _any(r"system\s+prompt|(?:initial|hidden)\s+instructions|instructions\s+above"),
    ),
    Rule(category="prompt_injection", pattern=_any(r"do\s+anything\s+now|dan\s+mode|developer\s+mode\s+enabled")),
    Rule(
        category="prompt_injection",
        pattern=r"(?:system|assistant|developer)(?:[ \t]{1,4}(?:prompt|message))?[ \t]{0,4}:",
        line_start=True,
    ),
    Rule(category="prompt_injection", pattern=r"new\s+instructions?\s*:"),
    Rule(
        category="prompt_injection",
        pattern=r"<\|(?:im_start|im_end|system|user|assistant|eot_id|start_header_id|end_header_id|endoftext)\|>"
        r"|\[/?inst\]|<</?sys>>",
    ),
)
"""Text that tries to take over the model: override phrases, role markers, chat-template control tokens."""

MARKUP_RULES: tuple[Rule, ...] = (
    Rule(
        category="markup",
        pattern=r"<\s{0,8}(?:script|iframe|object|embed)\b|javascript\s{0,8}:|on(?:error|load|click|mouseover|focus)\s{0,8}=",
    ),
)
"""Active HTML: script, frames, embedded objects, javascript: URLs, event handlers."""

REFUSAL_RULES: tuple[Rule, ...] = (
    Rule(
        category="refusal",
        pattern=r"i\s+(?:can(?:no|['’])t|cannot|won['’]?t|will\s+not|am\s+(?:not\s+able|unable)|['’]m\s+(?:not\s+able|unable))"
        r"\s+(?:to\s+)?"
        + _any(r"help|assist|provide|comply|do\s+that|answer|support|fulfil+|create|write|share|engage"),
    ),
    Rule(category="refusal", pattern=_any(r"(?:i['’]?m\s+sorry|i\s+apologi[sz]e|sorry),?\s+but\s+i")),
    Rule(category="refusal", pattern=_any(r"as\s+an\s+ai(?:\s+(?:language\s+)?model|\s+assistant)?,?\s+i")),
    Rule(
        category="refusal",
        pattern=_any(
            r"i\s+(?:must|have\s+to)\s+(?:respectfully\s+)?decline",
            r"i['’]?m\s+not\s+(?:comfortable|allowed|permitted)",
        ),
    ),
)
"""Phrases with which a model declines to answer."""
