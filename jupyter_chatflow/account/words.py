"""The account's figures in words: one formatter per kind of number, shared by every sentence the account writes.

`ms` writes a duration as the panel's `fmtMs` does (js/src/dom.ts), so a figure reads the same in every view.
"""

from __future__ import annotations


def ms(value: float) -> str:
    """ "6.67 s", "412 ms", "3.5 ms", "0.40 ms": as the panel's fmtMs."""
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    if value >= 10:
        return f"{value:.0f} ms"
    return f"{value:.1f} ms" if value >= 1 else f"{value:.2f} ms"


def tokens(n: int, what: str = "token") -> str:
    """ "1 token", "12 tokens"."""
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def listed(parts: list[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1] if parts else ""
