"""The request envelope: one validated value that says what a turn is asked to do.

`ChatRequest.build(text, **options)` is the single place options from the magic, the widget, the CLI or
`chat.send` are checked, so every entry point gives the same clear message for the same mistake.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.errors import ChatflowError, GenerationError
from jupyter_chatflow.settings import DEFAULTS, names, option
from jupyter_chatflow.tokenizer.tokenizer import clean_text

SAFETY_MODES = option("safety").choices
TRIM_STRATEGIES = option("trim").choices
TOOL_CHOICES = ("auto", "none", "required")
SAMPLING_OPTIONS = names("sampling")
FEATURE_OPTIONS = names("features")


class RequestError(ChatflowError):
    """A request option is unknown or out of range."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Features:
    """Which pipeline stages a turn uses."""

    tools: tuple[str, ...] = DEFAULTS["tools"]
    """Names of the tools the model may call (see `jupyter_chatflow.pipeline.tools.Toolbox`)."""
    tool_choice: str = DEFAULTS["tool_choice"]
    """auto | none | required | a tool's name, as in the OpenAI API."""
    memory: bool = DEFAULTS["memory"]
    """Recall memories into the context and act on "remember that …" / "forget …"."""
    safety: str = DEFAULTS["safety"]
    """off | input (scan only what the user sends) | all (input, model, output and tool layers)."""
    trim: str = DEFAULTS["trim"]
    """How old turns leave a full window: drop them, or summarize them with the model."""
    max_tool_rounds: int = DEFAULTS["max_tool_rounds"]
    """Bound on call → run → resume rounds in one turn."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tools", _tool_names(self.tools))
        _check(isinstance(self.memory, bool), f"memory must be True or False, got {self.memory!r}")
        _check(isinstance(self.tool_choice, str), f"tool_choice must be a string, got {self.tool_choice!r}")
        _check(self.safety in SAFETY_MODES, f"safety must be one of {'|'.join(SAFETY_MODES)}, got {self.safety!r}")
        _check(self.trim in TRIM_STRATEGIES, f"trim must be one of {'|'.join(TRIM_STRATEGIES)}, got {self.trim!r}")
        choice_ok = self.tool_choice in TOOL_CHOICES or self.tool_choice in self.tools
        _check(choice_ok, f"tool_choice must be auto|none|required or one of --tools, got {self.tool_choice!r}")
        rounds = self.max_tool_rounds
        whole = isinstance(rounds, int) and not isinstance(rounds, bool)
        _check(whole and rounds >= 1, f"max_tool_rounds must be a whole number >= 1, got {rounds!r}")
        if self.tool_choice == "required" and not self.tools:
            raise RequestError("tool_choice 'required' needs at least one tool: add --tools calculator (for example).")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChatRequest:
    """What one turn is asked to do: the user's text, the sampler's knobs and the features it uses."""

    text: str
    session: str = "default"
    system: str | None = None
    """The system prompt; None keeps the session's (or the default)."""
    params: SamplingParams = dataclasses.field(default_factory=SamplingParams)
    features: Features = dataclasses.field(default_factory=Features)
    request_id: str = dataclasses.field(default_factory=lambda: f"req_{uuid.uuid4().hex[:16]}")
    fork_of: str = ""
    """A fork regenerates this turn's answer from token `fork_index` (see `Chat.fork`)."""
    fork_index: int = -1

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise RequestError(f"The message must be text (str), got {type(self.text).__name__}.")
        object.__setattr__(self, "text", _whole_text(self.text, "The message"))
        _check(bool(self.text.strip()), "The message is empty: type something to send.")
        _check(isinstance(self.session, str), f"session must be a name (str), got {self.session!r}")
        _check(bool(self.session.strip()), "The session name is empty: pass --session NAME or leave it out.")
        _check(self.system is None or isinstance(self.system, str), f"system must be text or None, got {self.system!r}")
        if self.system is not None:
            object.__setattr__(self, "system", _whole_text(self.system, "The system prompt"))

    @classmethod
    def build(cls, text: str, *, window: int | None = None, **options: Any) -> ChatRequest:
        """A request from flat options (temperature=…, tools=…, safety=…), each checked for its type and range
        here, before anything runs: an unknown name or a bad value is a `RequestError` naming the option and what
        it allows. None stands for the option's default. `window` (the model's context length) bounds max_tokens.
        """
        known = {"session", "system", "request_id", *SAMPLING_OPTIONS, *FEATURE_OPTIONS}
        unknown = sorted(set(options) - known)
        if unknown:
            raise RequestError(f"Unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}.")
        given = {k: v for k, v in options.items() if v is not None}  # None means the default
        chat_defaults = {k: DEFAULTS[k] for k in SAMPLING_OPTIONS}  # a turn's, not the plain sampler's
        sampling = chat_defaults | {k: v for k, v in given.items() if k in SAMPLING_OPTIONS}
        features = Features(**{k: v for k, v in given.items() if k in FEATURE_OPTIONS})
        envelope = {k: v for k, v in given.items() if k in ("session", "system", "request_id")}
        return cls(text=text, params=_params(sampling, window), features=features, **envelope)

    def envelope(self) -> dict[str, Any]:
        """The request as JSON-ready fields (for the turn_started event and the log)."""
        params = dataclasses.asdict(self.params)
        params["stop"] = list(self.params.stop)
        del params["penalty_from"]  # (the round's, set by the pipeline: not a knob of the request)
        features = dataclasses.asdict(self.features)
        features["tools"] = list(self.features.tools)
        return {"params": params, "features": features}


