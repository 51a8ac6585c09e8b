"""Tool-call arguments decoded under a JSON-schema token mask, so even a 135M model writes a valid call.

`ToolCallConstraint` implements `jupyter_chatflow.constraint.Constraint` with llguidance: a Lark grammar
`["<tool_call>"] ["\\n"] <JSON> ["\\n"] "</tool_call>"` whose JSON part is the schema
`{"name": <const tool name>, "arguments": <that tool's parameters>}` (anyOf over the tools, or one tool with
`only=`). JSON is compact with ", " and ": " separators, the layout these models write on their own.

Use it after `ToolCallDetector.started` (the model wrote `<tool_call>` itself; the grammar then starts after
the tag; pass `prefix=detector.call_text` for whatever the model wrote after the tag before you switched), or
with `include_open=True` to force a call from the first token (tool_choice "required" or a name).
Building llguidance's tokenizer from ours reads every token's bytes once; it is cached per Tokenizer.

Example:
    >>> constraint = ToolCallConstraint(model.tokenizer, [calculator], include_open=True)
    >>> steps = model.generate(prompt_ids, constraint=constraint, temperature=0.0)
    >>> parse_tool_call("".join(step.text for step in steps))
    ('calculator', {'expression': '2 + 2'})
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from jupyter_chatflow.tokenizer import Tokenizer
from jupyter_chatflow.tools.calls import CALL_CLOSE, CALL_OPEN
from jupyter_chatflow.tools.schema import ToolError
from jupyter_chatflow.tools.tool import Tool

__all__ = ["ToolCallConstraint", "call_grammar", "call_schema", "lltokenizer"]

_JSON_LAYOUT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": ", "lenient": True}
_CACHE: dict[int, tuple[weakref.ref[Tokenizer], Any]] = {}
_CACHE_LOCK = threading.Lock()


def call_schema(tools: Sequence[Tool], *, only: str | None = None) -> dict[str, Any]:
    """The JSON schema of one call: {"name": const, "arguments": parameters}, anyOf over the chosen tools."""
    chosen = [t for t in tools if only is None or t.name == only]
    if not chosen:
        names = ", ".join(t.name for t in tools) or "(none)"
        raise ToolError(f"no tool named {only!r} to constrain the call to; tools: {names}.")
    options = [
        {
            "type": "object",
            "properties": {"name": {"const": t.name}, "arguments": t.parameters},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in chosen
    ]
    schema = options[0] if len(options) == 1 else {"anyOf": options}
    return {**schema, "x-guidance": _JSON_LAYOUT}


def call_grammar(tools: Sequence[Tool], *, only: str | None = None, include_open: bool = False) -> str:
    """The llguidance grammar (Lark with an embedded %json schema) of one tool call up to `</tool_call>`."""
    import llguidance

    opening = f"{json.dumps(CALL_OPEN)} " if include_open else ""
    schema = json.dumps(call_schema(tools, only=only))
    lark = f'start: {opening}"\\n"? %json {schema} "\\n"? {json.dumps(CALL_CLOSE)}'
    return llguidance.LLMatcher.grammar_from_lark(lark)


class ToolCallConstraint:
    """A `Constraint` that lets through only tokens continuing a valid call of one of `tools`."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        tools: Sequence[Tool],
        *,
        only: str | None = None,
        include_open: bool = False,
        prefix: str = "",
        vocab_size: int | None = None,
    ):
        import llguidance

        self.tokenizer = tokenizer
        self.vocab_size = vocab_size or tokenizer.vocab_size
        """Length of the mask (the model's logits may have padding rows past the tokenizer's vocabulary)."""
        self.ids: list[int] = []
        """The tokens consumed so far."""
        self.grammar = call_grammar(tools, only=only, include_open=include_open)
        self._matcher = llguidance.LLMatcher(lltokenizer(tokenizer), self.grammar, log_level=0)
        if self._matcher.is_error():
            raise ToolError(f"could not build the tool-call grammar: {self._matcher.get_error()}")
        self.prefix = prefix
        """Text of the call the model already wrote before decoding was constrained (not part of `ids`)."""
        if prefix and not self._matcher.consume_tokens(tokenizer.encode(prefix)):
            raise ToolError(f"the call's beginning {prefix!r} does not fit the tool-call grammar; start over.")

    def allowed(self) -> np.ndarray:
        """bool [vocab_size]: the tokens that keep the call valid."""
        bits = np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8)
        mask = np.unpackbits(bits, bitorder="little")[: self.tokenizer.vocab_size].astype(bool)
        if self.vocab_size > mask.size:
            mask = np.concatenate([mask, np.zeros(self.vocab_size - mask.size, bool)])
        return mask

    def advance(self, token_id: int) -> None:
        """Consume a generated token; ToolError if it was not allowed (the sampler ignored the mask)."""
        if not self._matcher.consume_token(int(token_id)):
            piece = self.tokenizer.piece(int(token_id)) if 0 <= token_id < self.tokenizer.vocab_size else "?"
            raise ToolError(
                f"token {token_id} ({piece!r}) breaks the tool-call grammar after {self.text!r}: "
                f"{self._matcher.get_error()}. Mask the logits with allowed() before sampling."
            )
        self.ids.append(int(token_id))

    def is_done(self) -> bool:
        """True once `</tool_call>` is written (nothing else may follow)."""
        return self._matcher.is_stopped()

    @property
    def text(self) -> str:
        """The call's text so far: `prefix` plus the tokens consumed."""
        return self.prefix + self.tokenizer.decode(self.ids)


def lltokenizer(tokenizer: Tokenizer) -> Any:
    """llguidance's `LLTokenizer` for our Tokenizer (token bytes, special ids, EOS), built once and cached."""
    with _CACHE_LOCK:
        entry = _CACHE.get(id(tokenizer))
        if entry is not None and entry[0]() is tokenizer:
            return entry[1]
        built = _build_lltokenizer(tokenizer)
        key = id(tokenizer)
        _CACHE[key] = (weakref.ref(tokenizer, lambda _: _CACHE.pop(key, None)), built)
        return built


class _Vocabulary:
    """The attributes and the encode call llguidance's `TokenizerWrapper` reads."""

    def __init__(self, tokenizer: Tokenizer):
        self.eos_token_id = tokenizer.eos_id
        self.bos_token_id = tokenizer.bos_id
        self.tokens = [tokenizer.token_bytes(i) for i in range(tokenizer.vocab_size)]
        self.special_token_ids = sorted(tokenizer.special_ids)
        self._encode = tokenizer.encode

    def __call__(self, data: bytes | str) -> list[int]:
        return self._encode(data.decode("utf-8", "replace") if isinstance(data, bytes) else data)


def _build_lltokenizer(tokenizer: Tokenizer) -> Any:
    import llguidance

    stops = sorted({tokenizer.eos_id, *tokenizer.stop_ids})
    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Vocabulary(tokenizer)), eos_token=stops)
