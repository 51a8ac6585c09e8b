"""A chat completion request's body, checked field by field: a wrong one is a 400 whose message and `param` name it.

The knobs are OpenAI's (temperature 1 and top_p 1 unless given, temperature at most 2; max_tokens below the
window, and none: up to the window) plus vLLM's extras `top_k` (-1 or 0: off), `min_p`, `repetition_penalty`
and `ignore_eos`. Unknown fields are left alone, as OpenAI's own clients send some this server has no use for
(`user`, `metadata`, `store`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from jupyter_chatflow.engine.programs import N_ALTERNATIVES
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.errors import GenerationError
from jupyter_chatflow.settings import number_error, shown

from .errors import APIError, bad_request

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
MAX_TOP_LOGPROBS = N_ALTERNATIVES  # the alternatives the engine computes at each step (OpenAI allows 20)
MAX_TEMPERATURE = 2.0  # OpenAI's range is 0 to 2; the engine would take more, this API does not
TOP_K_OFF = -1  # vLLM's spelling of "no top-k" (the engine's is 0)
MAX_STOP = 4  # stop strings per request, as OpenAI allows
_KNOBS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "seed")
_UNSUPPORTED_ZERO = ("frequency_penalty", "presence_penalty")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Message:
    """One message of the conversation: a tool call made (assistant `calls`) or a tool's result (`call_id`) too."""

    role: str
    content: str
    calls: tuple[Call, ...] = ()
    call_id: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Call:
    """A tool call an assistant message made: its id, the tool's name, the arguments."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CompletionRequest:
    """What a /v1/chat/completions body asks for, checked."""

    model: str
    messages: tuple[Message, ...]
    params: SamplingParams
    max_tokens_given: bool
    stream: bool = False
    include_usage: bool = False
    logprobs: bool = False
    top_logprobs: int = 0


def parse_json(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or a 400 that says where it broke: not JSON, not UTF-8, nested past what the
    parser can follow, a number JSON cannot carry (NaN, Infinity, 1e999), or a string that is not text (a lone
    surrogate such as "\\ud800": no tokenizer can encode it, so it is refused by its field, never replaced)."""
    try:
        data = json.loads(body, parse_constant=_no_constant, parse_float=_finite)
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as error:
        raise bad_request(f"The request body is not valid JSON: {error}.") from None
    except RecursionError:
        raise bad_request("The request body is nested too deeply to read (JSON objects within objects).") from None
    if not isinstance(data, dict):
        raise bad_request(f"The request body must be a JSON object; got {type(data).__name__}.")
    where = _broken_text(data)
    if where is not None:
        raise bad_request(f"{where or 'a key'} holds a lone UTF-16 surrogate (an escape such as \\ud800 with no "
                          "pair), which is not text: send the character itself, or its escaped pair.",
                          param=where or None)  # fmt: skip
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"the number {text[:20]} is out of range")
    return value


def _broken_text(data: Any) -> str | None:
    """The path of the first string (or key) in `data` holding a lone surrogate, e.g. "messages[0].content"; None
    when there is none. Walked without recursion (the parser allows nesting deeper than Python's stack)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return path
        elif isinstance(value, dict):
            for key, item in value.items():
                if _SURROGATE.search(key):
                    return path
                stack.append((f"{path}.{key}" if path else key, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
    return None


def parse_chat(data: dict[str, Any], served: str, window: int) -> CompletionRequest:
    """Check a chat completion body against the model this server serves (`served`, whose context window is
    `window` tokens)."""
    model = check_model(data, served)
    stream = _bool(data, "stream")
    max_tokens = _max_tokens(data, window)
    return CompletionRequest(
        model=model,
        messages=parse_messages(data.get("messages")),
        params=_params(data, max_tokens),
        max_tokens_given=max_tokens is not None,
        stream=stream,
        include_usage=_include_usage(data.get("stream_options"), stream),
        logprobs=_bool(data, "logprobs"),
        top_logprobs=_top_logprobs(data),
    )


def check_model(data: dict[str, Any], served: str) -> str:
    """The body's `model`: 400 when missing, 404 when it is not the served one."""
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("model is required: the id of a model from GET /v1/models.", param="model")
    if model != served:
        raise APIError(404, f"The model {model!r} does not exist on this server; it serves {served!r} "
                       "(GET /v1/models).", param="model", code="model_not_found")  # fmt: skip
    return model


def parse_messages(value: Any) -> tuple[Message, ...]:
    """The conversation ("developer" is "system"); 400 naming the message and field that is wrong."""
    if not isinstance(value, list) or not value:
        raise bad_request("messages must be a non-empty list of {role, content} objects.", param="messages")
    return tuple(_message(m, f"messages[{i}]") for i, m in enumerate(value))


def _message(message: Any, where: str) -> Message:
    if not isinstance(message, dict):
        raise bad_request(f"{where} must be an object with role and content.", param=where)
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        known = ", ".join(ROLES)
        raise bad_request(f"{where}.role must be one of {known}; got {shown(role)}.", param=f"{where}.role")
    calls = _calls(message.get("tool_calls"), f"{where}.tool_calls") if role == "assistant" else ()
    content = message.get("content")
    text = "" if content is None and calls else _content(content, f"{where}.content")
    call_id = message.get("tool_call_id")
    if role == "tool" and not (isinstance(call_id, str) and call_id):
        where_id = f"{where}.tool_call_id"
        raise bad_request(f"{where_id} must name the call this result answers.", param=where_id)
    return Message(role=ROLES[role], content=text, calls=calls, call_id=call_id or "")


