"""`tools` and `tool_choice` on /v1/chat/completions, in the model's own (Hermes) call format.

The tools go into the system prompt as `pipeline/tools/calls.py` writes them; calls and results already in the
conversation go back in as the model wrote and read them. The server never runs a tool: a call ends the answer
(finish_reason "tool_calls") and the client runs it. "auto" lets the model write freely and, once it writes
`<tool_call>`, decodes the call under the JSON-schema mask; "required" or a named tool starts the answer with a
constrained call; "none" leaves the tools out. The call is read and written by the pipeline's decoder
(`pipeline/tools/decode.py`), under its rule for max_tokens: a call max_tokens cuts comes back as OpenAI returns
one, its partial arguments in `tool_calls` and finish_reason "length".
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from jupyter_chatflow.engine.generation import GenerationCounts, Step
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.pipeline.rounds import RoundDriver
from jupyter_chatflow.pipeline.tools import (
    Tool,
    ToolError,
    ToolOutcome,
    call_message,
    result_message,
    tool_role,
    tools_system_prompt,
)
from jupyter_chatflow.pipeline.tools.decode import (
    DecodedCall,
    forced_call_problem,
    least_call_tokens,
)
from jupyter_chatflow.pipeline.tools.guards import CallGuard
from jupyter_chatflow.pipeline.tools.schema import schema_problem
from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

from .engine import Engine
from .errors import bad_request
from .requests import Message


@dataclasses.dataclass(frozen=True)
class Tools:
    """The tools a request offers and its tool_choice: "auto", "none", "required" or a tool's name."""

    tools: tuple[Tool, ...]
    choice: str = "auto"


def parse_tools(data: dict[str, Any]) -> Tools | None:
    """The request's `tools` and `tool_choice`, checked (None when it offers none)."""
    offered, choice = data.get("tools"), data.get("tool_choice")
    if not offered:
        if choice not in (None, "none"):
            raise bad_request("tool_choice needs tools.", param="tool_choice")
        return None
    if not isinstance(offered, list):
        raise bad_request("tools must be a list of {type: function, function: {name, description, parameters}}.",
                          param="tools")  # fmt: skip
    tools = tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(offered))
    names = [t.name for t in tools]
    twice = next((i for i, name in enumerate(names) if name in names[:i]), None)
    if twice is not None:
        raise bad_request(f"tools[{twice}].function.name {names[twice]!r} names an earlier tool too: give each tool "
                          "its own name.", param=f"tools[{twice}].function.name")  # fmt: skip
    return Tools(tools, _choice(choice, [t.name for t in tools]))


def _tool(item: Any, where: str) -> Tool:
    function = item.get("function") if isinstance(item, dict) and item.get("type") == "function" else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise bad_request(f"{where} must be {{type: function, function: {{name, description, parameters}}}}.",
                          param=where)  # fmt: skip
    parameters = function.get("parameters")
    parameters = {"type": "object", "properties": {}} if parameters is None else parameters
    try:
        made = Tool(name=function["name"], description=str(function.get("description") or ""),
                    parameters=parameters, function=_not_here)  # fmt: skip
    except ToolError as error:
        raise bad_request(str(error), param=f"{where}.function") from None
    problem = schema_problem(parameters)
    if problem:
        raise bad_request(f"{where}.function.parameters: {problem}.", param=f"{where}.function.parameters")
    return made


def check_tools(tools: Tools, tokenizer: Tokenizer, vocab_size: int, max_tokens: int) -> None:
    """400 before anything is generated when a tool's schema cannot be decoded under a grammar, or when max_tokens
    cannot hold the call a forced tool_choice asks for (`decode.forced_call_problem`)."""
    for index, tool in enumerate(tools.tools):
        try:  # builds the call's grammar and writes the shortest call under it (cached per tool and tokenizer)
            least_call_tokens(tokenizer, [tool], only=None, include_open=True, vocab_size=vocab_size)
        except ToolError as error:
            raise bad_request(f"tools[{index}].function.parameters: {error}.",
                              param=f"tools[{index}].function.parameters") from None  # fmt: skip
    try:
        problem = forced_call_problem(tokenizer, tools.tools, choice=tools.choice, max_tokens=max_tokens,
                                      vocab_size=vocab_size)  # fmt: skip
    except ToolError as error:  # each tool's grammar builds, but not theirs together (two of one name, say)
        raise bad_request(f"tools: {error}", param="tools") from None
    if problem:
        raise bad_request(problem, param="max_tokens")


