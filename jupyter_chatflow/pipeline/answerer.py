"""Who writes the model's part of a turn: the seam between the one `Turn` and whatever answers it.

A turn runs the same stages whoever answers (`turn.Turn`: scan → recall → rounds → run a call → check →
remember → end). The rounds are the answerer's: the local engine (`local.LocalAnswerer`), an OpenAI-compatible
server (`remote.ServerAnswerer`), or a script in tests (`tests/pipeline/scripted.py`, passed as
`Chat(answerer=…)`). `Chat` picks one in its constructor (`base_url=` or not) and never asks again where its turns
go; a front end asks `abilities` what the answerer can do (prewarm a draft, fork an answer, show attention, write
a title with the model, the window).

The shape is simonw/llm's `Model.execute` under one tool loop: the answerer writes one round's text or call,
the turn runs the call and asks again.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from jupyter_chatflow.events import Event, Intervened, TitleGenerated

if TYPE_CHECKING:
    from jupyter_chatflow.engine.generation import Step
    from jupyter_chatflow.engine.model import Model
    from jupyter_chatflow.engine.scheduler import Scheduler
    from jupyter_chatflow.events import SafetyDecision, ToolCall, Usage
    from jupyter_chatflow.store.memory import Memory

    from .release import Releaser
    from .request import ChatRequest
    from .safety import SafetyPolicy
    from .safety.gate import OutputGate
    from .stream import Stage
    from .tools import Tool, ToolOutcome


@dataclasses.dataclass(frozen=True, kw_only=True)
class Abilities:
    """What an answerer can do: the front ends read this instead of asking where the turns go."""

    where: str
    """Where the turns are answered, in words: the model's name, or the server's base URL."""
    server: str
    """The base URL of the server that answers; "": this process's model (its generations run and compile here)."""
    prewarm: bool
    """A draft's prompt can be put into the prompt cache before it is sent (the cache is this process's)."""
    fork: bool
    """An answer can be regenerated from one of its tokens (the alternatives are token ids this side knows)."""
    attention: bool
    """The attention of a finished turn can be computed (the weights are here)."""
    title: Literal["model", "words"]
    """How a session's title is written: by the model beside the first answer, or from the user's first words."""
    window: int
    """The tokens a turn's prompt and answer may take (the model's window, or fewer to see trimming early); 0: the
    server's window applies (not known here)."""
    model_window: int
    """The model's context length, which bounds a request's max_tokens; 0: the server's (it checks)."""


@dataclasses.dataclass(kw_only=True)
class TurnSetup:
    """What a turn needs besides the request and its answerer: the session's state (`Chat` makes it; the turn and
    its answerer's rounds read it)."""

    session_id: str
    system: str = ""
    history: Sequence[Sequence[dict[str, str]]] = ()
    memory: Memory | None = None
    tools: Sequence[Tool] = ()
    policy: SafetyPolicy | None = None
    prefix: Sequence[Step] = ()
    """Tokens the answer starts with (a fork: the forked answer up to a token, then the chosen alternative)."""
    queued_ms: float = 0.0
    """How long the request waited for the chat's worker thread."""
    intervened: Intervened | None = None
    """What the answering model has changed (`Chat.intervene`): published right after the turn's start."""


class TurnSide(Protocol):
    """What an answerer's rounds use of the turn they answer (`turn.Turn`): its request and setup, the stages it
    runs for them (the input scan and recall for a prewarm, vetting and running a call), its clock and its events."""

    setup: TurnSetup
    request: ChatRequest
    cancel: threading.Event
    gate: OutputGate | None
    input_decisions: list[SafetyDecision]

    @property
    def system(self) -> str: ...

    def scan_input(self) -> str | None: ...

    def recall(self, text: str) -> list: ...

    def run_tool(self, call: ToolCall, tools: Sequence[Tool], error: str = "") -> ToolOutcome: ...

    def publish(self, event: Event) -> None: ...

    def timed(self, stage: Stage, started: float) -> float: ...


class Rounds(Protocol):
    """The model's part of one turn (`Answerer.rounds`): it streams its tokens through `streamer`."""

    @property
    def streamer(self) -> Releaser:
        """Releases the answer's tokens through the turn's output gate."""
        ...

    def answer(self, text: str, snippets: list) -> str:
        """Generate, running the tools the model calls (through the turn), until it answers; the finish reason."""
        ...

    def usage(self) -> Usage:
        """The turn's tokens, as the rounds counted them (a server's, as it reported them)."""
        ...


class Titler(Protocol):
    """Writes a session's title for one turn: `see` each event while it runs, `finish` with the whole log."""

    def see(self, event: Event) -> None: ...

    def finish(self, log: list[Event]) -> None: ...


class Answerer(Protocol):
    """Who writes the model's part of a chat's turns."""

    @property
    def abilities(self) -> Abilities: ...

    @property
    def model(self) -> Model:
        """The local model (a ChatflowError that says why where there is none)."""
        ...

    @property
    def scheduler(self) -> Scheduler | None:
        """What runs the local generations (None: nothing here does)."""
        ...

    @property
    def model_name(self) -> str:
        """The model's name as the telemetry records it."""
        ...

    def default_system(self) -> str:
        """The system prompt of a chat that sets none."""
        ...

    def bound(self, policy: SafetyPolicy) -> SafetyPolicy:
        """The safety policy with the answerer's model for its intent probe (or saying there is none)."""
        ...

    def check(self, request: ChatRequest, tools: Sequence[Tool]) -> None:
        """A RequestError before the turn is queued when it cannot be answered as asked (a forced call that
        cannot fit in max_tokens); a server checks its own."""
        ...

    def prewarm(self, turn: TurnSide) -> tuple[int, int]:
        """Put `turn`'s first prompt into the prompt cache without answering; (prompt tokens, tokens computed)."""
        ...

    def rounds(self, turn: TurnSide) -> Rounds:
        """The model's part of `turn`."""
        ...

    def titler(self, policy: SafetyPolicy, needed: bool, emit: Callable[[TitleGenerated], None]) -> Titler:
        """What writes the session's title for a turn (`needed`: the session has none yet)."""
        ...

    def with_model(self, model: Model) -> Answerer:
        """The same kind of answerer on another model (a ChatflowError where that cannot be)."""
        ...
