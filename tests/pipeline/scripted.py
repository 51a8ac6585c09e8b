"""An answerer that says what it is told (simonw/llm's `MockModel` is the style): the one `Turn` and `Chat` run on
it with no model, no server and no sleeps, so their stages are tested on their own.

>>> chat = Chat(answerer=ScriptedAnswerer(Said(call=("calculator", {"expression": "17*23"})), "17×23 is {result}."),
...             persist=False)

Each round is a `Said`: its text, streamed one token per word (with the space before it), then a call if it has
one. `{result}` in a round's text is the output of the call the round before made, as the tool returned it.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable
from typing import Any

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import Event, TokenDelta, ToolCall, Usage
from jupyter_chatflow.pipeline.answerer import Abilities, TurnSide
from jupyter_chatflow.pipeline.release import Releaser
from jupyter_chatflow.pipeline.safety import SafetyPolicy
from jupyter_chatflow.pipeline.tools import ToolOutcome

NO_MODEL = "a scripted answer: no model reads the input"


@dataclasses.dataclass(frozen=True)
class Said:
    """One round of the script: the text the answer shows, then (optionally) a call of a tool with its arguments."""

    text: str = ""
    call: tuple[str, dict[str, Any]] | None = None


class ScriptedAnswerer:
    """Answers every turn with `rounds` (one `Said` or text each); `on_token(n)` is called after the n-th token is
    out (a test stops the turn there). `heard` keeps what each turn's rounds were given: its system prompt, the
    user's text as the model would see it, and the memories recalled."""

    def __init__(self, *rounds: Said | str, on_token: Callable[[int], None] | None = None):
        self.script = [r if isinstance(r, Said) else Said(r) for r in rounds]
        self.on_token = on_token
        self.heard: list[dict[str, Any]] = []

    @property
    def abilities(self) -> Abilities:
        return Abilities(where="a script", server="", prewarm=False, fork=False, attention=False, title="words",
                         window=0, model_window=0)  # fmt: skip

    @property
    def model(self) -> Any:
        raise ChatflowError("A scripted chat has no model.")

    @property
    def scheduler(self) -> None:
        return None

    @property
    def model_name(self) -> str:
        return "script"

    def default_system(self) -> str:
        return ""

    def bound(self, policy: SafetyPolicy) -> SafetyPolicy:
        return policy.without_model(NO_MODEL)

    def check(self, request: Any, tools: Any) -> None:
        """Every request can be answered."""

    def prewarm(self, turn: TurnSide) -> tuple[int, int]:
        raise ChatflowError("A scripted chat has no prompt cache.")

    def rounds(self, turn: TurnSide) -> ScriptedRounds:
        return ScriptedRounds(self, turn)

    def titler(self, policy: SafetyPolicy, needed: bool, emit: Callable[..., None]) -> NoTitle:
        return NoTitle()

    def with_model(self, model: Any) -> ScriptedAnswerer:
        raise ChatflowError("A scripted chat has no model to change.")


class NoTitle:
    def see(self, event: Event) -> None:
        pass

    def finish(self, log: list[Event]) -> None:
        pass


class ScriptedRounds:
    """One turn's rounds as the script says them."""

    def __init__(self, answerer: ScriptedAnswerer, turn: TurnSide):
        self.answerer, self.turn = answerer, turn
        self.streamer = Releaser(turn.publish, turn.gate)
        self.tokens = 0

    def answer(self, text: str, snippets: list) -> str:
        turn, outcome = self.turn, ToolOutcome(output="")
        self.answerer.heard.append({"system": turn.system, "user": text, "memory": list(snippets)})
        for number, said in enumerate(self.answerer.script):
            for piece in re.findall(r"\s*\S+", said.text.replace("{result}", outcome.output or outcome.error)):
                if turn.cancel.is_set():
                    return "cancelled"
                self.streamer.add(TokenDelta(index=0, token_id=-1, text="", logprob=0.0, entropy=0.0), piece)
                self.tokens += 1
                if self.answerer.on_token is not None:
                    self.answerer.on_token(self.tokens)
                if self.streamer.blocked is not None:
                    return "content_filter"
            if said.call is None:
                return "stop"
            name, arguments = said.call
            outcome = turn.run_tool(ToolCall(call_id=f"call_{number}", name=name, arguments=arguments),
                                    turn.setup.tools)  # fmt: skip
        return "tool_calls_exhausted"

    def usage(self) -> Usage:
        return Usage(prompt_tokens=None, completion_tokens=self.tokens)


def stop_at(chat: Any, n: int) -> Callable[[int], None]:
    """An `on_token` that stops `chat`'s running turn once its n-th token is out."""
    done = threading.Event()

    def hook(count: int) -> None:
        if count == n and not done.is_set():
            done.set()
            chat.stop()

    return hook
