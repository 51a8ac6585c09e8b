"""The one tool-call decoder: the one round driver (`pipeline/rounds.py`), which the chat pipeline and the server's
/v1/chat/completions (`frontends/server/tools.py`) both run, reads and writes a model's calls through it.

A round's answer is free text until the model writes `<tool_call>` (tool_choice "auto": `AnswerText` streams the
text and holds the call's out), or a call from its first token ("required", or a tool named). The call itself is
written under its JSON-schema mask (`CallDecoder`): the beginning the grammar fixes is prefilled, the rest sampled
greedily, and `finish` reads what came out (`read_call`, which also reads a whole call's text).

**How max_tokens bounds a call (the one rule).** A call is part of the completion, as OpenAI counts it: its tokens
(the fixed beginning, those sampled under the mask, the fixed end) are completion tokens, and max_tokens bounds
them together with the answer's text before the call (`call_room`). Nothing else caps a call. When max_tokens runs
out before `</tool_call>` the call is *cut*: it comes back with the name (once the model has written it whole) and
the arguments' text written so far, and finish_reason "length"; nobody runs it. What keeps a call short is its
schema and the string rules of `guards.py` (a string that repeats itself, the call's end written inside a string).

Example (the caller submits to its own engine):
    >>> decoder = CallDecoder(tokenizer, tools, only="calculator", include_open=True, vocab_size=vocab,
    ...                       room=call_room(max_tokens, used=0), seed=None)
    >>> if decoder.params is not None:
    ...     generation = engine.submit([*prompt, *decoder.fixed], decoder.params, decoder.constraint, cancel)
    ...     steps = list(generation)
    >>> call = decoder.finish(generation.finish_reason if decoder.params is not None else None)
    >>> call.status, call.name, call.arguments
    ('complete', 'calculator', {'expression': '17*23'})
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

from .calls import CALL_CLOSE, CALL_OPEN, ToolCallDetector, ToolCallError, parse_tool_call
from .constrained import ToolCallConstraint
from .guards import CallGuard
from .schema import ToolError
from .tool import Tool

__all__ = [
    "AnswerText",
    "CallDecoder",
    "CallStatus",
    "DecodedCall",
    "call_prompt",
    "call_room",
    "forced_call_problem",
    "least_call_tokens",
    "read_call",
]

CallStatus = Literal["complete", "cut", "unreadable", "cancelled"]
"""How a call's writing ended: `</tool_call>` written; max_tokens ran out first; whole but not a call we can read
(only without the mask); stopped by the user."""

_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ARGUMENTS = re.compile(r'"(?:arguments|parameters)"\s*:\s*')


def call_room(max_tokens: int, used: int) -> int:
    """The tokens a call may use, fixed ones included: what `max_tokens` leaves after the `used` tokens of the
    answer before it (0 or less: none; the call is cut before it begins)."""
    return max_tokens - used


# The pieces `least_call_tokens` writes where the grammar leaves a choice, most closing first: end a string, an
# object, a list; the shortest number; a letter where a string must have one
_SHORTEST = ('"', "}", "]", "0", "a")
_LONGEST_WALK = 512
_LEAST: dict[tuple[int, str | None, bool, str], int | None] = {}  # (tokenizer, only, include_open, the tools' specs)


def least_call_tokens(
    tokenizer: Tokenizer, tools: Sequence[Tool], *, only: str | None, include_open: bool, vocab_size: int
) -> int | None:
    """The fewest tokens a whole call of `tools` (or the one named `only`) can take under its mask, fixed ones
    included: a forced call needs max_tokens at least this (`call_room`). Found by writing a call that closes every
    string, object and list as soon as the grammar lets it (a call that short exists; one a token shorter may, where
    the walk took a longer way round a pattern); None when the walk finds no end in `_LONGEST_WALK` tokens.
    ToolError when the schema admits no call at all."""
    key = (id(tokenizer), only, include_open, json.dumps([t.spec() for t in tools], sort_keys=True, default=str))
    if key not in _LEAST:
        if len(_LEAST) >= 64:
            _LEAST.clear()
        _LEAST[key] = _walk_shortest(ToolCallConstraint(tokenizer, tools, only=only, include_open=include_open,
                                                        vocab_size=vocab_size), tokenizer)  # fmt: skip
    return _LEAST[key]


def forced_call_problem(
    tokenizer: Tokenizer, tools: Sequence[Tool], *, choice: str, max_tokens: int, vocab_size: int
) -> str:
    """Why `max_tokens` cannot hold the call a forced `choice` ("required" or a tool's name) asks for, or "" when it
    can (or nothing is forced): below `least_call_tokens` the call would be cut before it is whole."""
    if choice in ("auto", "none") or not tools:
        return ""
    only = None if choice == "required" else choice
    least = least_call_tokens(tokenizer, tools, only=only, include_open=True, vocab_size=vocab_size)
    if least is None or max_tokens >= least:
        return ""
    names = only or " or ".join(t.name for t in tools)
    return (
        f"max_tokens {max_tokens} cannot hold the call tool_choice {choice!r} asks for: the shortest whole call "
        f"to {names} is {least} tokens, its fixed beginning included. Give max_tokens {least} or more (a call "
        "with real arguments takes a few more)."
    )


def _walk_shortest(constraint: ToolCallConstraint, tokenizer: Tokenizer) -> int | None:
    shortest = [ids[0] for ids in map(tokenizer.encode, _SHORTEST) if len(ids) == 1]
    constraint.take_forced()
    last = -1
    for _ in range(_LONGEST_WALK):
        if constraint.is_done():
            return len(constraint.ids)
        allowed = constraint.allowed()
        allowed[[i for i in (tokenizer.eos_id, *tokenizer.stop_ids) if i < allowed.size]] = False
        choices = [i for i in shortest if allowed[i]] or allowed.nonzero()[0][:1].tolist()
        if not choices:  # (llguidance lets a schema it cannot satisfy, a property that is only a $ref to itself, end)
            raise ToolError(f"no whole call can be written under this schema: nothing may follow {constraint.text!r}")
        # not the same piece twice when another will do: "00…" never meets a pattern that wants a letter
        last = next((i for i in choices if i != last), choices[0])
        constraint.advance(last)
        constraint.take_forced()
    return None


def call_prompt(prompt: Sequence[int], text: str, tokenizer: Tokenizer) -> list[int]:
    """The ids a call written after free `text` is decoded from: the prompt, the text and `<tool_call>` as the
    tokenizer encodes them (the grammar then starts after the tag)."""
    return [*prompt, *tokenizer.encode(text + CALL_OPEN)]


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodedCall:
    """A call as the model wrote it: complete, or cut by max_tokens (partial arguments), with its token counts."""

    status: CallStatus
    name: str
    """The tool's name; "" when max_tokens cut the call before the model had written it whole."""
    arguments: dict[str, Any]
    """The arguments, parsed ({} unless the call is complete)."""
    arguments_text: str
    """The arguments as JSON text: the whole object for a complete call, what was written of it for a cut one."""
    tokens: int = 0
    """Tokens of the call, `<tool_call>` (or the line after it) to `</tool_call>` or to the cut: all counted in
    completion_tokens."""
    forced: int = 0
    """Of those, the ones the grammar fixed (keys, punctuation, a sole tool's name)."""
    guard: CallGuard = ""
    """The string rule that ended one of its arguments, if one did (`guards.py`)."""
    error: str = ""
    """Why an unreadable call could not be read."""


def read_call(text: str, *, complete: bool = True) -> DecodedCall:
    """A call's text (with or without its tags), whole or cut before `</tool_call>`, as a `DecodedCall`.

    >>> cut = read_call('<tool_call>\\n{"name": "calculator", "arguments": {"expression": "17*', complete=False)
    >>> cut.status, cut.name, cut.arguments_text
    ('cut', 'calculator', '{"expression": "17*')
    >>> read_call('<tool_call>\\n{"name": "f", "arguments": {"x": "1"}}\\n</tool', complete=False).arguments_text
    '{"x": "1"}'
    >>> read_call('<tool_call>\\n{"name": "f", "arguments": {"x": "17*23}}</tool_', complete=False).arguments_text
    '{"x": "17*23'
    """
    body = text.split(CALL_OPEN, 1)[-1].split(CALL_CLOSE, 1)[0]
    if not complete:
        name = _NAME.search(body)
        start = _ARGUMENTS.search(body)
        arguments = body[start.end() :] if start and name and start.start() > name.end() else ""
        return DecodedCall(status="cut", name=name[1] if name else "", arguments={},
                           arguments_text=_arguments_only(arguments))  # fmt: skip
    try:
        called, parsed = parse_tool_call(body)
    except ToolCallError as error:
        name = _NAME.search(body)
        return DecodedCall(status="unreadable", name=name[1] if name else "unknown", arguments={},
                           arguments_text=body.strip(), error=str(error))  # fmt: skip
    written = json.dumps(parsed, ensure_ascii=False)
    return DecodedCall(status="complete", name=called, arguments=parsed, arguments_text=written)


def _arguments_only(text: str) -> str:
    """A cut call's arguments without the call's closing markup: when max_tokens cut the call's fixed end (`}` and
    `</tool_call>`), the arguments object is whole and that end is none of it; when it cut the model writing the
    end inside an open string (`"17*23}}</tool_`, which the unclosed rule of `guards.py` ends once the tag is
    whole), the string is cut where that end began."""
    try:
        _, end = json.JSONDecoder().raw_decode(text)
    except ValueError:
        for n in range(len(CALL_CLOSE), 1, -1):  # a beginning of `</tool_call>` (two characters at least)
            if text.endswith(CALL_CLOSE[:n]):
                return text[:-n].rstrip().rstrip("}]")
        return text
    return text[:end]


class CallDecoder:
    """Writes one call under its JSON-schema mask within `room` tokens (`call_room`); the caller runs the generation.

    `fixed` are the tokens the grammar fixes at the start (prefill them after the prompt); `params` is the
    generation to submit with `constraint` (None when there is nothing to sample: all fixed, or no room left);
    `finish(finish_reason)` reads the call once it has ended.
    """

    def __init__(
        self, tokenizer: Tokenizer, tools: Sequence[Tool], *, only: str | None, include_open: bool, vocab_size: int,
        room: int, seed: int | None,
    ):  # fmt: skip
        self.tokenizer, self.room = tokenizer, room
        self.constraint = ToolCallConstraint(tokenizer, tools, only=only, include_open=include_open,
                                             vocab_size=vocab_size)  # fmt: skip
        self.fixed = self.constraint.take_forced()
        left = room - len(self.fixed)
        # greedy and unpenalized whatever the request's sampling: a call's JSON repeats its own tokens ({"…": …})
        # and its arguments are a computation, not prose; the mask does the steering
        sample = left > 0 and not self.constraint.is_done()
        self.params = SamplingParams(temperature=0.0, max_tokens=left, seed=seed) if sample else None

    def finish(self, finish_reason: str | None) -> DecodedCall:
        """The call, once its generation (if any) has ended with `finish_reason`."""
        constraint = self.constraint
        ids, forced, guard = constraint.ids, constraint.forced, constraint.guard
        if finish_reason == "cancelled":
            return DecodedCall(status="cancelled", name="", arguments={}, arguments_text="", tokens=len(ids))
        if constraint.is_done() and len(ids) <= self.room:
            call = read_call(constraint.text)
        else:  # max_tokens ran out first, maybe inside the fixed text: the call up to its last token that fits
            kept = ids[: max(self.room, 0)]
            call = read_call(constraint.prefix + self.tokenizer.decode(kept), complete=False)
            ids, forced = kept, min(forced, len(kept))
        return dataclasses.replace(call, tokens=len(ids), forced=forced, guard=guard)


class AnswerText:
    """The free text of an answer step by step, with a call's text held out: `shown(step_text)` is what a step
    shows (a partial `<tool_call` waits until it is known not to be one); `called` turns True once the model has
    opened a call (stop generating there); `tail(text)` is what the finished generation still held back."""

    def __init__(self, tools: bool):
        self._detector = ToolCallDetector() if tools else None
        self._streamed = 0  # characters of the generation's text the steps carried

    @property
    def called(self) -> bool:
        """The model wrote `<tool_call>`: its call is decoded under the mask from here."""
        return self._detector is not None and self._detector.started

    def shown(self, text: str, *, generated: bool = True) -> str:
        """The answer text a step's `text` shows (`generated`: the text is the generation's that `tail` reads,
        not a fork's kept step from before it)."""
        self._streamed += len(text) if generated else 0
        return self._detector.feed(text) if self._detector is not None else text

    def tail(self, text: str) -> str:
        """At the end of a generation whose whole text is `text`: the answer text no step showed (text held back
        for a stop string that never came, a partial `<tool_call` that was not one)."""
        rest = text[self._streamed :]
        self._streamed = len(text)
        if self._detector is None:
            return rest
        return self._detector.feed(rest) + self._detector.flush()
