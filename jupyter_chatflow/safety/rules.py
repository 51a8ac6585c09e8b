"""Transparent keyword rules: each names a taxonomy category, an action (flag or block) and one readable regex.

Rules are deliberately few and literal, so a reader can see exactly why a text was flagged; they are a first line,
not a classifier (pair them with `ModelGuard` or your own `Guard` for more). Each pattern is a list of phrases
matched on lower-cased, folded text (`folding.fold`: full-width letters and zero-width spaces do not hide a
keyword), starting and ending on word boundaries. Patterns begin with a literal word and use only bounded or
unambiguous repeats, so a scan is linear in the text (a megabyte takes tens of milliseconds per rule set).

Blocking rules, by default: sexual content involving minors (S4) and asking how to make a weapon of mass harm (S9).
Everything else flags: the text goes on, the decision records what was seen.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from jupyter_chatflow.events import Span

from .decisions import check_action
from .folding import fold

__all__ = [
    "CATEGORY_RULES",
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
    lowered = _lower(folded.text)
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


def _lower(text: str) -> str:
    """Lower-cased text of the same length (str.lower lengthens a few characters, such as "İ"; those stay)."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


_HOW = _any(
    r"how\s+(?:do\s+(?:i|you|we)|to|can\s+(?:i|you|we)|would\s+(?:i|you))",
    r"instructions?\s+(?:for|to|on)",
    r"steps?\s+to",
    r"recipe\s+for",
    r"guide\s+to",
)
_MAKE = r"(?:make|build|create|synthesi[sz]e|produce|assemble|cook|brew|weaponi[sz]e)"
_WMD = _any(
    r"(?:a\s+|an\s+)?(?:pipe\s+|nail\s+|dirty\s+|car\s+|fertili[sz]er\s+)?bombs?",
    r"explosives?|napalm|thermite|sarin|vx|tabun|ricin|anthrax|botulinum(?:\s+toxin)?|mustard\s+gas",
    r"(?:a\s+)?(?:nerve\s+agents?|bioweapons?|chemical\s+weapons?|nuclear\s+(?:bombs?|weapons?|devices?))",
)
_PEOPLE = (
    r"(?:a\s+|an\s+|my\s+|the\s+|our\s+|his\s+|her\s+)?(?:person|people|someone|somebody|him|her|them|neighbou?r"
    r"|wife|husband|boss|child|kid|teacher|president|coworker|family)\b"
)

CATEGORY_RULES: tuple[Rule, ...] = (
    Rule(category="S1", pattern=r"(?:kill|murder|assassinate|kidnap|torture|stab|strangle|poison)\s+" + _PEOPLE),
    Rule(category="S1", pattern=_any(r"hire\s+an?\s+hit\s?man")),
    Rule(
        category="S2",
        pattern=_HOW + r"\s+" + _any(r"launder\s+money|shoplift|hotwire\s+a\s+car|pick\s+a\s+lock|steal\s+\w+"),
    ),
    Rule(
        category="S2",
        pattern=_any(
            r"(?:make|cook|synthesi[sz]e)\s+(?:meth|methamphetamine|fentanyl|heroin|crack)",
            r"counterfeit\s+(?:money|bills|currency)",
            r"ransomware|phishing\s+(?:kit|page|site)",
        ),
    ),
    Rule(category="S3", pattern=_any(r"sex\s+trafficking|revenge\s+porn|date\s+rape\s+drugs?|sextortion")),
    Rule(
        category="S4",
        pattern=_any(
            r"child\s+porn\w*|csam",
            r"(?:sexual|nude|explicit)\s+(?:\w+\s+)?(?:of|with|involving)\s+(?:a\s+)?(?:minors?|child|children|kids?)",
        ),
        action="block",
    ),
    Rule(
        category="S5",
        pattern=_any(r"(?:fake|false|made[-\s]up)\s+(?:news|story|article|rumou?rs?|allegations?)\s+(?:about|that)"),
    ),
    Rule(
        category="S6",
        pattern=_any(
            r"how\s+much\s+\w+\s+(?:should|can)\s+i\s+take",
            r"diagnose\s+(?:me|my)",
            r"should\s+i\s+stop\s+taking\s+my",
        ),
    ),
    Rule(
        category="S7",
        pattern=_any(
            r"dox(?:x)?(?:ing|ed)?",
            r"(?:find|get|look\s+up)\s+(?:\w+\s+){0,3}(?:home\s+address|social\s+security\s+number)",
        ),
    ),
    Rule(
        category="S8",
        pattern=_any(
            r"pirated|keygen|warez",
            r"cracked\s+(?:copy|version|software)",
            r"bypass\s+(?:the\s+)?(?:drm|copy\s+protection)",
        ),
    ),
    Rule(category="S9", pattern=_HOW + r"\s+" + _MAKE + r"\s+" + _WMD, action="block"),
    Rule(
        category="S9",
        pattern=_any(r"sarin|vx\s+nerve\s+agent|ricin|anthrax|bioweapons?|chemical\s+weapons?|enriched\s+uranium"),
    ),
    Rule(
        category="S10",
        pattern=_any(r"subhumans?|ethnic\s+cleansing|master\s+race|white\s+power|exterminate\s+(?:all|the)\s+\w+"),
    ),
    Rule(
        category="S11",
        pattern=_any(
            r"kill\s+myself|end\s+my\s+(?:own\s+)?life|commit\s+suicide|suicidal|want\s+to\s+die",
            r"self[-\s]harm|cut\s+myself|lethal\s+dose|overdose\s+on",
        ),
    ),
    Rule(category="S12", pattern=_any(r"porn\w*|sexually\s+explicit|explicit\s+sex\w*|sex\s+scene|nudes|erotica")),
    Rule(
        category="S13",
        pattern=_any(
            r"(?:rig|steal)\s+(?:the|an)\s+election|election\s+(?:is|was)\s+rigged",
            r"voter\s+suppression|fake\s+ballots?|vote\s+by\s+(?:text|sms)",
        ),
    ),
)
"""Hazard rules (Llama Guard 3 categories S1–S13)."""

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
