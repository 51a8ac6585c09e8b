"""The panel's protocol, declared once: the messages between the kernel and a view (both ways), the synced traits
(the turn rows, the live turn, the settings, the model info), and their check on arrival.

`ts_types.py` writes all of it as TypeScript into `js/src/protocol.generated.ts` (the events a message carries are
`events.generated.ts`'s), so the view's types are these; `tests/frontends/panel/test_ts_types.py` fails while the
file is out of date. A view's message is checked here before it is handled (`view_message`): an unknown one, or one
with a field missing or of the wrong type, gets a `request_error` reply, which the view shows.

What crosses once: a turn's events go out as `events` messages while it runs (every view of the widget receives
them); when it ends, the `turns` trait gains its row (ids and the figures the row shows, never its events); a view
that lacks a turn's events (a reload, a second view, a turn picked for detail) asks for them with `fetch`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypedDict, Union

from jupyter_chatflow.account.record import AccountStatus
from jupyter_chatflow.events import SegmentKind
from jupyter_chatflow.pipeline.chat import Prewarm
from jupyter_chatflow.settings import OPTIONS, Option


@dataclasses.dataclass(frozen=True)
class TsName:
    """The TypeScript name of the type it annotates (`Annotated[dict[str, Any], TsName("ChatEvent")]`): a dict
    the kernel builds from another declaration (an event's `to_dict()`, an account's) keeps that declaration's type."""

    name: str


EventDict = Annotated[dict[str, Any], TsName("ChatEvent")]
"""An event as `Event.to_dict()` writes it (`events.generated.ts` declares each)."""
AccountDict = Annotated[dict[str, Any], TsName("TurnAccount")]
"""A turn's account as `TurnAccount.to_dict()` writes it."""
PrewarmDict = Annotated[dict[str, Any], TsName("Prewarm")]
"""A draft's prewarm as `dataclasses.asdict(Prewarm)` writes it."""
SettingsDict = Annotated[dict[str, Any], TsName("Settings")]
"""The panel's settings: one key per option of `settings.OPTIONS` (`setting_types`)."""
Pieces = Annotated[dict[str, tuple[str, str]], TsName("Pieces")]
"""Token id (as a string) → [readable piece, hex of the token's bytes]: every prompt id, generated id and
alternative of the events it comes with."""

DEFINED = {"Pieces": Pieces}
"""The aliases above that are this module's own (the others name a type generated from elsewhere)."""
FROM_PYTHON = (Prewarm,)
"""Dataclasses of the package whose dicts cross as they are (their interfaces are generated from them)."""

PanelStatus = Literal["idle", "generating", "loading"]
"""What the panel is doing: nothing; a turn generates; a model chosen in the settings loads."""
AttentionMode = Literal["tokens", "segments"]
"""An attention map's columns: key positions, or the prompt's segments (each cell the attention mass on one)."""
InsideMethod = Literal["grad_x_input", "integrated_gradients"]
"""How `why` attributes a token to its input: gradient × input (one backward pass), or integrated gradients from a
zero input (`steps` passes, with progress)."""
InsideRequestKind = Literal["lens", "why"]
"""Which look inside the model a progress or error message is about."""
InsideStage = Literal["queued", "compiling", "computing"]
"""Where a look stands: waiting for the engine (a turn runs), XLA compiling its program, computing."""
ArrayDtype = Literal["int32", "float32"]
"""A binary buffer's element type (little-endian)."""


# ---- the synced traits ------------------------------------------------------------------------------------------


class TurnRow(TypedDict):
    """A finished turn as the `turns` trait holds it: what a view draws before it has the turn's events, and what
    it needs to ask for them. The events, their pieces and the whole account come in an `events` message."""

    turn_id: str
    fork_of: str
    """The turn this one regenerated from one of its tokens ("" unless it is a fork)."""
    prewarm: PrewarmDict | None
    """The draft's prewarm that ran before the turn (None when none did)."""
    user: str
    """The user's message, cut at `USER_CHARS` characters (the turn picker's label)."""
    status: AccountStatus
    finish_reason: str
    """Why a completed turn ended ("" for a turn that did not complete)."""
    answer_tokens: int
    call_tokens: int
    tokens_per_s: float | None
    ttft_ms: float | None
    generated_note: str
    """Every token the turn generated, named (the footer's tooltip)."""


USER_CHARS = 200


class LiveTurn(TypedDict):
    """The `live` trait: the turn now generating (its events come as `events` messages)."""

    turn_id: str
    prewarm: PrewarmDict | None
    fork_of: str


