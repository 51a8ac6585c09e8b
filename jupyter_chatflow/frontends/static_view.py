"""The static copy of a turn, for pages that run no widgets (nbconvert's HTML, nbviewer, GitHub).

The same figures as the panel, drawn from the same events, as inert HTML with inline styles: the context window
as a stacked bar by segment, the answer's tokens as chips with their probability under the model, and the safety
decisions as badges. Renderers that strip styles (GitHub) still show the text of each.
"""

from __future__ import annotations

import html
import math

from jupyter_chatflow.events import ContextAssembled, SafetyDecision, TokenDelta

KIND_COLOURS = {  # the panel's palette (js/src/styles.css)
    "system": "#8b7fd1", "memory": "#d08ab8", "tools": "#d9a54a", "history": "#7a9cc6", "user": "#4ea97c",
    "tool": "#c9794f", "template": "#9aa3ad", "generated": "#3f8fd2", "free": "#e6e8eb",
}  # fmt: skip
ACTION_COLOURS = {"allow": "#2e7d4f", "flag": "#9a6700", "redact": "#7a4fb5", "block": "#c2362f"}
SMALL = "font-size:smaller;opacity:.8"


def context_bar(context: ContextAssembled, generated: int) -> str:
    """The window as a stacked bar: each segment kind, the answer, the free rest; a legend below it."""
    parts: dict[str, int] = {}
    for segment in context.segments:
        parts[segment.kind] = parts.get(segment.kind, 0) + segment.tokens
    parts["generated"] = generated
    parts["free"] = max(0, context.window - context.prompt_tokens - generated)
    shown = {kind: n for kind, n in parts.items() if n}
    cells = "".join(
        f'<span title="{kind}: {n} tokens" style="display:inline-block;height:10px;'
        f'width:{max(0.4, 100 * n / context.window):.2f}%;background:{KIND_COLOURS.get(kind, "#999")}"></span>'
        for kind, n in shown.items()
    )
    legend = " · ".join(
        f'<span style="color:{KIND_COLOURS.get(k, "#999")}">■</span> {k} {n:,}' for k, n in shown.items()
    )
    bar = f'<div style="display:flex;width:100%;max-width:640px;border:1px solid #ccc;margin:6px 0 2px">{cells}</div>'
    caption = f'<div style="{SMALL}">context window {context.window:,} tokens: {legend}</div>'
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
            f"{html.escape(d.layer)}: {html.escape(d.action)}{html.escape(categories)}</span>"
        )
    return f'<div class="cf-static-safety" style="{SMALL}">safety {"".join(badges)}</div>' if badges else ""
