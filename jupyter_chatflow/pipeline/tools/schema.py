"""JSON schemas for tools: built from a function's type hints and docstring, and checked against arguments.

`function_schema(fn)` gives the OpenAI-style parameters object (`{"type": "object", "properties": …,
"required": …}`) and a description; `validate_arguments(schema, arguments)` returns the first problem as one
line of text a model (and a person) can act on, or "" when the arguments fit.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union

from jupyter_chatflow.errors import ChatflowError

__all__ = [
    "MAX_SCHEMA_DEPTH",
    "ToolError",
    "function_schema",
    "prepare_validation",
    "schema_problem",
    "type_schema",
    "validate_arguments",
]

_SCALARS: dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string"}
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
MAX_SCHEMA_DEPTH = 32
"""Objects and lists nested deeper than this in a tool's schema are refused: a call is decoded under a grammar
built from the schema, and a 400-deep one filled the prompt to 8,162 of 8,192 tokens before its grammar failed."""


class ToolError(ChatflowError):
    """A tool that cannot be defined, found or called as asked."""


def function_schema(fn: Callable[..., Any]) -> tuple[str, dict[str, Any]]:
    """The description and the JSON-schema parameters object of a typed function."""
    description, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
    hints = typing.get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolError(f"tool {fn.__name__!r} takes *{name}; give it named, typed parameters instead.")
        prop = type_schema(hints.get(name, Any), where=f"{fn.__name__}({name})")
        if name in arg_docs:
            prop = {**prop, "description": arg_docs[name]}
        if param.default is param.empty:
            required.append(name)
        elif _is_json(param.default):
            prop = {**prop, "default": param.default}
        properties[name] = prop
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return description, schema


def type_schema(hint: Any, *, where: str = "") -> dict[str, Any]:
    """The JSON schema of one type hint: scalars, list[X], tuple[X, ...], dict[str, X], Literal, X | None."""
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint is type(None):
        return {"type": "null"}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        kinds = {_SCALARS.get(type(a)) for a in args}
        single = len(kinds) == 1 and None not in kinds
        return {"type": kinds.pop(), "enum": list(args)} if single else {"enum": list(args)}
    if origin in (Union, types.UnionType):
        options = [type_schema(a, where=where) for a in args]
        return options[0] if len(options) == 1 else {"anyOf": options}
    if hint in (list, tuple) or origin in (list, tuple, Sequence):
        items = [a for a in args if a is not Ellipsis]
        return {"type": "array", "items": type_schema(items[0], where=where)} if items else {"type": "array"}
    if hint is dict or origin in (dict, Mapping):
        if len(args) == 2:
            return {"type": "object", "additionalProperties": type_schema(args[1], where=where)}
        return {"type": "object"}
    raise ToolError(
        f"{where}: the type hint {hint!r} has no JSON schema here; use int, float, str, bool, list[...], "
        "dict[str, ...], Literal[...] or X | None."
    )


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary (text before the first section) and the Google-style "Args:" descriptions."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section, current, entry_indent = "", "", -1
    for line in doc.splitlines():
        heading = _SECTION.match(line)
        indent = len(line) - len(line.lstrip())
        if heading:
            section, current, entry_indent = heading[1].lower(), "", -1
        elif not section:
            summary.append(line)
        elif section in ("args", "arguments", "parameters") and line.strip():
            entry = _ARG_LINE.match(line)
            if entry and (entry_indent < 0 or indent <= entry_indent):
                current, entry_indent = entry[1], indent
                args[current] = entry[2].strip()
            elif current:  # a continuation line, indented deeper than the entry
                args[current] = f"{args[current]} {line.strip()}".strip()
    return " ".join(" ".join(summary).split()), args


def prepare_validation() -> None:
    """Import jsonschema now, in the caller's thread (a `Toolbox` does it as tools are added).

    It ran on a background thread until that thread's compiling (attrs writes classes' methods as source) raced a
    cell being compiled on Python 3.11.7 ("AST constructor recursion depth mismatch", a CPython bug) and printed a
    traceback into a cell, about once in twelve runs. So it is imported where the chat is made, and made cheap:
    0.91 s of its 1.0 s was `rfc3987_syntax` building 38 Lark grammars for the "iri" format checkers, which tools'
    arguments never use (they are checked without format checkers). That module is kept out of jsonschema's import
    (0.12 s), and importable again afterwards. Where jsonschema was imported before, nothing changes; where this
    imports it first, jsonschema's "iri" and "iri-reference" format checkers are not registered in the process.
    """
    if "jsonschema.validators" in sys.modules:
        return
    blocked = "rfc3987_syntax" not in sys.modules
    if blocked:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # (an ImportError: jsonschema skips it)
    try:
        import jsonschema.validators  # noqa: F401
    finally:
        if blocked:
            del sys.modules["rfc3987_syntax"]


def schema_problem(schema: Any) -> str:
    """ "" when `schema` is a JSON schema (of any draft jsonschema knows) no deeper than `MAX_SCHEMA_DEPTH`, else
    one line saying what is wrong and where. Whether a call can be written under it is the grammar's to say
    (`constrained.call_grammar`)."""
    prepare_validation()
    import jsonschema

    if not isinstance(schema, dict):
        return f"a JSON schema is an object, not {type(schema).__name__}"
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        return f"it nests objects and lists more than {MAX_SCHEMA_DEPTH} deep"
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as problem:
        where = "/".join(str(p) for p in problem.absolute_path)
        return f"not a valid JSON schema{f' at {where!r}' if where else ''}: {problem.message}"
    return ""


def _depth(value: Any) -> int:
    """How deep objects and lists nest in `value` (a scalar: 0), without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        todo.extend((child, depth + 1) for child in children)
    return deepest


def validate_arguments(schema: Mapping[str, Any], arguments: Any) -> str:
    """ "" when `arguments` fit the schema, else one line saying what is wrong and where."""
    prepare_validation()  # a tool run on its own (no Toolbox) must not pay the 2 s import either
    import jsonschema

    if not isinstance(arguments, dict):
        return f"arguments must be a JSON object, not {type(arguments).__name__}"
    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    except jsonschema.exceptions.SchemaError as problem:
        return f"the tool's own schema is invalid: {problem.message}"
    if error is None:
        return ""
    where = "/".join(str(p) for p in error.absolute_path)
    return f"invalid arguments{f' at {where!r}' if where else ''}: {error.message}"


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
