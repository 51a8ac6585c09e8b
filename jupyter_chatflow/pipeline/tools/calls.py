"""The model's own tool-call format (Hermes style, as SmolLM2-Instruct, Qwen 2.5 and Hermes models use it).

The system prompt lists the tools, one JSON object per line, inside `<tools>…</tools>`. The model calls one by
writing

    <tool_call>
    {"name": "calculator", "arguments": {"expression": "2 + 2"}}
    </tool_call>

and the result goes back as a message: role "tool" with the output as its content where the chat template
renders that role, else role "user" with `<tool_response>\\n{"name": …, "content": …}\\n</tool_response>`.
In SmolLM2's vocabulary `<tool_call>` is ordinary text (five tokens: `<` `tool` `_` `call` `>`), so
`ToolCallDetector` finds it in the streamed text, holding back a partial `<tool_call` until it is known not to
be one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .schema import ToolError
from .tool import Tool, ToolOutcome

__all__ = [
    "CALL_CLOSE",
    "CALL_OPEN",
    "RESULTS_INSTRUCTION",
    "ToolCallDetector",
    "ToolCallError",
    "call_message",
    "check_tool_choice",
    "parse_tool_call",
    "result_message",
    "tool_role",
    "tools_system_prompt",
]

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
TOOL_CHOICES = ("auto", "none", "required")

_INSTRUCTIONS = """# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> \
XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""


RESULTS_INSTRUCTION = "Use the tool's result to answer the user."
"""Closes the system prompt of a round whose context carries tool results. SmolLM2-135M was never trained on
tool results: left to itself it reviews the call as code or talks about something else. On 41 arithmetic
questions (greedy) its answer quoted the result 4 times with the tools listed again, 22 times without them, and
36 times without them and with this sentence."""


class ToolCallError(ToolError):
    """The model's tool call is not one we can run (bad JSON, no name, arguments not an object)."""


def check_tool_choice(tool_choice: str, names: Sequence[str]) -> str:
    """`tool_choice` if it is auto, none, required or one of `names`; ToolError naming the choices otherwise."""
    if tool_choice in TOOL_CHOICES or tool_choice in names:
        return tool_choice
    raise ToolError(f"tool_choice {tool_choice!r} is not one of {', '.join([*TOOL_CHOICES, *names])}.")


def tools_system_prompt(
    tools: Sequence[Tool], *, tool_choice: str = "auto", system: str = "", results: bool = False
) -> str:
    """The system prompt that lists `tools` for the model ("" plus `system` when tool_choice is none).

    `results`: the context carries tool results; the prompt then ends with `RESULTS_INSTRUCTION`.
    """
    check_tool_choice(tool_choice, [t.name for t in tools])
    text = ""
    if tool_choice != "none" and tools:
        text = _INSTRUCTIONS.format(tools="\n".join(json.dumps(t.spec(), ensure_ascii=False) for t in tools))
        if tool_choice == "required":
            text += "\n\nCall one of these tools before you answer."
        elif tool_choice != "auto":
            text += f"\n\nCall the {tool_choice} tool before you answer."
    if results:
        text = f"{text}\n\n{RESULTS_INSTRUCTION}" if text else RESULTS_INSTRUCTION
    if not text:
        return system
    return f"{system.rstrip()}\n\n{text}" if system.strip() else text


def parse_tool_call(text: str) -> tuple[str, dict[str, Any]]:
    """(name, arguments) of a call's text, with or without the `<tool_call>` tags; ToolCallError otherwise."""
    body = text.strip().removeprefix(CALL_OPEN).strip()
    body = body.split(CALL_CLOSE, 1)[0].strip()
    if body.startswith("```"):  # a code fence the model put around the JSON
        body = body.strip("`").removeprefix("json").strip()
    try:
        value, _ = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as error:
        raise ToolCallError(
            f"the tool call is not valid JSON ({error.msg} at character {error.pos}); write "
            '{"name": <tool name>, "arguments": {…}}'
        ) from None
    if isinstance(value, list) and len(value) == 1:  # SmolLM2's list form: [{"name": …, "arguments": …}]
        value = value[0]
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise ToolCallError('the tool call must be a JSON object with a "name" string and an "arguments" object.')
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):  # OpenAI-style: arguments as a JSON string
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            raise ToolCallError('"arguments" is a string that is not a JSON object; give an object.') from None
    if not isinstance(arguments, dict):
        raise ToolCallError(f'"arguments" must be a JSON object, not {type(arguments).__name__}.')
    return value["name"], arguments