def _calls(value: Any, where: str) -> tuple[Call, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad_request(f"{where} must be a list of calls.", param=where)
    return tuple(_call(c, f"{where}[{i}]") for i, c in enumerate(value))


def _call(call: Any, where: str) -> Call:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not call.get("id"):
        raise bad_request(f"{where} must be {{id, type: function, function: {{name, arguments}}}}.", param=where)
    try:
        arguments = json.loads(function.get("arguments") or "{}", parse_constant=_no_constant, parse_float=_finite)
    except (TypeError, ValueError, RecursionError):  # (json.JSONDecodeError is a ValueError)
        arguments = None
    if not isinstance(arguments, dict):
        raise bad_request(f"{where}.function.arguments must be a JSON object as a string.", param=f"{where}.function")
    return Call(id=str(call["id"]), name=function["name"], arguments=arguments)


def _content(content: Any, where: str) -> str:
    """A message's text: a string, or a list of text parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        texts = [p.get("text") for p in content]
        if all(isinstance(t, str) for t in texts):
            return "".join(texts)  # type: ignore[arg-type]
    raise bad_request(f"{where} must be a string or a list of text parts; only text is supported.", param=where)


def _params(data: dict[str, Any], max_tokens: int | None) -> SamplingParams:
    """The sampler's knobs, each range-checked (`max_tokens` is checked already: `_max_tokens`)."""
    for name in _UNSUPPORTED_ZERO:
        if data.get(name) not in (None, 0, 0.0):
            raise bad_request(f"{name} is not supported by this server; use repetition_penalty.", param=name)
    if data.get("n") not in (None, 1):
        raise bad_request("n must be 1: this server makes one choice per request.", param="n")
    for name in ("functions", "logit_bias"):
        if data.get(name):
            raise bad_request(f"{name} is not supported by this server yet.", param=name)
    knobs: dict[str, Any] = {k: data[k] for k in _KNOBS if data.get(k) is not None}
    if _is_int(knobs.get("top_k"), TOP_K_OFF):
        knobs["top_k"] = 0
    for name, value in knobs.items():
        error = _knob_error(name, value)
        if error:
            raise bad_request(error, param=name)
    if max_tokens is not None:
        knobs["max_tokens"] = max_tokens
    stop = data.get("stop")
    if stop is not None:
        knobs["stop"] = _stop(stop)
    knobs["ignore_eos"] = _bool(data, "ignore_eos")
    return SamplingParams(**knobs)


def _knob_error(name: str, value: Any) -> str | None:
    """Why a knob's value is no good (None if it is): the engine's range, narrowed to OpenAI's 0 to 2 for
    temperature, and for top_k with vLLM's -1 named too."""
    error = number_error(name, value)
    if name == "temperature" and (error or value > MAX_TEMPERATURE):
        return f"temperature must be a number from 0 to {MAX_TEMPERATURE:g} (0 is greedy); got {shown(value)}."
    if name == "top_k" and error:
        return f"top_k must be a whole number >= 0 (0, or -1 as vLLM spells it, is off); got {shown(value)}."
    return error


def _is_int(value: Any, wanted: int) -> bool:
    """`value` is the integer `wanted` (not a bool, not a float that equals it)."""
    return isinstance(value, int) and not isinstance(value, bool) and value == wanted


def _max_tokens(data: dict[str, Any], window: int) -> int | None:
    """max_completion_tokens, else max_tokens (its older name), else None (up to the window); the whole window or
    more can never be generated (the prompt takes some of it), so asking for it is a 400, not a silent cut."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = data.get(name)
        if value is not None:
            error = number_error("max_tokens", value)
            if error:
                raise bad_request(error.replace("max_tokens", name, 1), param=name)
            if value >= window:  # the prompt needs at least one of the window's tokens
                raise bad_request(f"{name} must be from 1 to {window - 1} (the model's window is {window} tokens, "
                                  f"shared by the prompt and the answer); got {value}.", param=name)  # fmt: skip
            return int(value)
    return None


def _stop(stop: Any) -> tuple[str, ...]:
    """Up to 4 stop strings; one string is one stop string, and [] is none."""
    strings = [stop] if isinstance(stop, str) else stop
    if not isinstance(strings, list) or len(strings) > MAX_STOP:
        raise bad_request(f"stop must be a string or a list of up to {MAX_STOP} strings; got {shown(stop)}.",
                          param="stop")  # fmt: skip
    try:
        return SamplingParams(stop=tuple(strings)).stop
    except GenerationError as error:
        raise bad_request(str(error), param="stop") from None


def _include_usage(options: Any, stream: bool) -> bool:
    if options is None:
        return False
    if not stream:
        raise bad_request("stream_options is only allowed when stream is true.", param="stream_options")
    if not isinstance(options, dict):
        raise bad_request("stream_options must be an object.", param="stream_options")
    return _bool(options, "include_usage", "stream_options.")


def _top_logprobs(data: dict[str, Any]) -> int:
    value = data.get("top_logprobs")
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOP_LOGPROBS:
        raise bad_request(f"top_logprobs must be a whole number from 0 to {MAX_TOP_LOGPROBS}; got {shown(value)}.",
                          param="top_logprobs")  # fmt: skip
    if not data.get("logprobs"):
        raise bad_request("top_logprobs needs logprobs set to true.", param="top_logprobs")
    return value


def _bool(data: dict[str, Any], name: str, prefix: str = "") -> bool:
    value = data.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_request(f"{prefix}{name} must be true or false; got {shown(value)}.", param=prefix + name)
    return value