class ModelInfo(TypedDict):
    """The `model_info` trait: what the header, the settings and the attention view say about the model."""

    name: str
    layers: int
    """0 for a remote model, as are the other sizes: the server does not say how its model is built."""
    heads: int
    kv_heads: int
    context_length: int
    vocab_size: int
    tools: list[str]
    """The tools a turn may enable (the settings' checkboxes)."""
    remote: str
    """A remote chat's server (its base URL); "" for a local model."""
    file: str
    """The local model's GGUF file ("" when it has none, or it is remote)."""
    dtype: str
    """What its weights were dequantized to ("float32", "bfloat16"; "" for a remote model)."""
    summary: str
    """One line on what the file is: "name: architecture, parameters, quantization, context; weights as …"."""
    architecture: str
    """The GGUF's `general.architecture` ("llama", "qwen2", "gemma3"…; "" for a remote model)."""
    sliding_window: int
    """The sliding window of the layers in `sliding_layers` (0: the model has none, or it is remote)."""
    sliding_layers: list[int]
    """The layers that attend only to the last `sliding_window` positions (Gemma 2/3); the others are global."""
    probe_layers: list[int]
    """The layers after which the safety probe's directions steer (the layers it reads, from 0 as `steer` counts);
    empty where no probe was trained for the model (the steering form then offers only contrasting texts)."""
    probe_categories: list[tuple[str, str]]
    """The probe's hazard categories as [code, what it is] ("S1", "Violent Crimes"); empty where there is no probe."""


class PanelTraits(TypedDict):
    """The widget's synced traits (`ChatWidget`'s), as a view reads them; a reload gets them all."""

    turns: list[TurnRow]
    """The finished turns, oldest first, from this panel or any other sender on the chat."""
    live: LiveTurn | None
    settings: SettingsDict
    """The view edits them (`model.set` + `save_changes`); a turn sent from the panel uses them."""
    title: str
    """The session's title ("" until the model wrote one)."""
    session: str
    status: PanelStatus
    model_info: ModelInfo
    prewarm: PrewarmDict | None
    """The last draft's prewarm (the box under the input shows it)."""
    error: str
    """The last problem with a request from the panel (one line, names the fix); "" when none."""
    compiling: str
    """While a turn runs: what XLA is compiling now and for how long ("" when nothing is)."""
    loading: str
    """While a model chosen in the settings loads: what the file is, then how far the load is ("" otherwise)."""


def setting_type(option: Option) -> Any:
    """The type of one option's value in the panel's settings: lists as lists, choices as their literals."""
    if option.many:
        return list[option.type]  # type: ignore[name-defined]
    if option.choices:
        return Literal[option.choices]  # (Literal[("a", "b")] is Literal["a", "b"])
    return option.type | None if option.optional else option.type


def setting_types() -> dict[str, Any]:
    """The settings, option by option (`settings.OPTIONS`, the one declaration of them)."""
    return {option.name: setting_type(option) for option in OPTIONS}


# ---- view → kernel ----------------------------------------------------------------------------------------------


class SendRequest(TypedDict):
    """Start a turn with the panel's settings (refused while one generates)."""

    type: Literal["send"]
    text: str


class StopRequest(TypedDict):
    """Stop the live turn between two decode steps (it ends with a `cancelled` event)."""

    type: Literal["stop"]


class NewSessionRequest(TypedDict):
    """Archive the session and start an empty one (the panel clears its turns)."""

    type: Literal["new_session"]


class DraftRequest(TypedDict):
    """The box's text, ~400 ms after typing stopped: the kernel prefills the prompt it would make."""

    type: Literal["draft"]
    text: str


class FetchRequest(TypedDict):
    """Send the events of turn `turn_id` after sequence number `after` (-1: all), with their pieces and the turn's
    account, in an `events` message: a view asks for what it lacks (the live turn's after a reload mid-stream, a
    finished turn's it never received)."""

    type: Literal["fetch"]
    turn_id: str
    after: int


class AttentionRequest(TypedDict):
    """One layer's attention over a finished turn; the reply is an `attention` (or `attention_error`) message with
    the same `request_id`."""

    type: Literal["attention"]
    request_id: str
    turn_id: str
    layer: int
    head: int
    """A head, or -1: the mean over heads."""
    mode: AttentionMode
    rows_range: tuple[int, int] | None
    """The query positions to cover (left out: all): a segment cell clicked to drill down."""
    cols_range: tuple[int, int] | None


