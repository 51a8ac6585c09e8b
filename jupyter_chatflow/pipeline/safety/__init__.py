"""Safety layers of a chat turn, each a `SafetyDecision` event: input, model, output (streaming) and tool.

Categories follow Llama Guard 3's hazard taxonomy (`taxonomy`); the default guards are transparent: hazard frames
for S1–S14 (`hazards`: lemmatized word families, an anchor plus a request or intent, minus benign contexts; the
tables are data files under `data/`, read by `tables`), pattern rules (`rules`), injected instructions in tool
results cut out whole (`injection`) and PII patterns (`pii`). On the input layer the intent probe (`IntentGuard`,
a linear probe over the chat's own model's hidden states: `probe`) adds what the words miss; `SafetyPolicy.
with_model` binds it. Optional: a guard scored by the loaded model with a Llama-Guard-style prompt (`ModelGuard`).
A message about suicide or self-harm that asks for no method is met with care (`care`): flagged, it goes on to the
model with a supportive instruction and a crisis line; a request for a method stays blocked and shows the line too.
Guards are pluggable (`Guard`: a `name` and `check(text, *, layer)`), the policy is configurable (`SafetyPolicy`).
The rows the layer is trained and scored on, and the scripts that do it, are in the repository's `safety_lab/`
(not in the wheel): `python safety_lab/rules_eval.py` scores the rules on the evaluation set
(`safety_lab/data/eval.jsonl`), `benchmarks/bench_safety.py` the input layer on the intent probe's held-out split.

What would a turn decide? `SafetyPolicy().scan_input(text)`: the decision a chat's turn makes on the default model
(the rules and that model's intent probe: the first call loads the model, about a second); `Chat(model=…).policy`
for another model; `SafetyPolicy(intent_probe=False)` for the rules alone.

>>> decisions, text = SafetyPolicy().scan_input("My card is 4111 1111 1111 1111")  # doctest: +SKIP
>>> text, decisions[0].action  # doctest: +SKIP
('My card is [CARD]', 'redact')
"""

from __future__ import annotations

from .decisions import ACTIONS, LAYERS, SafetyConfigError, merge
from .frames import Frame
from .gate import OutputGate, Release
from .guards import Guard, PiiGuard, RefusalGuard, RuleGuard
from .injection import InjectionGuard, find_injections
from .intent import IntentGuard
from .model_guard import ModelGuard
from .pii import find_pii, redact
from .policy import MODES, SafetyPolicy, default_guards
from .rules import Rule
from .taxonomy import CATEGORIES, HAZARDS, Category

__all__ = [
    "ACTIONS",
    "CATEGORIES",
    "HAZARDS",
    "LAYERS",
    "MODES",
    "Category",
    "Frame",
    "Guard",
    "InjectionGuard",
    "IntentGuard",
    "ModelGuard",
    "OutputGate",
    "PiiGuard",
    "RefusalGuard",
    "Release",
    "Rule",
    "RuleGuard",
    "SafetyConfigError",
    "SafetyPolicy",
    "default_guards",
    "find_injections",
    "find_pii",
    "merge",
    "redact",
]
