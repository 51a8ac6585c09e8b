"""The lab's rows: public safety data (read where it lies), the project's own rows, and the long benign texts.

Every row becomes an `Example`: its source, id, text, label (benign | harmful) and the class a probe learns
(`benign`, a hazard code S1–S14, or `OTHER` for a harmful request outside S1–S14: harassment, misinformation,
manipulation, which the public sets label harmful without a Llama Guard code).

Sources (`SOURCES`), by what they may be used for:

- `train`: public sets whose licence lets a shipped probe learn from them (MIT, Apache-2.0, CC BY, ODC-BY).
- `eval`: public sets that are non-commercial (CC BY-NC) or state no licence: evaluation only, never trained on.
- `dev`: HarmBench, StrongREJECT, CoCoNot: cross-dataset evaluation and threshold choice, never trained on.
- `own`: the rows written for this project (its training requests, everyday requests and the rules' evaluation set);
  `ownheld`: its own held-out splits (the third fresh split and the fourth everyday file), never trained on.
- `long`: long benign texts from public documents (`long_texts.py`), split train / heldout.

The public data is read from `../shared/safety-data/` beside the checkout, or the folder `$CHATFLOW_SAFETY_DATA`
names: never copied into the repository.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent
OWN = ROOT / "data"
"""The project's own rows (moved out of the wheel): `intent/*.jsonl` and `eval.jsonl`."""
LONG = ROOT / ".data" / "long_texts.jsonl"
OTHER = "other"
"""The class of a harmful request the sources give no S1–S14 code."""
BENIGN = "benign"


def public_root() -> Path:
    """Where the public safety data lies: $CHATFLOW_SAFETY_DATA, else ../shared/safety-data beside the checkout."""
    setting = os.environ.get("CHATFLOW_SAFETY_DATA", "")
    return Path(setting) if setting else ROOT.parent.parent / "shared" / "safety-data"


@dataclasses.dataclass(frozen=True)
class Source:
    """One file of rows and what it may be used for."""

    name: str
    path: str
    """Relative to the public data folder (`public_root`), or to this folder for own and long rows."""
    use: str
    """train | eval | dev | own | long."""
    licence: str


SOURCES: tuple[Source, ...] = (
    Source("advbench", "train/advbench.jsonl", "train", "MIT (llm-attacks)"),
    Source("do_not_answer", "train/do_not_answer.jsonl", "train", "Apache-2.0"),
    Source("catqa", "train/catqa.jsonl", "train", "Apache-2.0"),
    Source("salad_bench", "train/salad_bench.jsonl", "train", "Apache-2.0"),
    Source("openai_moderation", "train/openai_moderation.jsonl", "train", "MIT"),
    Source("wildguardmix", "train/wildguardmix.jsonl", "train", "ODC-BY (AI2; not stated in the copy)"),
    Source("aegis", "train/aegis.jsonl", "train", "CC BY 4.0"),
    Source("dolly", "train/dolly.jsonl", "train", "CC BY-SA 3.0"),
    Source("malicious_instruct", "train/malicious_instruct.jsonl", "eval", "not stated"),
    Source("sorry_bench", "train/sorry_bench.jsonl", "eval", "custom, terms not read"),
    Source("oktest", "train/oktest.jsonl", "eval", "not stated"),
    Source("toxicchat", "train/toxicchat.jsonl", "eval", "CC BY-NC 4.0"),
    Source("beavertails", "train/beavertails.jsonl", "eval", "CC BY-NC 4.0"),
    Source("alpaca", "train/alpaca.jsonl", "eval", "CC BY-NC 4.0"),
    Source("harmbench", "dev/harmbench.jsonl", "dev", "MIT"),
    Source("strongreject", "dev/strongreject.jsonl", "dev", "MIT"),
    Source("coconot", "dev/coconot.jsonl", "dev", "MIT"),
    Source("own_train", "intent/train.jsonl", "own", "this project's (Apache-2.0)"),
    Source("own_everyday", "intent/everyday.jsonl", "own", "this project's (Apache-2.0)"),
    Source("own_eval", "eval.jsonl", "own", "this project's (Apache-2.0)"),
    Source("own_fresh3", "intent/heldout_fresh3.jsonl", "ownheld", "this project's (Apache-2.0)"),
    Source("own_everyday4", "intent/everyday_fresh4.jsonl", "ownheld", "this project's (Apache-2.0)"),
    Source("long", "long_texts.jsonl", "long", "public documents of many licences (read in place)"),
)
BY_NAME = {s.name: s for s in SOURCES}


@dataclasses.dataclass(frozen=True)
class Example:
    """One labelled text."""

    source: str
    id: str
    text: str
    label: str
    """benign | harmful."""
    category: str
    """The class a probe learns: `BENIGN`, S1–S14 or `OTHER`."""
    split: str = ""
    """For long texts: train | heldout."""
    kind: str = ""
    """The source's own category (verbatim), for per-category figures."""


def path_of(source: Source) -> Path:
    if source.use in ("own", "ownheld"):
        return OWN / source.path
    if source.use == "long":
        return LONG
    return public_root() / source.path


def rows(name: str) -> list[Example]:
    """The examples of the source `name`."""
    source = BY_NAME[name]
    return list(_read(source))


def _read(source: Source) -> Iterator[Example]:
    for line in path_of(source).read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        raw = json.loads(line)
        if source.use in ("own", "ownheld"):
            if raw.get("layer", "input") != "input":
                continue
            label = "harmful" if raw["kind"] == "harmful" else BENIGN
            category = raw["category"] if label == "harmful" else BENIGN
            yield Example(source.name, raw["id"], raw["text"], label, category, kind=raw["category"])
            continue
        label = "harmful" if raw["label"] == "harmful" else BENIGN
        category = (raw.get("s_category") or OTHER) if label == "harmful" else BENIGN
        yield Example(source.name, raw["id"], raw["text"], label, category, raw.get("split", ""),
                      kind=str(raw.get("category", "")))  # fmt: skip
