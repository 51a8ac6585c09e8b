"""Safety layers of a chat turn, each a `SafetyDecision` event: input, model, output (streaming) and tool.

Categories follow Llama Guard 3's hazard taxonomy (`taxonomy`); the default guards are transparent: hazard frames
for S1–S14 (`hazards`: lemmatized word families, an anchor plus a request or intent, minus benign contexts; the
tables are data files under `data/`, read by `tables`), pattern rules (`rules`), injected instructions in tool
results cut out whole (`injection`) and PII patterns (`pii`). On the input layer the intent probe (`IntentGuard`,
a linear probe over the chat's own model's hidden states: `probe`) adds what the words miss; `SafetyPolicy.
with_model` binds it. Optional: a guard scored by the loaded model with a Llama-Guard-style prompt (`ModelGuard`).
Guards are pluggable (`Guard`: a `name` and `check(text, *, layer)`), the policy is configurable (`SafetyPolicy`).
`python -m jupyter_chatflow.pipeline.safety.evaluate` scores the rules on the public evaluation set
(`data/eval.jsonl`), `benchmarks/bench_safety.py` the input layer on the intent probe's held-out split.

>>> policy = SafetyPolicy(mode="all")
>>> decisions, text = policy.scan_input("My card is 4111 1111 1111 1111")
>>> text, decisions[0].action
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
