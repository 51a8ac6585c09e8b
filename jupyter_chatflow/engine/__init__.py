"""The model as a generator: `Model` (batch-1 generation, attention replay) on a `Runner` (the compiled programs,
the weights, the prompt cache and the per-sequence primitives), the `Scheduler` that batches sequences (a pure
`plan` and a thin loop), sampling, constrained decoding, and `load_model`.
"""

from typing import Any

from jupyter_chatflow import lazy

_NAMES = {
    "Alternative": ".generation",
    "Constraint": ".constraint",
    "Engine": ".generation",
    "Generation": ".generation",
    "GenerationCounts": ".generation",
    "Model": ".model",
    "Runner": ".runner",
    "SamplingParams": ".sampling",
    "Scheduler": ".scheduler",
    "Step": ".generation",
    "load_model": ".loader",
    "tokens_per_s": ".generation",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _NAMES, name)
