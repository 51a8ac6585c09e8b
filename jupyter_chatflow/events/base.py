"""The base of every event (`Event`), the stamp a turn puts on each (`Emitter`), and the JSON codec the events
and the values they carry share: dataclasses to plain dicts and back, guided by the type hints."""

from __future__ import annotations

import dataclasses
import time
import types
import typing
from typing import Any, ClassVar, Literal, TypeVar, Union

from .kinds import EventType

E = TypeVar("E", bound="Event")
T = TypeVar("T")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Event:
    """Fields every event has; subclasses add their own."""

    type: ClassVar[EventType]
    sequence_number: int = -1
    """0, 1, 2… within a turn."""
    turn_id: str = ""
    timestamp: float = 0.0
    """Monotonic seconds (`time.monotonic()`) when the event was emitted."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, `type` first."""
        return {"type": self.type, **encode(self)}


class Emitter:
    """Stamps a turn's events with its id, the next sequence number and the time."""

    def __init__(self, turn_id: str, clock=time.monotonic):
        self.turn_id = turn_id
        self.count = 0
        self._clock = clock

    def __call__(self, event: E) -> E:
        stamped = dataclasses.replace(event, sequence_number=self.count, turn_id=self.turn_id, timestamp=self._clock())
        self.count += 1
        return stamped


def encode(value: Any) -> Any:
    """A dataclass (and what it carries) as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return value


def decode(cls: type[T], data: dict[str, Any]) -> T:
    """`cls` rebuilt from what `encode` wrote; a field a stored row lacks reads as its type's empty value."""
    hints = _hints(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    unknown = set(data) - {f.name for f in fields}
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    missing = {f.name: _empty(hints[f.name]) for f in fields if f.name not in data and _required(f)}
    return cls(**{k: _decode_value(hints[k], v) for k, v in data.items()}, **missing)


def _required(field: dataclasses.Field) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _empty(hint: Any) -> Any:
    """The empty value of a field's type, for a stored row older than the field."""
    origin = typing.get_origin(hint) or hint
    if origin in (Union, types.UnionType):
        return None if type(None) in typing.get_args(hint) else _empty(typing.get_args(hint)[0])
    if origin is Literal:
        return typing.get_args(hint)[0]
    if isinstance(origin, type) and dataclasses.is_dataclass(origin):
        return decode(origin, {})
    return origin() if origin in (int, float, str, bool, tuple, list, dict) else None


def _decode_value(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return None if value is None else _decode_value(options[0], value)
    if origin is tuple:
        (item, *_) = typing.get_args(hint)
        return tuple(_decode_value(item, v) for v in value)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        reader = getattr(hint, "from_dict", None)  # a value that reads its older layouts itself (Usage, Timings)
        return reader(value) if reader is not None else decode(hint, value)
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]
