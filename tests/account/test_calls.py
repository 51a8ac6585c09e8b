"""How a call's writing ended, in the words every view uses (the panel's tool card in the same words)."""

from __future__ import annotations

import re
from pathlib import Path

from jupyter_chatflow.account import GUARD_WORDS, call_note
from jupyter_chatflow.events import ToolCall

TOOLS_TS = Path(__file__).resolve().parents[2] / "js" / "src" / "views" / "tools.ts"


def _call(**fields) -> ToolCall:
    return ToolCall(call_id="c", name="calculator", arguments={}, **fields)


def test_a_call_says_it_was_cut_and_not_run_and_which_rule_ended_a_string():
    assert call_note(_call(tokens=24)) == ""  # closed by the model itself: nothing to say
    assert call_note(_call(tokens=1, cut=True)) == "cut at max_tokens after 1 token, not run"
    assert call_note(_call(tokens=31, cut=True, guard="repeat")) == (
        "cut at max_tokens after 31 tokens, not run; a string argument was closed when it kept repeating itself"
    )
    assert call_note(_call(guard="unclosed")) == GUARD_WORDS["unclosed"]


def test_the_panels_tool_card_has_the_same_words():
    source = TOOLS_TS.read_text(encoding="utf-8")
    panel = dict(re.findall(r'^\s+(\w+): "([^"]+)",$', source[source.index("GUARD_WORDS") :], re.M))
    assert panel == GUARD_WORDS
    assert "cut at max_tokens after ${call.tokens} token" in source
