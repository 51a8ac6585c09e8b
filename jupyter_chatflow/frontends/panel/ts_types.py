"""The panel's TypeScript types, generated from Python: the events (`events.py`, the account of `account/record.py`)
into `js/src/events.generated.ts`, and the protocol between kernel and view (`protocol.py`: the messages both ways,
the synced traits, the settings of `settings.OPTIONS`) into `js/src/protocol.generated.ts`.

Every event class becomes an interface (`extends BaseEvent`, its `type` a string literal), every dataclass an
event carries (`Span`, `Segment`, `Alternative`, …) one too, every `Literal` alias a union of string literals, every
`TypedDict` of `protocol.py` an interface (a view message's field that allows None may be left out: `name?:`), and
docstrings become `/** */` comments. `tests/frontends/panel/test_ts_types.py` fails while either file differs from
what this writes now. After changing an event or the protocol:

    python -m jupyter_chatflow.frontends.panel.ts_types          # rewrite both files
    python -m jupyter_chatflow.frontends.panel.ts_types --check  # exit 1 if either is out of date

The text is written as Biome formats it (two-space indent, double quotes, 120 columns), so `biome ci` passes.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import itertools
import json
import re
import sys
import textwrap
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from jupyter_chatflow.account import record
from jupyter_chatflow.events import EVENT_TYPES, Event, kinds
from jupyter_chatflow.settings import OPTIONS, sampler_numbers

from . import protocol

FOLDER = Path(__file__).resolve().parents[3] / "js" / "src"
OUTPUT = FOLDER / "events.generated.ts"
PROTOCOL_OUTPUT = FOLDER / "protocol.generated.ts"
COMMAND = "python -m jupyter_chatflow.frontends.panel.ts_types"
WIDTH = 120
HEADER = f"""\
// Generated from jupyter_chatflow/events.py and account/record.py by
// jupyter_chatflow/frontends/panel/ts_types.py: do not edit.
// After changing an event, regenerate it: {COMMAND}
// (tests/frontends/panel/test_ts_types.py fails while this file is out of date)."""
PROTOCOL_HEADER = f"""\
// Generated from jupyter_chatflow/frontends/panel/protocol.py (and the options of settings.py) by
// jupyter_chatflow/frontends/panel/ts_types.py: do not edit.
// After changing the protocol, regenerate it: {COMMAND}
// (tests/frontends/panel/test_ts_types.py fails while this file is out of date)."""
UNION = "ChatEvent"
"""The TypeScript name of the union of every event."""
_SCALARS: dict[Any, str] = {int: "number", float: "number", str: "string", bool: "boolean", type(None): "null"}


def render() -> str:
    """The text of `js/src/events.generated.ts` for the event classes as they are now."""
    event_classes = list(EVENT_TYPES.values())
    values = value_classes(event_classes)
    account = [c for c in value_classes([record.TurnAccount]) if c not in values] + [record.TurnAccount]
    aliases = {**literal_aliases(kinds), **literal_aliases(record)}
    classes = [*values, *event_classes, *account]
    names: dict[Any, str] = {**aliases, Event: "BaseEvent", **{c: c.__name__ for c in classes}}
    alias_docs = {
        k: v for m in (kinds, record) for k, v in attribute_docs(ast.parse(inspect.getsource(m)).body).items()
    }
    blocks = [
        HEADER,
        *(_type_alias(name, ts_type(hint, {}, name), alias_docs.get(name, "")) for hint, name in aliases.items()),
        *(_interface(cls, names) for cls in [Event, *values, *event_classes]),
        _type_alias(UNION, " | ".join(c.__name__ for c in event_classes), "Every event of a turn, by its `type`."),
        *(_interface(cls, names) for cls in account),
    ]
    return "\n\n".join(blocks) + "\n"


