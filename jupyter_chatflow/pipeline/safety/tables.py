"""The hazard tables, read from data files: the shared cues (`data/cues.json`) and one file per category
(`data/hazards/S1.json` … `S14.json`). The format is described in `data/README.md`; in short, a cue is a name with
its `phrases` (and optional `exclude` phrases, `patterns` and an `about` note), a frame names its cues:

    {"name": "violence against a person", "anchor": {"near": ["violence", "person"], "gap": 4},
     "triggers": [["request"], ["evasion"]], "benign": ["not_people"], "unless": ["evasion", "detail"]}

Cue names are one namespace over every file (the shared cues and each category's own), so a frame may use any
cue; a name defined twice, an unknown name or an unknown key raises `SafetyConfigError` naming the file.

>>> [f.name for f in load_frames(("S9.json",))][:1]
['growing and releasing a pathogen on people']
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .decisions import SafetyConfigError
from .frames import Frame, Term
from .lexicon import Cue, Near

__all__ = ["DATA", "HAZARD_FILES", "load_frames", "shared_cues"]

DATA = Path(__file__).with_name("data")
HAZARD_FILES = tuple(f"{code}.json" for code in ("S1", "S2", "S3", "S4", "S9", "S5", "S6", "S7", "S8", "S10"))
HAZARD_FILES += ("S11.json", "S12.json", "S13.json", "S14.json")
"""The category files in the order their frames are tried (S9 after S4, as they were first written: of frames that
fire on the same words, a decision's reason names the first three in this order)."""

_CUE_KEYS = frozenset({"phrases", "exclude", "patterns", "about"})
_FRAME_KEYS = frozenset({"name", "anchor", "triggers", "benign", "unless", "action", "window"})


def shared_cues() -> dict[str, Cue]:
    """The cues every category uses (request, write, detail, evasion, person, self, explain,
    receiving_end), by name."""
    return _shared(DATA / "cues.json")


def load_frames(files: Sequence[str] = HAZARD_FILES, folder: Path = DATA / "hazards") -> tuple[Frame, ...]:
    """The frames of the category files `files` (in that order), their cue names resolved."""
    records = [(folder / name, _read(folder / name)) for name in files]
    cues = dict(shared_cues())
    for path, record in records:
        for name, cue in _cues(record.get("cues", {}), path).items():
            if name in cues:
                raise SafetyConfigError(f"{path}: cue {name!r} is defined twice: give one another name.")
            cues[name] = cue
    return tuple(
        _frame(frame, record["category"], cues, path) for path, record in records for frame in record["frames"]
    )


@functools.cache
def _shared(path: Path) -> dict[str, Cue]:
    return _cues(_read(path), path)


def _read(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SafetyConfigError(f"Cannot read the safety table {path}: {error}") from error
    if not isinstance(record, dict):
        raise SafetyConfigError(f"{path}: a safety table is a JSON object.")
    return record


def _cues(records: Mapping[str, Any], path: Path) -> dict[str, Cue]:
    """Cues by name from `{name: {"phrases": [...], "exclude": [...], "patterns": [...], "about": "..."}}`."""
    cues = {}
    for name, record in records.items():
        _check_keys(record, _CUE_KEYS, f"{path}: cue {name!r}")
        fields = {key: tuple(record.get(key, ())) for key in ("phrases", "exclude", "patterns")}
        cues[name] = Cue(name=name, **fields)
    return cues


def _frame(record: Mapping[str, Any], category: str, cues: Mapping[str, Cue], path: Path) -> Frame:
    where = f"{path}: frame {record.get('name')!r}"
    _check_keys(record, _FRAME_KEYS, where)
    term = functools.partial(_term, cues=cues, where=where)
    return Frame(
        category=category,
        name=record["name"],
        anchor=term(record["anchor"]),
        triggers=tuple(tuple(map(term, trigger)) for trigger in record.get("triggers", [[]])),
        benign=tuple(_plain(term(name), where) for name in record.get("benign", ())),
        unless=tuple(map(term, record.get("unless", ()))),
        action=record.get("action", "block"),
        window=record.get("window", 25),
    )


def _term(value: str | Mapping[str, Any], *, cues: Mapping[str, Cue], where: str) -> Term:
    """A cue name, or `{"near": [first, second], "gap": n}` (`lexicon.Near`)."""
    if isinstance(value, str):
        if value not in cues:
            raise SafetyConfigError(f"{where}: no cue is named {value!r}.")
        return cues[value]
    _check_keys(value, frozenset({"near", "gap"}), where)
    first, second = (_plain(_term(name, cues=cues, where=where), where) for name in value["near"])
    return Near(first=first, second=second, gap=value.get("gap", 4))


def _plain(term: Term, where: str) -> Cue:
    if not isinstance(term, Cue):
        raise SafetyConfigError(f"{where}: a pair (near) cannot stand here, only a cue name.")
    return term


def _check_keys(record: Any, allowed: frozenset[str], where: str) -> None:
    if not isinstance(record, Mapping):
        raise SafetyConfigError(f"{where}: expected a JSON object, got {type(record).__name__}.")
    if unknown := set(record) - allowed:
        raise SafetyConfigError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))}; use {', '.join(sorted(allowed))}."
        )