class ForkRequest(TypedDict):
    """Regenerate the answer of turn `turn_id` from its token `index`, with `token_id` in its place."""

    type: Literal["fork"]
    turn_id: str
    index: int
    token_id: int


class TextSteer(TypedDict):
    """Steer after `layer` along the direction from the `away` text to the `toward` text (`Model.direction`),
    `strength` times the residual's typical length there."""

    layer: int
    strength: float
    toward: str
    away: str


class ProbeSteer(TypedDict):
    """Steer after `layer` along the safety probe's direction for hazard `category` ("S1" … "S14"), `strength`
    times the residual's typical length there (`Probe.direction`; `layer` one of `ModelInfo.probe_layers`)."""

    layer: int
    strength: float
    category: str


class InterveneRequest(TypedDict):
    """Answer the latest turn `turn_id` again with attention heads knocked out (`heads`: [layer, head] pairs, from
    0) and/or the residual steered (`Chat.intervene`): a new turn beside it, which replaces it in the history."""

    type: Literal["intervene"]
    turn_id: str
    heads: list[tuple[int, int]]
    steer: TextSteer | ProbeSteer | None


class LoadModelRequest(TypedDict):
    """Load the GGUF file at `path` (as `dtype`; left out: the backend's default) for the chat's next turns."""

    type: Literal["load_model"]
    path: str
    dtype: str | None


class LensRequest(TypedDict):
    """The logit lens over a finished turn: what each layer would have predicted at each of its answer's tokens
    (and at each position of its last prompt). `inside_progress` messages say how far it is; the reply is a `lens`
    (or `inside_error`) message with the same `request_id`."""

    type: Literal["lens"]
    request_id: str
    turn_id: str


class WhyRequest(TypedDict):
    """Which positions of its input made answer token `index` of a finished turn (`Model.attribution`); the reply
    is a `why` (or `inside_error`) message with the same `request_id`, after `inside_progress` messages."""

    type: Literal["why"]
    request_id: str
    turn_id: str
    index: int
    """The answer token's `index` (its `token` event's)."""
    method: InsideMethod
    contrast_token_id: int | None
    """Explain the token rather than this one ("why this rather than that"; left out: the token alone)."""
    steps: int | None
    """Integrated gradients' steps (left out: `inside_requests.STEPS`)."""


ViewMessage = (
    SendRequest | StopRequest | NewSessionRequest | DraftRequest | FetchRequest | AttentionRequest | ForkRequest
    | InterveneRequest | LoadModelRequest | LensRequest | WhyRequest
)  # fmt: skip
"""What a view sends the kernel (`model.send(msg)`)."""


# ---- kernel → view ----------------------------------------------------------------------------------------------


class EventsMessage(TypedDict):
    """A batch of a turn's events (every ~40 ms while it runs, or a `fetch`'s reply), the pieces of the tokens in
    them, and the turn's account when it is due (at most every 0.2 s while it streams; always at its end and in a
    reply). A view keeps each event once, by its sequence number."""

    type: Literal["events"]
    turn_id: str
    events: list[EventDict]
    pieces: Pieces
    account: AccountDict | None


class AttentionSegment(TypedDict):
    """A column group of a `segments` map: a segment of the prompt (or "generated"), as token positions."""

    label: str
    kind: SegmentKind
    start: int
    end: int


class AttentionMessage(TypedDict):
    """An attention map, its matrix in the message's one binary buffer (row-major float16, little-endian)."""

    type: Literal["attention"]
    request_id: str
    turn_id: str
    layer: int
    head: int
    mode: AttentionMode
    shape: tuple[int, int]
    dtype: Literal["float16"]
    tokens: int
    """The sequence's length: the final prompt's tokens, then the generated ones."""
    prompt_tokens: int
    pool: int
    """Each cell averages `pool` × `pool` positions (1: one position a side)."""
    rows_range: tuple[int, int]
    cols_range: tuple[int, int]
    segments: list[AttentionSegment]
    window: int
    """The layer's sliding window: a query at p sees keys p - window + 1 … p (0: a global layer)."""


class AttentionErrorMessage(TypedDict):
    """Why an attention request could not be answered."""

    type: Literal["attention_error"]
    request_id: str
    message: str


class ArrayInfo(TypedDict):
    """One binary buffer of a message: its name, element type and shape (row-major)."""

    name: str
    dtype: ArrayDtype
    shape: list[int]