def _params(sampling: dict[str, Any], window: int | None) -> SamplingParams:
    """The sampler's options, each checked for its type and range (`SamplingParams`), max_tokens against the window."""
    try:
        params = SamplingParams(**sampling)
    except GenerationError as error:
        raise RequestError(str(error)) from None
    if window is not None and params.max_tokens >= window:  # the prompt needs at least one of the window's tokens
        raise RequestError(
            f"max_tokens must be from 1 to {window - 1} (the model's window is {window} tokens, shared by the "
            f"prompt and the answer), got {params.max_tokens}."
        )
    return params


def _tool_names(tools: Any) -> tuple[str, ...]:
    """Tool names from "a, b" or ["a", "b"]; anything else (a nested list, a number) is an error."""
    names = tools.split(",") if isinstance(tools, str) else tools
    if not isinstance(names, (list, tuple)) or not all(isinstance(name, str) for name in names):
        raise RequestError(f"tools must be names, as 'calculator,variable' or a list of str, got {tools!r}")
    return tuple(name.strip() for name in names if name.strip())


def _whole_text(text: str, what: str) -> str:
    """`text` with any surrogate pair written as two code points joined (a JavaScript string's emoji); a lone
    surrogate ("\\ud800") is refused, naming where it is: it is no character, no tokenizer can encode it, and
    replacing it would answer a message the user did not write. The server refuses it the same way (a 400)."""
    try:
        return clean_text(text.encode("utf-16", "surrogatepass").decode("utf-16"))
    except UnicodeDecodeError:
        at = next(i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff" and not _paired(text, i))
        raise RequestError(
            f"{what} holds a lone UTF-16 surrogate (U+{ord(text[at]):04X}) at character {at}: it is not text, and no "
            "tokenizer can encode it. Send the character itself (or both halves of its pair)."
        ) from None


def _paired(text: str, i: int) -> bool:
    high, low = ("\ud800", "\udbff"), ("\udc00", "\udfff")
    if high[0] <= text[i] <= high[1]:
        return i + 1 < len(text) and low[0] <= text[i + 1] <= low[1]
    return i > 0 and high[0] <= text[i - 1] <= high[1]


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise RequestError(message)
