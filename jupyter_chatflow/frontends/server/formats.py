"""`response_format` on /v1/chat/completions: `json_schema` (the answer is one JSON value valid for the schema) and
`json_object` (any JSON object), decoded under the schema's token mask (`GrammarConstraint`); `text` is free."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jupyter_chatflow.engine.generation import GenerationCounts, Step
from jupyter_chatflow.pipeline.tools import ToolError
from jupyter_chatflow.pipeline.tools.constrained import GrammarConstraint, json_grammar
from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

from .engine import Stream
from .errors import bad_request

PARAM = "response_format"


def response_schema(data: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema the answer must follow, or None for free text; 400 naming the field when malformed."""
    value = data.get(PARAM)
    if value is None or (isinstance(value, dict) and value.get("type") == "text"):
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind not in ("json_object", "json_schema"):
        raise bad_request(f'{PARAM}.type must be "text", "json_object" or "json_schema"; got {kind!r}.',
                          param=f"{PARAM}.type")  # fmt: skip
    if data.get("tools"):  # either JSON mode: the answer cannot be both a JSON value and a tool call
        raise bad_request(f"{PARAM} and tools cannot be used together on this server yet.", param=PARAM)
    if kind == "json_object":
        return {"type": "object"}
    schema = (value.get("json_schema") or {}).get("schema") if isinstance(value.get("json_schema"), dict) else None
    if not isinstance(schema, dict):
        raise bad_request(f"{PARAM}.json_schema.schema must be a JSON schema (an object).",
                          param=f"{PARAM}.json_schema.schema")  # fmt: skip
    return schema


def schema_constraint(tokenizer: Tokenizer, schema: dict[str, Any], vocab_size: int) -> GrammarConstraint:
    """The token mask of a JSON value valid for `schema`; 400 when the schema cannot be compiled."""
    try:
        return GrammarConstraint(tokenizer, json_grammar(schema), vocab_size=vocab_size)
    except (ToolError, ValueError) as error:
        raise bad_request(f"{PARAM}.json_schema.schema: {error}", param=f"{PARAM}.json_schema.schema") from None


class SchemaStream:
    """A `Stream` under a JSON schema's mask whose text ends as the grammar ends it.

    The grammar's last fixed text (a closing `}` say) is taken into the constraint without being generated,
    so the answer's text is the constraint's once it is done.
    """

    def __init__(self, stream: Stream, constraint: GrammarConstraint):
        self._stream, self._constraint = stream, constraint

    @property
    def text(self) -> str:
        done = self._constraint.is_done() and self._constraint.text.startswith(self._stream.text)
        return self._constraint.text if done else self._stream.text

    @property
    def finish_reason(self) -> str | None:
        return self._stream.finish_reason

    @property
    def usage(self) -> GenerationCounts:
        return self._stream.usage

    def cancel(self) -> None:
        self._stream.cancel()

    def __iter__(self) -> Iterator[Step]:
        return iter(self._stream)
