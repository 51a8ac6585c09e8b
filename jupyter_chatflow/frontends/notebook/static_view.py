"""The static copy of a turn, for pages that run no widgets (nbconvert's HTML, nbviewer, GitHub).

The same figures as the panel, drawn from the same events, as inert HTML with inline styles: the context window
as a stacked bar by segment, the answer's tokens as chips with their probability under the model, and the safety
decisions as badges. Renderers that strip styles (GitHub) still show the text of each.
"""

from __future__ import annotations

import html
import math

from jupyter_chatflow.account import RoundAccount
from jupyter_chatflow.events import SafetyDecision, TokenDelta

KIND_COLOURS = {  # the panel's palette (js/src/styles.css)
    "system": "#8b7fd1", "memory": "#d08ab8", "tools": "#d9a54a", "history": "#7a9cc6", "user": "#4ea97c",
    "tool": "#c9794f", "template": "#9aa3ad", "generated": "#3f8fd2", "answer": "#3f8fd2", "call": "#b8873a",
    "reserve": "#c4d3e6", "free": "#e6e8eb",
}  # fmt: skip
OUTPUT_PARTS = ("answer", "call", "reserve", "free")
"""The gauge's parts after the prompt's: the round's output, the unused reserve, the free rest."""
ACTION_COLOURS = {"allow": "#2e7d4f", "flag": "#9a6700", "redact": "#7a4fb5", "block": "#c2362f"}
SMALL = "font-size:smaller;opacity:.8"


def context_bar(round_: RoundAccount) -> str:
    """The window as a stacked bar, part by part as the account's gauge has it (the prompt's segment kinds, the
    output, the unused reserve, the free rest); a legend below it."""
    window = max(round_.window, 1)
    shown = [p for p in round_.gauge if p.tokens]
    cells = "".join(
        f'<span title="{html.escape(p.label)}: {p.tokens} tokens" style="display:inline-block;height:10px;'
        f'width:{max(0.4, 100 * p.tokens / window):.2f}%;background:{KIND_COLOURS.get(p.kind, "#999")}"></span>'
        for p in shown
    )
    legend = " · ".join(
        f'<span style="color:{KIND_COLOURS.get(p.kind, "#999")}">■</span> {html.escape(p.label)} {p.tokens:,}'
        for p in shown
    )
    bar = f'<div style="display:flex;width:100%;max-width:640px;border:1px solid #ccc;margin:6px 0 2px">{cells}</div>'
    head = f"context window {round_.window:,} tokens, {round_.used_tokens:,} used"
    caption = f'<div style="{SMALL}">{head}: {legend}</div>'
    return f'<div class="cf-static-context">{bar}{caption}</div>'


def token_chips(tokens: list[TokenDelta]) -> str:
    """The answer's tokens, each with its probability under the model (the lower, the darker the chip), folded."""
    chips = "".join(_chip(t) for t in tokens)
    summary = f"{len(tokens)} tokens shown, each with the probability the model gave it"
    return f'<details class="cf-static-tokens"><summary style="{SMALL}">{summary}</summary><div>{chips}</div></details>'


def _chip(token: TokenDelta) -> str:
    p = math.exp(token.logprob)
    text = html.escape(token.text.replace("\n", "↵")) or "∅"
    shade = f"rgba(63,143,210,{0.08 + 0.5 * (1 - p):.2f})"
    return (
        f'<span title="id {token.token_id} · p {p:.3f}" style="display:inline-block;margin:1px;padding:0 3px;'
        f'border-radius:3px;background:{shade};font-family:monospace;white-space:pre;text-align:center">'
        f'{text}<br><small style="opacity:.7">{100 * p:.0f}%</small></span>'
    )


def safety_badges(decisions: list[SafetyDecision]) -> str:
    """One badge per layer's decision, with its categories and reason."""
    badges = []
    for d in decisions:
        colour = ACTION_COLOURS.get(d.action, "#666")
        categories = f" ({', '.join(d.categories)})" if d.categories else ""
        reason = html.escape(d.reason) if getattr(d, "reason", "") else ""
        badges.append(
            f'<span title="{reason}" style="display:inline-block;margin:1px 4px 1px 0;padding:0 6px;'
            f'border-radius:8px;border:1px solid {colour};color:{colour}">'
            f"{html.escape(d.layer)}{html.escape(f' {d.subject}' if d.subject else '')}: {html.escape(d.action)}"
            f"{html.escape(categories)}</span>"
        )
    return f'<div class="cf-static-safety" style="{SMALL}">safety {"".join(badges)}</div>' if badges else ""
