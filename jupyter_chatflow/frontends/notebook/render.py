"""The cell output of a turn: the answer, then a compact account of what happened on the way.

`TurnView` folds events into what a notebook cell shows; it renders as HTML inside Markdown (Jupyter) or plain
text (terminal IPython, logs). The answer is rendered from Markdown by `safe_markdown` (raw HTML shown as text,
images and links written out as text, the result sanitized); every other text is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from jupyter_chatflow.account import TurnAccount, account_of, call_note
from jupyter_chatflow.account.words import ms
from jupyter_chatflow.events import (
    Cancelled,
    Completed,
    ContextAssembled,
    Event,
    Failed,
    HttpRequest,
    HttpResponse,
    Intervened,
    MemoryRecalled,
    MemoryWritten,
    SafetyDecision,
    SseFrame,
    TitleGenerated,
    TokenDelta,
    ToolCall,
    ToolResult,
    TurnStarted,
)
from jupyter_chatflow.pipeline.response import Response

from .safe_markdown import markdown_html
from .static_view import OUTPUT_PARTS, context_bar, safety_badges, token_chips


class TurnView:
    """What one turn looks like so far; feed it events in order."""

    def __init__(self, session: str = "", prewarm: dict[str, Any] | None = None) -> None:
        self.session = session
        """The session the turn went to, named in the summary line ("" leaves it out)."""
        self.prewarm = prewarm
        """The draft prewarm that ran before the turn (the panel's), for its account."""
        self.events: list[Event] = []
        self._account: TurnAccount | None = None
        self.text = ""
        self.tokens: list[TokenDelta] = []
        self.safety: list[SafetyDecision] = []
        self.context: ContextAssembled | None = None
        self.recalled: MemoryRecalled | None = None
        self.written: list[MemoryWritten] = []
        self.tools: list[tuple[ToolCall, ToolResult | None]] = []
        self.title = ""
        self.end: Event | None = None
        self.requests: list[HttpRequest] = []  # a remote turn's wire: its requests, their answers, the SSE frames
        self.responses: list[HttpResponse] = []
        self.frames: list[SseFrame] = []
        self.fork_index = -1
        """A fork's: the token of the forked answer it regenerated from (-1: not a fork)."""
        self.replaced_at = -1
        """Set by the caller on a turn a fork replaced: the token the fork regenerated from (-1: not replaced)."""
        self.intervened: Intervened | None = None
        """An intervened turn's (`Chat.intervene`): what its model had changed."""
        self.replaced_by = ""
        """Set by the caller on a turn an intervened turn replaced: what that turn's model had changed, in words."""

    def add(self, event: Event) -> None:
        """Take one event into account."""
        self.events.append(event)
        self._account = None
        if isinstance(event, TokenDelta):
            self.text += event.text
            self.tokens.append(event)
        elif isinstance(event, SafetyDecision):
            self.safety.append(event)
        elif isinstance(event, ContextAssembled):
            self.context = event
        elif isinstance(event, MemoryRecalled):
            self.recalled = event
        elif isinstance(event, MemoryWritten):
            self.written.append(event)
        elif isinstance(event, ToolCall):
            self.tools.append((event, None))
        elif isinstance(event, ToolResult):
            self.tools = [(c, event if c.call_id == event.call_id else r) for c, r in self.tools]
        elif isinstance(event, TitleGenerated):
            self.title = event.title
        elif isinstance(event, (HttpRequest, HttpResponse, SseFrame)):
            self._wire(event)
        elif isinstance(event, (Completed, Cancelled, Failed)):
            self.end = event
            self.text = event.text or self.text
        elif isinstance(event, TurnStarted) and event.fork_of:
            self.fork_index = event.fork_index
        elif isinstance(event, Intervened):
            self.intervened = event

    @property
    def account(self) -> TurnAccount:
        """The turn's figures so far (`account_of` its events): every number these lines show."""
        if self._account is None:
            self._account = account_of(self.events, self.prewarm)
        return self._account

    @property
    def answer(self) -> str:
        """The answer as shown, marked when stopped."""
        return self.text + (" [stopped]" if isinstance(self.end, Cancelled) else "")

    def summary(self) -> str:
        """The folded details' one-line title: "pipeline", and the session the turn went to."""
        return "pipeline" + (f" · session {self.session}" if self.session else "")

    def details(self) -> list[str]:
        """One short line per pipeline stage that has something to say."""
        lines = [
            f"intervention: {self.intervened.describe()}" if self.intervened is not None else "",
            self._safety_line(),
            self._memory_line(),
            self._context_line(),
            *self._prefill_lines(),
            *self._wire_lines(),
            *self._tool_lines(),
            self._tokens_line(),
            self._speed_line(),
        ]
        if self.title:
            lines += self._title_lines()
        if self.session:
            lines.insert(0, f"session: {self.session}")
        if isinstance(self.end, Failed):
            lines.insert(0, f"error: {self.end.message}")
        return [line for line in lines if line]

    def answer_html(self) -> str:
        """The answer (as shown, marked when stopped) rendered from Markdown into inert HTML."""
        return markdown_html(self.answer) or "<p>…</p>"

    def markdown(self) -> str:
        """For a text/markdown output: the rendered answer and the folded details, as one HTML block (no blank
        line), so every Markdown renderer passes it through as it is."""
        items = "".join(f"<li>{html.escape(line)}</li>" for line in self.details())
        summary = html.escape(self.summary())
        details = f"<details><summary>{summary}</summary><ul>{items}</ul></details>" if items else ""
        return f'<div class="cf-answer-md">{self.answer_html()}{details}</div>'

    def fork_note(self) -> str:
        """The line above a fork, or above the turn a fork replaced ("" for any other turn)."""
        if self.replaced_at >= 0:
            at = self._token_text(self.replaced_at, "here")
            return f"✕ replaced by the next turn, regenerated from token {self.replaced_at}{at}: no longer in the chat"
        if self.replaced_by:
            return f"✕ replaced by the next turn, answered again with {self.replaced_by}: no longer in the chat"
        if self.fork_index >= 0:
            at = self._token_text(self.fork_index, "chosen")
            return f"↪ regenerated from token {self.fork_index}{at} of the answer above, kept up to it; replaces it"
        if self.intervened is not None:
            return (f"↪ the answer above, answered again with {self.intervened.describe()} (for this turn only); "
                    "replaces it")  # fmt: skip
        return ""

    def _token_text(self, index: int, word: str) -> str:
        """' (“ Paris” here)': the answer's token `index`, in a note ("" when there is none)."""
        return f" (“{self.tokens[index].text}” {word})" if 0 <= index < len(self.tokens) else ""

    def html(self, user: str = "") -> str:
        """A static HTML copy (nbconvert, nbviewer, GitHub): the message, the answer, the context window as a
        bar, the tokens with their probabilities, the safety badges, then the details. A fork, and a turn a fork
        replaced (faded), begin with the line that says so."""
        asked = f'<p style="opacity:.7;margin:0 0 4px">{html.escape(user)}</p>' if user else ""
        if note := self.fork_note():
            mark = f'<p class="cf-static-fork" style="font-size:smaller;margin:0 0 4px"><i>{html.escape(note)}</i></p>'
            asked = mark + asked
        figures = [
            context_bar(self.account.rounds[-1]) if self.account.rounds else "",
            token_chips(self.tokens) if self.tokens else "",
            safety_badges(self.safety),
        ]
        details = "".join(f"<li>{html.escape(line)}</li>" for line in self.details() if not line.startswith("safety:"))
        listing = f'<ul style="font-size:smaller;opacity:.8;margin:6px 0 0">{details}</ul>' if details else ""
        body = "".join(figures) + listing
        faded = ";opacity:.6" if self.replaced_at >= 0 else ""
        return f'<div class="cf-static-turn" style="margin:0 0 12px{faded}">{asked}{self.answer_html()}{body}</div>'

    def plain(self) -> str:
        """The answer and the details as plain text."""
        details = "\n".join(f"  · {line}" for line in self.details())
        return f"{self.answer}\n\n{details}" if details else self.answer

    def _safety_line(self) -> str:
        if not self.safety:
            return ""
        parts = [
            f"{d.layer}{f' {d.subject}' if d.subject else ''} {d.action}"
            + (f" ({', '.join(d.categories)})" if d.categories else "")
            for d in self.safety
        ]
        return "safety: " + "; ".join(parts)

    def _memory_line(self) -> str:
        parts = []
        if self.recalled is not None:
            parts.append(f"recalled {len(self.recalled.snippets)}")
        parts += [f"{w.operation} “{w.text}”" for w in self.written]
        return "memory: " + ", ".join(parts) if parts else ""

    def _context_line(self) -> str:
        """The last round's prompt in the window, part by part (the gauge's prompt parts)."""
        rounds = self.account.rounds
        if self.context is None or not rounds:
            return ""
        last = rounds[-1]
        prompt = [p for p in last.gauge if p.kind not in OUTPUT_PARTS]
        used = " + ".join(f"{p.label} {p.tokens:,}" for p in prompt)
        trimmed = f"; trimmed {len(self.context.trimmed)}" if self.context.trimmed else ""
        return f"context: {last.context_tokens:,}/{last.window:,} tokens in the prompt ({used}){trimmed}"

    def _prefill_lines(self) -> list[str]:
        """Each round's prefills: what they held beyond the prompt, what the prompt cache gave."""
        rounds = [r for r in self.account.rounds if r.prefill_note]
        many = len(rounds) > 1
        return [f"{f'round {k + 1}: ' if many else ''}{r.prefill_note}" for k, r in enumerate(rounds)]

    def _tokens_line(self) -> str:
        a = self.account
        return f"tokens: {a.generated_note}" if self.end is not None and (a.answer_tokens or a.call_tokens) else ""

    def _title_lines(self) -> list[str]:
        """The session's title, then whose it is and when it came (the account's words)."""
        a = self.account
        after = f"; {ms(a.title_after_ms)} after the answer" if a.title_after_ms else ""
        return [f"title: {self.title}", *([f"title source: {a.title_note}{after}"] if a.title_note else [])]

    def _wire(self, event: HttpRequest | HttpResponse | SseFrame) -> None:
        if isinstance(event, HttpRequest):
            self.requests.append(event)
        elif isinstance(event, HttpResponse):
            self.responses.append(event)
        else:
            self.frames.append(event)

    def _wire_lines(self) -> list[str]:
        """A remote turn: each request, its status and request id, and the SSE frames that answered it."""
        lines = []
        for request in self.requests:
            answer = next((r for r in self.responses if r.round == request.round and r.sequence_number >
                           request.sequence_number), None)  # fmt: skip
            status = f" → {answer.status} {answer.reason}" if answer else " → …"
            rid = f", {answer.request_id}" if answer and answer.request_id else ""
            frames = [f for f in self.frames if f.round == request.round] if request.method == "POST" else []
            sse = f", {len(frames)} SSE frames ({sum(f.bytes for f in frames):,} bytes)" if frames else ""
            lines.append(f"server: {request.method} {request.url}{status}{rid}{sse}")
        return lines

    def _tool_lines(self) -> list[str]:
        lines = []
        for call, result in self.tools:
            outcome = "…" if result is None else (f"error: {result.error}" if result.error else result.output)
            ms = f" ({result.latency_ms:.0f} ms)" if result else ""
            note = call_note(call)
            if call.cut:  # nothing ran: the line shows what was written of the arguments
                lines.append(f"tool: {call.name}({_short(call.arguments_text)}…) · {note}")
                continue
            lines.append(f"tool: {call.name}({_short(str(call.arguments))}) → {_short(outcome)}{ms}"
                         + (f" · {note}" if note else ""))  # fmt: skip
        return lines

    def _speed_line(self) -> str:
        """The time to the first token and what it was made of, tokens/s over the decode ticks, the answer's
        time, how it ended: the account's figures."""
        if not isinstance(self.end, (Completed, Cancelled)):
            return ""
        a = self.account
        parts = [a.ttft_note] if a.ttft_note else []
        parts += [f"{a.tokens_per_s:.1f} tok/s"] if a.tokens_per_s is not None else []
        parts += [f"answer {ms(a.answer_ms)}"] if a.answer_ms is not None else []
        ending = self.end.finish_reason if isinstance(self.end, Completed) else "stopped"
        return "speed: " + ", ".join(parts) + f" · {ending}" if parts else f"finish: {ending}"


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def response_markdown(response: Iterable[Event]) -> str:
    """A `Response` shown in a notebook: the answer and the pipeline summary, as `%%chat` shows them (runs the
    turn to its end)."""
    view = TurnView()
    for event in response:
        view.add(event)
    return view.markdown()


def register_display(shell: Any) -> None:
    """Let IPython show a `Response` (a cell ending in `chat.send(…)`) as `response_markdown` draws it. The
    package calls this when it is imported in a running IPython, and `%load_ext jupyter_chatflow` again."""
    shell.display_formatter.formatters["text/markdown"].for_type(Response, response_markdown)