class LensMessage(TypedDict):
    """The logit lens over a turn: each residual read through the final norm and the output head, before the first
    layer (row 0) and after each layer (row i; the last row is the model's own prediction). Per answer token, at
    the position that predicted it: the top `k` tokens of each row, and the chosen token and its alternatives
    row by row (`series`). The arrays are the message's binary buffers, in the order `arrays` lists them:
    `top_ids` int32 [N, layers + 1, k], `top_logprobs` float32 [N, layers + 1, k], `series_ranks` int32
    [N, M, layers + 1] (1: the top choice; 0: below the top `depth`, not known), `series_logprobs` float32
    [N, M, layers + 1] (NaN where the rank is 0), `prompt_logprobs` float32 [prompt_tokens]."""

    type: Literal["lens"]
    request_id: str
    turn_id: str
    layers: int
    k: int
    depth: int
    """A `series` token's rank and log-probability are known where it is among a row's top `depth`."""
    indices: list[int]
    """The answer tokens covered (their `index`), the arrays' first axis (N)."""
    positions: list[int]
    """Per answer token, the position of its round's sequence (prompt, then the answer) that predicted it."""
    series: list[list[int]]
    """Per answer token, the ids read row by row: the chosen token, then the other alternatives the sampler saw
    (-1 pads every list to M)."""
    settled: list[int]
    """Per answer token, the first row from which it was the top choice through the last row (-1: it is not the
    model's top choice at the last row: the sampler took a lower one)."""
    prompt_tokens: int
    """The turn's last prompt's length (its round's tokens are the last of `indices`)."""
    prompt_top: list[int]
    """Per position of that prompt, the model's top choice for the next token (the last row's)."""
    prompt_settled: list[int]
    """Per position of that prompt, the first row from which `prompt_top` was the top choice through the last."""
    message_end: int
    """The position of the user's message's last token in that prompt (-1: it has none)."""
    arrays: list[ArrayInfo]
    pieces: Pieces
    """Every id of the top lists, of `series` and of `prompt_top`."""
    compile_ms: float
    """XLA compile time in this look (a program is compiled for each look's shapes, then let go)."""
    compute_ms: float
    """The whole look on the engine thread, compile included."""


class WhySegment(TypedDict):
    """A segment of a `why` input: a part of the prompt, or the answer before the token."""

    label: str
    kind: SegmentKind
    tokens: int
    value: float
    """The sum of its positions' values."""


class WhyMessage(TypedDict):
    """Which positions of its input made answer token `index`: per position, the sum over the hidden dimension of
    gradient × input of log p(token) (less log p(contrast)) after the input's last position, and the sums per
    segment. The input is the token's round's prompt, then the answer before the token."""

    type: Literal["why"]
    request_id: str
    turn_id: str
    index: int
    method: InsideMethod
    steps: int
    """Integrated gradients' steps (0 for gradient × input)."""
    target_id: int
    contrast_id: int | None
    target_logprob: float
    """log p of the token under the model where it was chosen (its `token` event's)."""
    contrast_logprob: float | None
    ids: list[int]
    prompt_tokens: int
    values: list[float]
    column: list[int]
    """Per position, its segment in `segments`."""
    segments: list[WhySegment]
    total: float
    """The sum of all values."""
    note: str
    """What to know about these values (integrated gradients that do not add up); "" when nothing."""
    compile_ms: float
    compute_ms: float


class InsideProgressMessage(TypedDict):
    """How far a `lens` or `why` request is, every ~0.25 s while it waits or computes."""

    type: Literal["inside_progress"]
    request_id: str
    request: InsideRequestKind
    stage: InsideStage
    done: int
    """Integrated gradients' steps done (0 otherwise)."""
    total: int
    """Integrated gradients' steps in all (0 otherwise)."""
    text: str
    """The stage in words ("XLA compiles this look's program, 1.2 s so far")."""
    elapsed_ms: float


class InsideErrorMessage(TypedDict):
    """Why a `lens` or `why` request could not be answered (the view shows `message`)."""

    type: Literal["inside_error"]
    request_id: str
    request: InsideRequestKind
    message: str


class PrewarmedMessage(TypedDict):
    """A draft's prefix went into the prompt cache."""

    type: Literal["prewarmed"]
    prewarm: PrewarmDict


class RequestErrorMessage(TypedDict):
    """A view's message the kernel could not take: an unknown type, a field missing or of the wrong type, or a
    request for what is not there. The view shows `message`."""

    type: Literal["request_error"]
    request: str
    """The message's `type` ("" when it had none)."""
    message: str