def call_message(name: str, arguments: Mapping[str, Any]) -> dict[str, str]:
    """The assistant message that records a call in the history, in the model's own format."""
    call = json.dumps({"name": name, "arguments": dict(arguments)}, ensure_ascii=False)
    return {"role": "assistant", "content": f"{CALL_OPEN}\n{call}\n{CALL_CLOSE}"}


def result_message(name: str, outcome: ToolOutcome, *, role: str = "tool") -> dict[str, str]:
    """The message that carries a tool's output, or its error, back to the model.

    In a "tool" message the text goes as it is (as OpenAI's tool messages; a template that wants tags, like
    Qwen 2.5's, adds its own `<tool_response>`): SmolLM2-135M, never trained on tool results, answers from
    `17 * 23 = 391` more often than from the same text in Hermes' JSON, which it tends to echo or review as
    code. A "user" message wraps it in `<tool_response>` with the tool's name, so it cannot pass for the user's
    words.
    """
    if role == "tool":
        return {"role": role, "content": outcome.output if outcome.ok else outcome.error}
    body = {"name": name, "content": outcome.output} if outcome.ok else {"name": name, "error": outcome.error}
    return {"role": role, "content": f"<tool_response>\n{json.dumps(body, ensure_ascii=False)}\n</tool_response>"}


class _Renders(Protocol):
    def render_chat_template(self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True) -> str:
        """Render messages with the chat template."""
        ...


def tool_role(tokenizer: _Renders) -> str:
    """ "tool" when the tokenizer's chat template renders a tool message with its role, else "user"."""
    marker = "\ue000tool-result\ue000"
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    try:
        text = tokenizer.render_chat_template([*messages, {"role": "tool", "content": marker}])
    except Exception:
        return "user"
    return "tool" if marker in text and "tool" in text.split(marker)[0][-40:] else "user"


class ToolCallDetector:
    """Watches streamed text for a `<tool_call>…</tool_call>` and separates it from the visible answer.

    >>> d = ToolCallDetector()
    >>> d.feed("Let me compute. <tool"), d.feed('_call>\\n{"name": "calculator", "arguments": {}}\\n</tool_call>')
    ('Let me compute. ', '')
    >>> d.started, d.finished, d.call()
    (True, True, ('calculator', {}))
    """

    def __init__(self) -> None:
        self._held = ""
        self.started = False
        """True once `<tool_call>` has been seen: switch to constrained decoding here."""
        self.finished = False
        """True once `</tool_call>` has been seen after it."""
        self.call_text = ""
        """The text between the tags so far."""
        self.after = ""
        """Text generated after `</tool_call>` (the caller usually stops before any)."""

    def feed(self, text: str) -> str:
        """Take newly generated text; return the part that is answer text and safe to show now."""
        if self.finished:
            self.after += text
            return ""
        if self.started:
            self._take_call(text)
            return ""
        pending = self._held + text
        start = pending.find(CALL_OPEN)
        if start >= 0:
            self._held, self.started = "", True
            self._take_call(pending[start + len(CALL_OPEN) :])
            return pending[:start]
        keep = _partial_suffix(pending, CALL_OPEN)
        self._held = pending[len(pending) - keep :] if keep else ""
        return pending[: len(pending) - keep]

    def flush(self) -> str:
        """At the end of generation: held-back text that turned out not to be a tag."""
        held, self._held = self._held, ""
        return held

    def call(self) -> tuple[str, dict[str, Any]]:
        """(name, arguments) of the detected call (also when the model stopped before `</tool_call>`)."""
        if not self.started:
            raise ToolCallError("no tool call was generated.")
        return parse_tool_call(self.call_text)

    def _take_call(self, text: str) -> None:
        self.call_text += text
        end = self.call_text.find(CALL_CLOSE)
        if end >= 0:
            self.after = self.call_text[end + len(CALL_CLOSE) :]
            self.call_text = self.call_text[:end]
            self.finished = True


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of `text` that is a proper start of `tag`."""
    for size in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0