def render_protocol() -> str:
    """The text of `js/src/protocol.generated.ts` for `protocol.py` as it is now."""
    elsewhere = {**literal_aliases(kinds), **literal_aliases(record)}  # (imported from events.generated.ts)
    own = {v: n for v, n in literal_aliases(protocol).items() if v not in elsewhere}
    typed = [v for v in vars(protocol).values() if _is_typed_dict(v)]
    unions = {name: v for name, v in vars(protocol).items() if _is_union_of_typed_dicts(v)}
    names: dict[Any, str] = {**elsewhere, **own, **{c: c.__name__ for c in [*typed, *protocol.FROM_PYTHON]}}
    docs = attribute_docs(ast.parse(inspect.getsource(protocol)).body)
    requests = set(typing.get_args(protocol.ViewMessage))
    body = [
        *(_type_alias(name, ts_type(hint, {}, name), docs.get(name, "")) for hint, name in own.items()),
        *(
            _type_alias(n, ts_type(typing.get_args(a)[0], names, n), docs.get(n, ""))
            for n, a in protocol.DEFINED.items()
        ),
        *(_interface(cls, names) for cls in protocol.FROM_PYTHON),
        _settings(names),
        _setting_fields(),
        *(_typed_dict_interface(cls, names, optional_none=cls in requests) for cls in typed),
        *(_type_alias(n, " | ".join(names[c] for c in typing.get_args(u)), docs.get(n, "")) for n, u in unions.items()),
    ]
    text = "\n\n".join(body)
    imported = sorted({*elsewhere.values(), "ChatEvent", "TurnAccount"} & set(re.findall(r"\b[A-Z]\w*", text)))
    imports = f'import type {{ {", ".join(imported)} }} from "./events.generated";'
    return "\n\n".join([PROTOCOL_HEADER, imports, text]) + "\n"


RENDERERS = {OUTPUT.name: render, PROTOCOL_OUTPUT.name: render_protocol}
"""Each generated file's name and what writes its text."""


def ts_type(hint: Any, names: Mapping[Any, str], where: str) -> str:
    """The TypeScript type of a Python type hint; `names` gives the TypeScript name of a dataclass or alias (an
    `Annotated` hint with a `protocol.TsName` is that name)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        named = [m.name for m in hint.__metadata__ if isinstance(m, protocol.TsName)]
        return named[0] if named else ts_type(args[0], names, where)
    if _hashable(hint) and (hint in names or hint in _SCALARS):
        return names.get(hint) or _SCALARS[hint]
    if hint is Any:
        return "unknown"
    if origin is Literal and all(isinstance(a, str) for a in args):
        return " | ".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(ts_type(a, names, where) for a in args)
    if (origin is list and args) or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        item = ts_type(args[0], names, where)
        return f"({item})[]" if " | " in item else f"{item}[]"
    if origin is tuple and args and Ellipsis not in args:
        return f"[{', '.join(ts_type(a, names, where) for a in args)}]"
    if origin is dict and args and args[0] is str:
        return f"Record<string, {ts_type(args[1], names, where)}>"
    raise TypeError(
        f"{where}: no TypeScript type for {hint!r}. Use int, float, str, bool, None, Any, Literal[str, ...], "
        "tuple[X, ...], list[X], dict[str, X] or a dataclass, or teach jupyter_chatflow/frontends/panel/ts_types.py it."
    )


def value_classes(event_classes: Sequence[type]) -> list[type]:
    """The dataclasses the events carry (and those they carry), in order of first use."""
    found: list[type] = []
    queue = list(event_classes)
    while queue:
        for hint in _field_hints(queue.pop(0)).values():
            for cls in _dataclasses_in(hint):
                if cls not in found and not issubclass(cls, Event):
                    found.append(cls)
                    queue.append(cls)
    return found


def literal_aliases(module: types.ModuleType) -> dict[Any, str]:
    """The module's `Name = Literal[...]` aliases, in source order: Literal → name."""
    return {value: name for name, value in vars(module).items() if typing.get_origin(value) is Literal}


def attribute_docs(body: Sequence[ast.stmt]) -> dict[str, str]:
    """The docstrings under the assignments of a module's or a class's body: name → docstring."""
    docs = {}
    for before, node in itertools.pairwise(body):
        targets = [before.target] if isinstance(before, ast.AnnAssign) else getattr(before, "targets", [])
        text = node.value.value if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) else None
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and isinstance(text, str):
            docs[targets[0].id] = inspect.cleandoc(text)
    return docs


