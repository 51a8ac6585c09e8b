"""Every option of a turn, declared once: its name, type, default, allowed range and help.

The sampler's defaults (`SamplingParams`), the request's checks (`ChatRequest.build`), the `chatflow chat` flags,
the `%%chat` arguments with their `%config ChatMagics.<name>` traits, and the panel's settings are all derived from
`OPTIONS`, so an option is spelled, defaulted and bounded in one place. Standard library only: the CLI reads this
before JAX loads.

Each sampler knob also declares the value at which it does nothing (`off`): the engine's `Model.generate` and
`SamplingParams` start from those (a plain sampler, for looking at the model itself), a chat turn from the
defaults: SmolLM2's model card (temperature 0.2, top-p 0.9) plus a mild repetition penalty over the answer alone.
Why, as measured: docs/sampling.md#the-repetition-penalty-over-the-answer-alone.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any, Literal

MAX_SEED = 2**32 - 1
"""Seeds are 32-bit in JAX's default mode: a larger one would give the same stream as a smaller one."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Option:
    """One option of a turn."""

    name: str
    """As Python spells it (`max_tokens`); the flag is `--max-tokens`."""
    type: type
    """bool, int, float or str (for `many`: the type of each item)."""
    default: Any
    help: str
    stage: Literal["sampling", "features"]
    """Where it acts: the sampler (`SamplingParams`) or the pipeline's features (`Features`)."""
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    """The range excludes `low` itself (top_p > 0)."""
    open_high: bool = False
    note: str = ""
    """What a special value means, said with the range ("0 is greedy")."""
    choices: tuple[str, ...] = ()
    many: bool = False
    """A list of `type` (stop strings, tool names)."""
    repeated: bool = False
    """For a list: given once per item on a command line (`--stop A --stop B`); else one comma-separated value
    (`--tools calculator,variable`)."""
    optional: bool = False
    """None is allowed (and is the default: the seed)."""
    off: Any = None
    """For a sampler knob: the value at which it changes nothing (temperature 1: the model's own distribution;
    repetition penalty 1). `SamplingParams` and `Model.generate` start from these, the engine's plain sampler; a
    chat turn (the CLI, the magics, the panel, `Chat.send`) from `default`."""

    @property
    def sampler_default(self) -> Any:
        return self.default if self.off is None else self.off

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def range_text(self) -> str:
        """The allowed values as an error message says them: ">= 0 (0 is greedy)", "in (0, 1]"."""
        if self.low is not None and self.high is not None:
            left, right = "(" if self.open_low else "[", ")" if self.open_high else "]"
            text = f"in {left}{_number(self.low)}, {_number(self.high)}{right}"
        elif self.low is not None:
            text = f"{'>' if self.open_low else '>='} {_number(self.low)}"
        else:
            text = "any value"
        return f"{text} ({self.note})" if self.note else text

    def in_range(self, value: float) -> bool:
        above = self.low is None or (value > self.low if self.open_low else value >= self.low)
        below = self.high is None or (value < self.high if self.open_high else value <= self.high)
        return above and below