def _not_here(**_: Any) -> None:
    raise ToolError("The server does not run tools: the client runs the call it returns.")


def _choice(choice: Any, names: list[str]) -> str:
    if choice is None:
        return "auto"
    if choice in ("auto", "none", "required"):
        return choice
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    if isinstance(name, str) and name in names:
        return name
    named = '{"type": "function", "function": {"name": …}}'
    known = ", ".join(names)
    raise bad_request(f'tool_choice must be "auto", "none", "required" or {named} naming one of the tools ({known}); '
                      f"got {choice!r}.", param="tool_choice")  # fmt: skip


def prompt_messages(messages: Sequence[Message], tools: Tools | None, tokenizer: Tokenizer) -> list[dict[str, str]]:
    """The conversation as the chat template takes it: the tools listed in the system prompt, calls and results
    in the model's format."""
    rest = list(messages)
    system = rest.pop(0).content if rest and rest[0].role == "system" else ""
    if tools is not None:
        results = any(m.role == "tool" for m in rest)
        system = tools_system_prompt(tools.tools, tool_choice=tools.choice, system=system, results=results)
    out = [{"role": "system", "content": system}] if system else []
    names: dict[str, str] = {}
    role = tool_role(tokenizer) if any(m.role == "tool" for m in rest) else "tool"
    for index, message in enumerate(rest, start=len(messages) - len(rest)):
        if message.role == "tool":
            if message.call_id not in names:
                raise bad_request(f"messages[{index}].tool_call_id {message.call_id!r} answers no earlier call.",
                                  param=f"messages[{index}].tool_call_id")  # fmt: skip
            out.append(result_message(names[message.call_id], ToolOutcome(output=message.content), role=role))
            continue
        names |= {call.id: call.name for call in message.calls}
        texts = [message.content] if message.content else []
        texts += [call_message(call.name, call.arguments)["content"] for call in message.calls]
        out.append({"role": message.role, "content": "\n".join(texts)})
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class MadeCall:
    """The call an answer ended with: an id for the client's result message, the tool's name and arguments (their
    text as written: what was written of them when max_tokens `cut` the call)."""

    id: str
    name: str
    arguments: dict[str, Any]
    arguments_text: str = ""
    cut: bool = False
    guard: CallGuard = ""
    tokens: int = 0
    forced: int = 0

    @classmethod
    def of(cls, call: DecodedCall) -> MadeCall:
        """A decoded call with a new id."""
        return cls(id=f"call_{uuid.uuid4().hex[:24]}", name=call.name, arguments=call.arguments,
                   arguments_text=call.arguments_text, cut=call.status == "cut", guard=call.guard, tokens=call.tokens,
                   forced=call.forced)  # fmt: skip


class ToolStream:
    """An answer that may end in a tool call (a `Stream`): its steps show only the text before the call.

    The pipeline's round driver (`pipeline/rounds.RoundDriver`) writes it: "auto", free steps until the model writes
    `<tool_call>`, then the call decoded under the mask; "required" or a name, the call from the first token. Steps
    of the call have empty text; `call` is set once it is written. Its usage is the round's (`Round.counts`).
    """

    def __init__(self, engine: Engine, tokenizer: Tokenizer, prompt: Sequence[int], params: SamplingParams,
                 tools: Tools, vocab_size: int):  # fmt: skip
        self._driver = RoundDriver(engine, tokenizer, vocab_size, prompt, params, tools.tools, tools.choice)
        self.finish_reason: str | None = None
        self.call: MadeCall | None = None

    @property
    def text(self) -> str:
        return self._driver.round.text

    @property
    def usage(self) -> GenerationCounts:
        return self._driver.round.counts()

    def cancel(self) -> None:
        self._driver.cancel()

    def __iter__(self) -> Iterator[Step]:
        for index, step in enumerate(self._driver):
            yield dataclasses.replace(step, index=index)
        call = self._driver.decoded
        if call is not None and call.status == "cancelled":
            self.finish_reason = "cancelled"
            return
        # the client runs a call; one max_tokens cut comes back as written, with finish_reason "length"
        self.call = MadeCall.of(call) if call is not None and call.name and call.status in ("complete", "cut") else None
        self.finish_reason = self._driver.round.finish_reason if call is None else _FINISH.get(call.status, "stop")


_FINISH = {"complete": "tool_calls", "cut": "length"}
"""A call's status as the answer's finish_reason ("unreadable": only without the mask; the answer just stops)."""
