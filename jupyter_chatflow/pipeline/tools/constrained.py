"""Tool-call arguments decoded under a JSON-schema token mask, so even a 135M model writes a valid call.

`ToolCallConstraint` implements `jupyter_chatflow.engine.constraint.Constraint` with llguidance: a Lark grammar
`["<tool_call>"] "\\n" <JSON> "\\n" "</tool_call>"` whose JSON part is the schema
`{"name": <const tool name>, "arguments": <that tool's parameters>}` (anyOf over the tools, or one tool with
`only=`). JSON is compact with ", " and ": " separators, the layout these models write on their own.

Text the grammar fixes (`<tool_call>\\n{"name": "calculator", "arguments": {"expression": "` for one tool, the
keys and punctuation between values) is not left to the model: it goes in as the tokenizer encodes it, the
tokens the model saw in training. Left to the mask, a model may spell it in pieces no text is ever encoded
in (a bare " " then `".`), and the piece then decides the value (SmolLM2-135M wrote `".17 * 23"` for 17*23).
`take_forced()` hands the fixed tokens to the caller to prefill at once; otherwise `allowed()` lets through
only the next of them. The last fixed piece that could merge with what follows (` "` before a string value,
which may be written ` "(` or ` ".`) is healed: the model's next token must begin with it.

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

import codecs
import json
import re
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

from .calls import CALL_CLOSE, CALL_OPEN
from .guards import CallGuard, JsonWatch, repeating, unclosed_end
from .schema import ToolError
from .tool import Tool

__all__ = [
    "GrammarConstraint",
    "ToolCallConstraint",
    "call_grammar",
    "call_schema",
    "json_grammar",
    "lltokenizer",
    "vocabulary",
]

_JSON_LAYOUT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": ", "lenient": True}
_CACHE: dict[int, tuple[weakref.ref[Tokenizer], Any]] = {}
_CACHE_LOCK = threading.Lock()


def call_schema(tools: Sequence[Tool], *, only: str | None = None) -> dict[str, Any]:
    """The JSON schema of one call: {"name": const, "arguments": parameters}, anyOf over the chosen tools."""
    chosen = [t for t in tools if only is None or t.name == only]
    if not chosen:
        names = ", ".join(t.name for t in tools) or "(none)"
        raise ToolError(f"no tool named {only!r} to constrain the call to; tools: {names}.")
    where = (
        ["#/properties/arguments"]
        if len(chosen) == 1
        else [f"#/anyOf/{i}/properties/arguments" for i in range(len(chosen))]
    )
    options = [
        {
            "type": "object",
            "properties": {"name": {"const": t.name}, "arguments": _rebased(t.parameters, at)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t, at in zip(chosen, where, strict=True)
    ]
    schema = options[0] if len(options) == 1 else {"anyOf": options}
    return {**schema, "x-guidance": _JSON_LAYOUT}


def _rebased(schema: Any, at: str) -> Any:
    """`schema` with its local `$ref`s ("#/$defs/Item", "#") pointing where it sits inside the call's schema (`at`):
    a tool's parameters are the call's `arguments`, not its root."""
    if isinstance(schema, list):
        return [_rebased(item, at) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _rebased(value, at) for key, value in schema.items()}
    ref = schema.get("$ref")
    if isinstance(ref, str) and (ref == "#" or ref.startswith("#/")):
        out["$ref"] = at + ref[1:]
    return out


def _reason(error: str) -> str:
    """llguidance's error in one line: its first, without the position in the grammar (the lines after it print the
    whole grammar, a tool's schema and all)."""
    return re.sub(r"^at \d+\(\d+\): ", "", error.strip().split("\n")[0])


def call_grammar(tools: Sequence[Tool], *, only: str | None = None, include_open: bool = False) -> str:
    """The llguidance grammar (Lark with an embedded %json schema) of one tool call up to `</tool_call>`."""
    import llguidance

    opening = f"{json.dumps(CALL_OPEN)} " if include_open else ""
    schema = json.dumps(call_schema(tools, only=only))
    lark = f'start: {opening}"\\n" %json {schema} "\\n" {json.dumps(CALL_CLOSE)}'
    return llguidance.LLMatcher.grammar_from_lark(lark)


def json_grammar(schema: dict[str, Any]) -> str:
    """The llguidance grammar of one JSON value valid for `schema`, laid out as calls are (", " and ": ")."""
    import llguidance

    return llguidance.LLMatcher.grammar_from_lark(f"start: %json {json.dumps({**schema, 'x-guidance': _JSON_LAYOUT})}")


