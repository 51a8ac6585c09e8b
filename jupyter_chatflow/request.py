"""The request envelope: one validated value that says what a turn is asked to do.

`ChatRequest.build(text, **options)` is the single place options from the magic, the widget, the CLI or
`chat.send` are checked, so every entry point gives the same clear message for the same mistake.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from .defaults import CHAT_DEFAULTS
from .errors import ChatflowError, GenerationError
from .sampling import SamplingParams
from .tokenizer import clean_text

SAFETY_MODES = ("off", "input", "all")
TRIM_STRATEGIES = ("drop", "summarize")
TOOL_CHOICES = ("auto", "none", "required")
SAMPLING_OPTIONS = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repetition_penalty",
    "max_tokens",
    "stop",
    "seed",
    "ignore_eos",
)


class RequestError(ChatflowError):
    """A request option is unknown or out of range."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Features:
    """Which pipeline stages a turn uses."""

    tools: tuple[str, ...] = ()
    """Names of the tools the model may call (see `jupyter_chatflow.tools.Toolbox`)."""
    tool_choice: str = "auto"
    """auto | none | required | a tool's name, as in the OpenAI API."""
    memory: bool = True
    """Recall memories into the context and act on "remember that …" / "forget …"."""
    safety: str = "all"
    """off | input (scan only what the user sends) | all (input, model, output and tool layers)."""
    trim: str = "drop"
    """How old turns leave a full window: drop them, or summarize them with the model."""
    max_tool_rounds: int = 4
    """Bound on call → run → resume rounds in one turn."""

    def __post_init__(self) -> None:
        _check(self.safety in SAFETY_MODES, f"safety must be one of {'|'.join(SAFETY_MODES)}, got {self.safety!r}")
        _check(self.trim in TRIM_STRATEGIES, f"trim must be one of {'|'.join(TRIM_STRATEGIES)}, got {self.trim!r}")
        choice_ok = self.tool_choice in TOOL_CHOICES or self.tool_choice in self.tools
        _check(choice_ok, f"tool_choice must be auto|none|required or one of --tools, got {self.tool_choice!r}")
        _check(self.max_tool_rounds >= 1, f"max_tool_rounds must be >= 1, got {self.max_tool_rounds}")
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
        object.__setattr__(self, "text", clean_text(self.text))
        _check(bool(self.text.strip()), "The message is empty: type something to send.")
        _check(bool(self.session.strip()), "The session name is empty: pass --session NAME or leave it out.")

    @classmethod
    def build(cls, text: str, *, window: int | None = None, **options: Any) -> ChatRequest:
        """A request from flat options (temperature=…, tools=…, safety=…); unknown names are an error.

        `window` (the model's context length) bounds max_tokens.
        """
        feature_names = {f.name for f in dataclasses.fields(Features)}
        known = {"session", "system", "request_id", *SAMPLING_OPTIONS, *feature_names}
        unknown = sorted(set(options) - known)
        if unknown:
            raise RequestError(f"Unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}.")
        sampling = CHAT_DEFAULTS | {k: options.pop(k) for k in SAMPLING_OPTIONS if options.get(k) is not None}
        options = {k: v for k, v in options.items() if k not in SAMPLING_OPTIONS}  # the None ones
        if isinstance(sampling.get("stop"), (list, tuple)):
            sampling["stop"] = tuple(sampling["stop"])
        features = {k: options.pop(k) for k in feature_names if k in options}
        if isinstance(features.get("tools"), str):
            features["tools"] = tuple(t.strip() for t in features["tools"].split(",") if t.strip())
        params = _params(sampling, window)
        return cls(text=text, params=params, features=Features(**features), **options)

    def envelope(self) -> dict[str, Any]:
        """The request as JSON-ready fields (for the turn_started event and the log)."""
        params = dataclasses.asdict(self.params)
        params["stop"] = list(self.params.stop)
        features = dataclasses.asdict(self.features)
        features["tools"] = list(self.features.tools)
        return {"params": params, "features": features}


def _params(sampling: dict[str, Any], window: int | None) -> SamplingParams:
    try:
        params = SamplingParams(**sampling)
    except GenerationError as error:
        raise RequestError(str(error)) from None
    except TypeError as error:
        raise RequestError(f"A sampling option has the wrong type: {error}") from None
    if window is not None and params.max_tokens >= window:
        raise RequestError(
            f"max_tokens={params.max_tokens} does not fit the model's window of {window} tokens "
            f"(the prompt needs room too): use at most {window // 2}."
        )
    return params


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise RequestError(message)