KernelMessage = (
    EventsMessage | AttentionMessage | AttentionErrorMessage | PrewarmedMessage | RequestErrorMessage | LensMessage
    | WhyMessage | InsideProgressMessage | InsideErrorMessage
)  # fmt: skip
"""What the kernel sends a view (`model.on("msg:custom", …)`); every view of the widget receives each."""

VIEW_MESSAGES: dict[str, type] = {typing.get_args(typing.get_type_hints(c)["type"])[0]: c
                                  for c in typing.get_args(ViewMessage)}  # fmt: skip
"""Each view message's class by its `type`."""


# ---- a view's message on arrival --------------------------------------------------------------------------------


class ProtocolError(ValueError):
    """A view's message is not one of `ViewMessage` (the reply says why, in one line)."""


def view_message(content: object) -> ViewMessage:
    """`content` as the view message it is (a field whose type allows None may be left out: None), or
    ProtocolError saying what is wrong with it."""
    if not isinstance(content, Mapping):
        raise ProtocolError(f"The panel sent {type(content).__name__}, not a message (an object with a type).")
    kind = content.get("type")
    cls = VIEW_MESSAGES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        known = ", ".join(VIEW_MESSAGES)
        raise ProtocolError(f"The panel sent an unknown request {kind!r} (the kernel takes {known}).")
    hints = typing.get_type_hints(cls, include_extras=True)
    extra = sorted(set(content) - set(hints))
    if extra:
        raise ProtocolError(f"The panel's {kind!r} request has fields it should not: {', '.join(map(str, extra))}.")
    message = {}
    for name, hint in hints.items():
        if name not in content and not _allows_none(hint):
            raise ProtocolError(f"The panel's {kind!r} request has no {name!r}.")
        value = content.get(name)
        problem = type_problem(value, hint)
        if problem:
            raise ProtocolError(f"The panel's {kind!r} request is malformed: {name} {problem}.")
        message[name] = value
    return typing.cast(ViewMessage, message)


def type_problem(value: Any, hint: Any) -> str:
    """Why `value` (as JSON decodes it) is not of type `hint` ("" when it is)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return type_problem(value, args[0])
    if hint is Any:
        return ""
    if origin is Literal:
        return "" if value in args else f"must be one of {', '.join(map(repr, args))}, got {value!r}"
    if origin in (Union, types.UnionType):
        problems = [type_problem(value, a) for a in args]
        return "" if "" in problems else f"must be {' or '.join(_name(a) for a in args)}, got {_shown(value)}"
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return f"must be a list, got {_shown(value)}"
        items = args if origin is tuple and Ellipsis not in args else [args[0]] * len(value) if args else []
        if len(items) != len(value):
            return f"must hold {len(items)} items, got {len(value)}"
        found = ((k, type_problem(v, t)) for k, (v, t) in enumerate(zip(value, items, strict=True)))
        return next((f"[{k}] {p}" for k, p in found if p), "")
    if origin is dict:
        if not isinstance(value, dict):
            return f"must be an object, got {_shown(value)}"
        return next((f"[{k!r}] {p}" for k, v in value.items() if (p := type_problem(v, args[1]))), "")
    if _is_typed_dict(hint):
        if not isinstance(value, dict):
            return f"must be an object, got {_shown(value)}"
        fields = typing.get_type_hints(hint, include_extras=True)
        return next((f".{k} {p}" for k, t in fields.items() if (p := type_problem(value.get(k), t))), "")
    if hint is type(None):
        return "" if value is None else f"must be null, got {_shown(value)}"
    if hint is float:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return "" if number else f"must be a number, got {_shown(value)}"
    if hint is int:
        whole = isinstance(value, int) and not isinstance(value, bool)
        return "" if whole else f"must be a whole number, got {_shown(value)}"
    if hint in (str, bool):
        return "" if isinstance(value, hint) else f"must be a {_name(hint)}, got {_shown(value)}"
    raise TypeError(f"protocol.py: no check for {hint!r}")


def _allows_none(hint: Any) -> bool:
    return type(None) in typing.get_args(hint)


def _is_typed_dict(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint, "__required_keys__")


def _name(hint: Any) -> str:
    names = {str: "string", bool: "boolean", int: "whole number", float: "number", type(None): "null"}
    if typing.get_origin(hint) is tuple:
        return "a pair" if len(typing.get_args(hint)) == 2 else "a list"
    return names.get(hint, getattr(hint, "__name__", repr(hint)))


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{text if len(text) <= 40 else text[:39] + '…'} ({type(value).__name__})"