OPTIONS: tuple[Option, ...] = (
    Option(name="temperature", type=float, default=0.2, off=1.0, stage="sampling", low=0, note="0 is greedy",
           help="Divides the logits: lower is more predictable; 0 always takes the most likely token."),
    Option(name="top_k", type=int, default=0, off=0, stage="sampling", low=0, note="0 keeps all tokens",
           help="Keep only the k most likely tokens."),
    Option(name="top_p", type=float, default=0.9, off=1.0, stage="sampling", low=0, open_low=True, high=1,
           help="Nucleus sampling: keep the smallest set of tokens whose probability sums to at least p."),
    Option(name="min_p", type=float, default=0.0, off=0.0, stage="sampling", low=0, high=1, open_high=True,
           help="Drop tokens less likely than min_p times the most likely one; 0 keeps all."),
    Option(name="repetition_penalty", type=float, default=1.1, off=1.0, stage="sampling", low=0, open_low=True,
           note="1 is off", help="Make tokens already in the answer less likely (a chat counts its answer alone)."),
    Option(name="max_tokens", type=int, default=256, stage="sampling", low=1,
           help="The longest answer, in tokens."),
    Option(name="stop", type=str, default=(), stage="sampling", many=True, repeated=True,
           help="Stop as soon as the answer contains one of these strings (not included in the answer)."),
    Option(name="seed", type=int, default=None, stage="sampling", low=0, high=MAX_SEED, optional=True,
           help="Seed of the random stream: the same seed and prompt give the same answer; unset picks one."),
    Option(name="ignore_eos", type=bool, default=False, stage="sampling",
           help="Keep generating past the model's stop tokens (for benchmarks: always exactly max_tokens)."),
    Option(name="tools", type=str, default=(), stage="features", many=True,
           help="Tools the model may call: NAME[,NAME…] (calculator, variable, remember, recall, python)."),
    Option(name="tool_choice", type=str, default="auto", stage="features",
           help="auto | none | required | a tool's name, as in the OpenAI API."),
    Option(name="memory", type=bool, default=True, stage="features",
           help="Recall memories into the context and act on 'remember that …' / 'forget …'."),
    Option(name="safety", type=str, default="all", stage="features", choices=("off", "input", "all"),
           help="Safety layers: off | input (scan only what the user sends) | all (input, model, output, tool)."),
    Option(name="trim", type=str, default="drop", stage="features", choices=("drop", "summarize"),
           help="How old turns leave a full window: drop them, or summarize them with the model."),
    Option(name="max_tool_rounds", type=int, default=4, stage="features", low=1,
           help="The most call → run → resume rounds in one turn."),
)  # fmt: skip
BY_NAME = {option.name: option for option in OPTIONS}
DEFAULTS: dict[str, Any] = {option.name: option.default for option in OPTIONS}
"""What a chat turn uses for an option it is not given."""
SAMPLER_DEFAULTS: dict[str, Any] = {o.name: o.sampler_default for o in OPTIONS if o.stage == "sampling"}
"""What the engine's plain sampler (`SamplingParams`, `Model.generate`) uses: every filter and penalty off."""


def option(name: str) -> Option:
    return BY_NAME[name]


def names(stage: str) -> tuple[str, ...]:
    """The options of one stage, in declaration order."""
    return tuple(o.name for o in OPTIONS if o.stage == stage)


def sampler_numbers() -> tuple[Option, ...]:
    """The sampler's number knobs (temperature … seed): what `SamplingParams` range-checks and the panel's
    settings form draws as number fields."""
    return tuple(o for o in OPTIONS if o.stage == "sampling" and o.type in (int, float) and not o.many)


def number_error(name: str, value: Any) -> str | None:
    """Why `value` is no good for the numeric option `name` (None if it is): the message names the range."""
    spec = BY_NAME[name]
    whole = spec.type is int
    if spec.optional and value is None:
        return None
    if _is_number(value, whole=whole) and spec.in_range(value):
        return None
    if spec.optional:
        span = f"from {_number(spec.low)} to {_number(spec.high)}"
        return f"{name} must be None or a whole number {span}; got {shown(value)}"
    kind = "a whole number" if whole else "a finite number"
    return f"{name} must be {spec.range_text()}, {kind}; got {shown(value)}"


def shown(value: object) -> str:
    """A value for an error message, with its type where the repr alone could mislead (True, '5')."""
    text = repr(value)
    text = text if len(text) <= 60 else text[:59] + "…"
    plain = isinstance(value, (int, float)) and not isinstance(value, bool)
    return text if plain else f"{text} ({type(value).__name__})"


def _is_number(value: object, *, whole: bool) -> bool:
    """A real number (not a bool): an integer when `whole`, else finite (no NaN, no infinity)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return isinstance(value, numbers.Integral) if whole else math.isfinite(value)


def _number(value: float | None) -> str:
    return str(int(value)) if value is not None and float(value).is_integer() else str(value)