def comment(text: str, indent: str = "") -> list[str]:
    """`text` as a JSDoc comment: one line if it fits, else wrapped to the width, paragraphs kept."""
    paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(text).replace("*/", "*\\/").split("\n\n")]
    paragraphs = [p for p in paragraphs if p]
    if not paragraphs:
        return []
    if len(paragraphs) == 1 and len(line := f"{indent}/** {paragraphs[0]} */") <= WIDTH:
        return [line]
    lines = [f"{indent}/**"]
    for k, paragraph in enumerate(paragraphs):
        lines += [f"{indent} *"] if k else []
        wrapped = textwrap.wrap(paragraph, WIDTH - len(indent) - 3, break_long_words=False, break_on_hyphens=False)
        lines += [f"{indent} * {part}" for part in wrapped]
    return [*lines, f"{indent} */"]


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or with --check, compare) the generated file; the exit status says whether it was up to date."""
    parser = argparse.ArgumentParser(prog=COMMAND, description=f"Write js/src/{{{','.join(RENDERERS)}}} from Python.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is out of date")
    parser.add_argument("--out", type=Path, default=FOLDER, help=f"the folder to write them in (default: {FOLDER})")
    args = parser.parse_args(argv)
    if not args.out.is_dir():
        parser.error(f"No folder {args.out}: run this in a source checkout, or name a folder with --out.")
    stale = 0
    for name, make in RENDERERS.items():
        path, text = args.out / name, make()
        current = path.read_text() if path.exists() else None
        stale += current != text
        if args.check:
            print(f"{path} is {'up to date' if current == text else f'out of date: run {COMMAND}'}")
        else:
            path.write_text(text)
            print(f"{'Unchanged' if current == text else 'Wrote'} {path}")
    return 1 if args.check and stale else 0


# ---- helpers ---------------------------------------------------------------------------------------------------


_SETTINGS_DOC = """The panel's settings: one per option of a turn (`settings.OPTIONS`), which a turn sent from the
panel takes as its options (null: the option's default)."""


def _settings(names: Mapping[Any, str]) -> str:
    """`export interface Settings`: each option's value as the settings hold it (`protocol.setting_types`)."""
    lines = [*comment(_SETTINGS_DOC), "export interface Settings {"]
    for option in OPTIONS:
        hint = protocol.setting_type(option)
        lines += [*comment(option.help, "  "), f"  {option.name}: {ts_type(hint, names, f'Settings.{option.name}')};"]
    return "\n".join([*lines, "}"])


def _typed_dict_interface(cls: type, names: Mapping[Any, str], *, optional_none: bool) -> str:
    """`export interface …` for a TypedDict of `protocol.py`; with `optional_none`, a field that allows None may be
    left out (`name?: T | null`: the view's message leaves it out, the kernel reads None)."""
    node = _class_node(cls)
    docs = attribute_docs(node.body)
    lines = [*comment(ast.get_docstring(node) or ""), f"export interface {cls.__name__} {{"]
    for name, hint in typing.get_type_hints(cls, include_extras=True).items():
        optional = "?" if optional_none and type(None) in typing.get_args(hint) else ""
        line = f"  {name}{optional}: {ts_type(hint, names, f'{cls.__name__}.{name}')};"
        if len(line) > WIDTH:
            raise ValueError(f"{cls.__name__}.{name}: {line.strip()!r} is over {WIDTH} columns: name its type.")
        lines += [*comment(docs.get(name, ""), "  "), line]
    return "\n".join([*lines, "}"])


def _is_typed_dict(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, dict) and hasattr(value, "__required_keys__")


def _is_union_of_typed_dicts(value: Any) -> bool:
    return isinstance(value, types.UnionType) and all(_is_typed_dict(a) for a in typing.get_args(value))


_FIELD_TYPE = """\
/** A number field of the panel's settings form: one sampler option of `settings.py`. */
export interface SettingField {
  key: SettingFieldKey;
  label: string;
  min?: number;
  max?: number;
  step: number;
  /** What a special value means, or what the option does (the field's tooltip). */
  hint: string;
  /** Empty is allowed: the option's default (the seed: a random one). */
  optional: boolean;
}"""


_KEY_DOC = "The name of a number option of `settings.py`: a key of the panel's `Settings` that the form edits."


def _setting_fields() -> str:
    """The settings form's number fields, from `settings.OPTIONS` (each a line, as Biome writes it).

    Their keys are a union of string literals, so the panel indexes its `Settings` with a field's key without a cast
    (and `tsc` fails if `Settings` lacks one of them).
    """
    options = sampler_numbers()
    keys = _type_alias("SettingFieldKey", " | ".join(json.dumps(o.name) for o in options), _KEY_DOC)
    rows = []
    for o in options:
        field: dict[str, Any] = {"key": o.name, "label": o.name.replace("_", " ")}
        field.update({k: v for k, v in (("min", o.low), ("max", o.high)) if v is not None})
        field.update(step=1 if o.type is int else 0.05, hint=o.note or o.help, optional=o.optional)
        items = [f"{k}: {json.dumps(_plain(v))}" for k, v in field.items()]
        line = f"  {{ {', '.join(items)} }},"
        rows.append(line if len(line) <= WIDTH else "  {\n" + "".join(f"    {i},\n" for i in items) + "  },")
    fields = "export const SETTING_FIELDS: readonly SettingField[] = [\n" + "\n".join(rows) + "\n];"
    return "\n\n".join([keys, _FIELD_TYPE, fields])


def _plain(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _interface(cls: type, names: Mapping[Any, str]) -> str:
    """`export interface …` for a dataclass: an event's own fields only (the rest come from BaseEvent)."""
    node = _class_node(cls)
    docs = attribute_docs(node.body)
    inherited = {f.name for f in dataclasses.fields(Event)} if cls is not Event and issubclass(cls, Event) else set()
    lines = comment(ast.get_docstring(node) or "")
    lines.append(f"export interface {names[cls]}{' extends BaseEvent' if inherited else ''} {{")
    if issubclass(cls, Event):  # its ClassVar `type` (a Literal), first as in `to_dict()`
        (literal,) = typing.get_args(typing.get_type_hints(cls)["type"])
        lines.append(_member(cls, "type", literal, names))
    for name, hint in _field_hints(cls).items():
        if name not in inherited:
            lines += [*comment(docs.get(name, ""), "  "), _member(cls, name, hint, names)]
    return "\n".join([*lines, "}"])


def _member(cls: type, name: str, hint: Any, names: Mapping[Any, str]) -> str:
    line = f"  {name}: {ts_type(hint, names, f'{cls.__name__}.{name}')};"
    if len(line) > WIDTH:  # (Biome would break it over lines)
        raise ValueError(f"{cls.__name__}.{name}: {line.strip()!r} is over {WIDTH} columns: name its type (events.py).")
    return line


def _type_alias(name: str, union: str, doc: str) -> str:
    """`export type Name = A | B;` on one line if it fits, else one member a line (as Biome writes it)."""
    line = f"export type {name} = {union};"
    if len(line) > WIDTH:
        line = f"export type {name} =\n" + "\n".join(f"  | {m}" for m in union.split(" | ")) + ";"
    return "\n".join([*comment(doc), line])


def _class_node(cls: type) -> ast.ClassDef:
    node = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    assert isinstance(node, ast.ClassDef), f"{cls.__name__}'s source is not a class statement"
    return node


@functools.cache
def _field_hints(cls: type) -> dict[str, Any]:
    """A dataclass's fields and their resolved type hints, in field order (ClassVars left out)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _dataclasses_in(hint: Any) -> Iterator[type]:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        yield hint
    for arg in typing.get_args(hint):
        yield from _dataclasses_in(arg)


def _hashable(hint: Any) -> bool:
    try:
        hash(hint)
    except TypeError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