class GrammarConstraint:
    """A `Constraint` that lets through only tokens continuing a text of an llguidance `grammar` (fixed text
    fast-forwarded and healed as the module docstring says); `ToolCallConstraint` is one, over a call's grammar."""

    NAME = "grammar"
    """What the grammar is, in error messages."""

    def __init__(self, tokenizer: Tokenizer, grammar: str, *, prefix: str = "", vocab_size: int | None = None):
        import llguidance

        self.tokenizer = tokenizer
        self.vocab_size = vocab_size or tokenizer.vocab_size
        """Length of the mask (the model's logits may have padding rows past the tokenizer's vocabulary)."""
        self.ids: list[int] = []
        """The tokens of the call so far, fixed and generated."""
        self.forced = 0
        """How many of `ids` were fixed by the grammar rather than chosen by the model."""
        self.grammar = grammar
        self._vocabulary = vocabulary(tokenizer)
        self._matcher = llguidance.LLMatcher(self._vocabulary.lltokenizer, self.grammar, log_level=0)
        if self._matcher.is_error():
            raise ToolError(f"could not build the {self.NAME}: {_reason(self._matcher.get_error())}")
        self.prefix = prefix
        """Text of the call the model already wrote before decoding was constrained (not part of `ids`)."""
        if prefix and not self._matcher.consume_tokens(tokenizer.encode(prefix)):
            raise ToolError(f"the beginning {prefix!r} does not fit the {self.NAME}; start over.")
        self._consumed(tokenizer.encode(prefix) if prefix else [])
        self._queue: list[int] = []  # fixed tokens, consumed by the matcher, not yet handed out
        self._heal = b""  # the end of a fixed run: the next token must begin with these bytes
        self._fast_forward()

    def take_forced(self) -> list[int]:
        """The fixed tokens that come next (consumed as if generated): append them to the prompt."""
        taken, self._queue = self._queue, []
        self.ids.extend(taken)
        return taken

    def allowed(self) -> np.ndarray:
        """bool [vocab_size]: the tokens that keep the call valid (the next fixed token alone, in a fixed run)."""
        if self._queue:
            mask = np.zeros(self.vocab_size, bool)
            mask[self._queue[0]] = True
            return mask
        mask = self._grammar_mask()
        if self._heal:
            mask &= self._vocabulary.starting_with(self._heal)
        if self.vocab_size > mask.size:
            mask = np.concatenate([mask, np.zeros(self.vocab_size - mask.size, bool)])
        return mask

    def advance(self, token_id: int) -> None:
        """Consume a generated token; ToolError if it was not allowed (the sampler ignored the mask)."""
        token_id = int(token_id)
        if self._queue:
            if token_id != self._queue[0]:
                raise self._refused(token_id, f"the grammar fixes {self.tokenizer.piece(self._queue[0])!r} here")
            self.ids.append(self._queue.pop(0))
            return
        if self._heal and not self._begins_heal(token_id):
            raise self._refused(token_id, f"the token must begin with {self._heal!r}")
        if not self._matcher.consume_token(token_id):
            raise self._refused(token_id, self._matcher.get_error())
        self.ids.append(token_id)
        self._consumed([token_id])
        self._heal = b""
        self._fast_forward()

    def is_done(self) -> bool:
        """True once `</tool_call>` is written (nothing else may follow)."""
        return self._matcher.is_stopped() and not self._queue

    @property
    def text(self) -> str:
        """The call's text so far: `prefix` plus the tokens consumed."""
        return self.prefix + self.tokenizer.decode(self.ids)

    def _fast_forward(self) -> None:
        """Queue the tokens of the text the grammar fixes from here, encoded as the tokenizer encodes it.

        llguidance leaves out a last token that could merge with what follows; its bytes become `_heal`.
        A fixed run that ends the call is taken at once: nothing is left to generate.
        """
        fixed = self._matcher.compute_ff_bytes()
        if not fixed:
            return
        tokens = self._matcher.compute_ff_tokens()
        if not self._matcher.consume_tokens(tokens):
            raise ToolError(f"the {self.NAME} refused its own fixed text {fixed!r}: {self._matcher.get_error()}")
        self._consumed(tokens)
        self.forced += len(tokens)
        self._heal = fixed[sum(len(self._vocabulary.tokens[t]) for t in tokens) :]
        if self._heal and not (self._grammar_mask() & self._vocabulary.starting_with(self._heal)).any():
            rest = self.tokenizer.encode(self._heal.decode("utf-8", "replace"))  # no token covers it: spell it out
            if not self._matcher.consume_tokens(rest):
                raise ToolError(f"the {self.NAME} refused {self._heal!r}: {self._matcher.get_error()}")
            self._consumed(rest)
            tokens, self._heal, self.forced = [*tokens, *rest], b"", self.forced + len(rest)
        if self._matcher.is_stopped():
            self.ids.extend([*self._queue, *tokens])
            self._queue = []
        else:
            self._queue.extend(tokens)

    def _consumed(self, tokens: list[int]) -> None:
        """The matcher took `tokens` (fixed or generated): a subclass follows the text here."""

    def _begins_heal(self, token_id: int) -> bool:
        tokens = self._vocabulary.tokens
        return 0 <= token_id < len(tokens) and tokens[token_id].startswith(self._heal)

    def _grammar_mask(self) -> np.ndarray:
        bits = np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8)
        return np.unpackbits(bits, bitorder="little")[: self.tokenizer.vocab_size].astype(bool)

    def _refused(self, token_id: int, why: str) -> ToolError:
        piece = self.tokenizer.piece(token_id) if 0 <= token_id < self.tokenizer.vocab_size else "?"
        return ToolError(
            f"token {token_id} ({piece!r}) breaks the {self.NAME} after {self.text!r}: {why}. "
            "Mask the logits with allowed() before sampling."
        )


