"""How a tool call's writing ended, in words: the cell's lines and the timeline say it the same way (the panel's
tool card, js/src/views/tools.ts, in the same words).

A call the model closed itself says nothing; a call max_tokens cut says so and that it was not run; a call one of
whose string arguments a rule ended (`pipeline/tools/guards.py`) names the rule.
"""

from __future__ import annotations

from jupyter_chatflow.events import CallGuard, ToolCall

from .words import tokens

GUARD_WORDS: dict[CallGuard, str] = {
    "unclosed": "a string argument ended where the model wrote the call's end inside it",
    "repeat": "a string argument was closed when it kept repeating itself",
}
"""Each string rule in words (a key of the panel's `GUARD_WORDS` too)."""


def call_note(call: ToolCall) -> str:
    """ "cut at max_tokens after 24 tokens, not run", the string rule that ended an argument, or "".

    >>> call_note(ToolCall(call_id="c", name="calculator", arguments={}, tokens=24, cut=True))
    'cut at max_tokens after 24 tokens, not run'
    """
    said = [f"cut at max_tokens after {tokens(call.tokens)}, not run"] if call.cut else []
    said += [GUARD_WORDS[call.guard]] if call.guard else []
    return "; ".join(said)
