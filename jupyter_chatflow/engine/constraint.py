"""The hook for constrained decoding: something that says which tokens may come next.

`Model.generate(..., constraint=c)` asks `c.allowed()` before each step, masks every other token out of the
sampler, tells `c.advance(token)` what was picked, and stops (finish_reason "stop") once `c.is_done()`.
A constrained generation runs step by step (no read-ahead), since each mask depends on the previous token.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Constraint(Protocol):
    """Decides the allowed next tokens (e.g. a JSON-schema grammar over the tokenizer's vocabulary)."""

    def allowed(self) -> np.ndarray | None:
        """bool [vocab_size]: True for each token that may come next; None when any token may."""
        ...

    def advance(self, token_id: int) -> None:
        """Record the token that was generated."""
        ...

    def is_done(self) -> bool:
        """True once the constrained text is complete."""
        ...