class ToolCallConstraint(GrammarConstraint):
    """A `Constraint` that lets through only tokens continuing a valid call of one of `tools`, and ends a string
    argument the model does not end by the rules of `guards.py` (`guard` says which one did)."""

    NAME = "tool-call grammar"

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
        self.guard: CallGuard = ""
        """The rule that ended a string argument ("unclosed" or "repeat"), "" when the model ended them all."""
        self._watch = JsonWatch()
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._closing = False  # the repeat rule fired: the open string closes at the next token
        grammar = call_grammar(tools, only=only, include_open=include_open)
        super().__init__(tokenizer, grammar, prefix=prefix, vocab_size=vocab_size)

    def allowed(self) -> np.ndarray:
        """As `GrammarConstraint.allowed`; once a string repeats itself, only tokens that close it."""
        mask = super().allowed()
        if self._closing and not self._queue and self._watch.can_close:
            closing = mask.copy()
            closing[: len(self._vocabulary.tokens)] &= self._vocabulary.starting_with(b'"')
            return closing if closing.any() else mask  # (the grammar wants more here: minLength, a pattern)
        return mask

    def advance(self, token_id: int) -> None:
        """As `GrammarConstraint.advance`, then the string rules on the string the token wrote into."""
        super().advance(token_id)
        if self._closing and not self._watch.in_string:
            self._closing, self.guard = False, "repeat"
        if not self._watch.in_string or self._queue:
            return
        end = unclosed_end(self._watch.string, self._watch.closers())
        if end is not None:
            self._close_unclosed(len(self._watch.string) - end)
        elif repeating(self._watch.string):
            self._closing = True

    def _consumed(self, tokens: list[int]) -> None:
        for token in tokens:
            self._watch.feed(self._utf8.decode(self._vocabulary.tokens[token]))

    def _close_unclosed(self, drop: int) -> None:
        """End the call with the open string's last `drop` characters (`}}</tool_call>`) replaced by the quote, the
        brackets still open and the tag, when the grammar accepts that end (tokens from the first one the change
        touches are taken back and the new end encoded as the tokenizer encodes it)."""
        text = self.text
        target = len(text) - drop
        kept = len(self.ids)
        while kept > 0 and len(self.prefix + self.tokenizer.decode(self.ids[:kept])) > target:
            kept -= 1
        head = self.prefix + self.tokenizer.decode(self.ids[:kept])
        end = f'{text[len(head) : target]}"{self._watch.closers()}\n{CALL_CLOSE}'
        tokens = self.tokenizer.encode(end)
        matcher = self._matcher.deep_copy()
        if not text.startswith(head) or matcher.rollback(len(self.ids) - kept) is False:
            return
        if not matcher.consume_tokens(tokens) or not matcher.is_stopped():
            return  # a required argument is still missing: the model writes on
        self._matcher, self.ids, self.guard = matcher, [*self.ids[:kept], *tokens], "unclosed"
        self._watch = JsonWatch()


def lltokenizer(tokenizer: Tokenizer) -> Any:
    """llguidance's `LLTokenizer` for our Tokenizer (token bytes, special ids, EOS), built once and cached."""
    return vocabulary(tokenizer).lltokenizer


def vocabulary(tokenizer: Tokenizer) -> _Vocabulary:
    """Every token's bytes and llguidance's tokenizer, read once per Tokenizer and cached."""
    with _CACHE_LOCK:
        entry = _CACHE.get(id(tokenizer))
        if entry is not None and entry[0]() is tokenizer:
            return entry[1]
        built = _Vocabulary(tokenizer)
        key = id(tokenizer)
        _CACHE[key] = (weakref.ref(tokenizer, lambda _: _CACHE.pop(key, None)), built)
        return built


class _Vocabulary:
    """The attributes and the encode call llguidance's `TokenizerWrapper` reads, and masks by token bytes."""

    def __init__(self, tokenizer: Tokenizer):
        import llguidance

        self.eos_token_id = tokenizer.eos_id
        self.bos_token_id = tokenizer.bos_id
        self.tokens = [tokenizer.token_bytes(i) for i in range(tokenizer.vocab_size)]
        self.special_token_ids = sorted(tokenizer.special_ids)
        self._encode = tokenizer.encode
        self._starting: dict[bytes, np.ndarray] = {}
        stops = sorted({tokenizer.eos_id, *tokenizer.stop_ids})
        self.lltokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(self), eos_token=stops)

    def __call__(self, data: bytes | str) -> list[int]:
        return self._encode(data.decode("utf-8", "replace") if isinstance(data, bytes) else data)

    def starting_with(self, head: bytes) -> np.ndarray:
        """bool [vocab]: the tokens whose bytes begin with `head` (a copy: callers may change it)."""
        if head not in self._starting:
            self._starting[head] = np.fromiter((t.startswith(head) for t in self.tokens), bool, len(self.tokens))
        return self._starting[head].copy()
