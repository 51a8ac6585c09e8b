"""Context assembly: system prompt, memory, tools, history and the user's message, fitted to the window.

The budget is the model's window minus the tokens reserved for the answer. When the prompt is over budget the
oldest history turns go first (dropped, or summarized by the model), then recalled memories; the system
prompt and the newest user message are never removed (if they alone do not fit, that is an error that says
what to shorten). Every prompt token is attributed to the segment it came from, or to the chat template.

Dropping goes in blocks: the history is cut only at turns where its running token count crosses a multiple of
`trim_block` (a quarter of the budget by default). Those cut points depend only on the turns before them, so
consecutive turns of a long conversation start from the same turn and share their prompt's prefix: the prompt
cache serves it, and a follow-up computes only its new tokens. Dropping the fewest turns that fit instead moved
the start by a turn at every turn, and every turn recomputed the whole window (8k tokens: ~55 s on 2 cores).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

from jupyter_chatflow.errors import ChatflowError
from jupyter_chatflow.events import ContextAssembled, Run, Segment, SegmentKind, Snippet, Tokenized, Trim
from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

Message = dict[str, str]
Summarizer = Callable[[Sequence[Message]], str]
MEMORY_HEADER = "What you remember about the user (use it only where it helps):"


class ContextError(ChatflowError):
    """The system prompt and the user's message alone do not fit the window."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PromptPart:
    """A piece of text headed for the prompt, with the segment it belongs to."""

    kind: SegmentKind
    label: str
    text: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Assembled:
    """The prompt the model will see: messages, ids, and the two events that describe them."""

    messages: list[Message]
    ids: list[int]
    context: ContextAssembled
    tokenized: Tokenized


@dataclasses.dataclass(frozen=True, kw_only=True)
class Inputs:
    """Everything that may go into a prompt."""

    system: str
    user: str
    memory: Sequence[Snippet] = ()
    tools: str = ""
    history: Sequence[Sequence[Message]] = ()
    """Earlier turns, oldest first; each is its messages (user, assistant, tool…)."""
    pending: Sequence[Message] = ()
    """This turn's tool exchange so far (assistant calls and tool results), after the user's message."""


def assemble(
    tokenizer: Tokenizer, inputs: Inputs, *, window: int, reserved_output: int, summarize: Summarizer | None = None,
    trim_block: int | None = None,
) -> Assembled:  # fmt: skip
    """Fit `inputs` into `window - reserved_output` tokens and tokenize them with the chat template.

    `trim_block`: history is dropped at cut points every this many tokens (default: a quarter of the budget; 0
    drops one turn at a time until the prompt fits, which moves the prompt's start at every turn)."""
    started = time.perf_counter()
    budget = window - reserved_output
    block = budget // 4 if trim_block is None else trim_block
    alone = len(tokenizer.encode(inputs.system)) + len(tokenizer.encode(inputs.user))
    if alone > budget:  # checked first: a huge message fails fast, without rendering the template again and again
        raise ContextError(_too_long(alone, window, reserved_output, inputs, exact=False))
    history, memory, trims = list(inputs.history), list(inputs.memory), []
    cuts = _Cuts(tokenizer, history, block)
    while True:
        parts = _parts(dataclasses.replace(inputs, history=history, memory=memory))
        messages = _messages(parts)
        ids = tokenizer.apply_chat_template(messages)
        if len(ids) <= budget:
            break
        trims.append(_trim_one(tokenizer, history, memory, summarize, len(ids) - budget, cuts))
        if trims[-1] is None:
            raise ContextError(_too_long(len(ids), window, reserved_output, inputs, exact=True))
    segments, runs = _provenance(tokenizer, ids, parts)
    elapsed = (time.perf_counter() - started) * 1000
    context = ContextAssembled(
        window=window, reserved_output=reserved_output, budget=budget, prompt_tokens=len(ids),
        segments=segments, trimmed=tuple(t for t in trims if t is not None),
        strategy="summarize" if summarize else "drop", latency_ms=elapsed,
    )  # fmt: skip
    return Assembled(messages=messages, ids=ids, context=context, tokenized=Tokenized(ids=tuple(ids), provenance=runs))


def plain_messages(inputs: Inputs) -> list[Message]:
    """The messages `assemble` would make of `inputs` before any trimming (a remote turn's: the server's own
    template and window apply there)."""
    return _messages(_parts(inputs))


def _parts(inputs: Inputs) -> list[PromptPart]:
    """The prompt's pieces in order; the system message is the system prompt + memory + tools."""
    parts = [PromptPart(kind="system", label="system", text=inputs.system)]
    if inputs.memory:
        lines = "\n".join(f"- {s.text}" for s in inputs.memory)
        parts.append(PromptPart(kind="memory", label="memory", text=f"\n\n{MEMORY_HEADER}\n{lines}"))
    if inputs.tools:
        parts.append(PromptPart(kind="tools", label="tools", text=f"\n\n{inputs.tools}"))
    for k, turn in enumerate(inputs.history):
        parts += [PromptPart(kind="history", label=f"history[{k}] {m['role']}", text=m["content"]) for m in turn]
    parts.append(PromptPart(kind="user", label="user", text=inputs.user))
    for m in inputs.pending:
        is_result = m["role"] in ("tool", "ipython") or m["content"].startswith("<tool_response>")
        kind: SegmentKind = "tool" if is_result else "generated"
        label = "tool result" if is_result else "the model's tool call"
        parts.append(PromptPart(kind=kind, label=label, text=m["content"]))
    return parts


def _messages(parts: Sequence[PromptPart]) -> list[Message]:
    system = "".join(p.text for p in parts if p.kind in ("system", "memory", "tools"))
    # (no system text: no system message, so the template's own default applies, Qwen's "You are Qwen…", or none)
    messages = [{"role": "system", "content": system}] if system else []
    for part in parts:
        if part.kind in ("history", "user", "tool", "generated"):
            messages.append({"role": _role(part), "content": part.text})
    return messages


def _role(part: PromptPart) -> str:
    if part.kind == "user":
        return "user"
    return part.label.rsplit(" ", 1)[-1]


def _trim_one(
    tokenizer: Tokenizer, history: list, memory: list, summarize: Summarizer | None, over: int, cuts: _Cuts
) -> Trim | None:
    """Remove the oldest history turns up to a cut point (or summarize all of them), else the least relevant
    memory; None if nothing is left to remove."""
    reason = f"the prompt was {over} tokens over the budget"
    if history and summarize is not None and not _is_summary(history[0]):
        turns = [m for turn in history for m in turn]
        tokens = sum(len(tokenizer.encode(m["content"])) for m in turns)
        history[:] = [[{"role": "user", "content": f"(Summary of the conversation so far: {summarize(turns)})"}]]
        return Trim(label=f"history[0..{len(turns) - 1}]", tokens=tokens, action="summarized", reason=reason)
    if history:
        count, tokens = cuts.next(over)
        del history[:count]
        label = "oldest history turn" if count == 1 else f"oldest {count} history turns"
        return Trim(label=label, tokens=tokens, action="dropped", reason=reason)
    if memory:
        snippet = memory.pop()
        return Trim(label=f"memory #{snippet.memory_id}", tokens=len(tokenizer.encode(snippet.text)), action="dropped",
                    reason=reason)  # fmt: skip
    return None


class _Cuts:
    """Where the history may be cut: after a turn at which its running token count (from the conversation's first
    turn) crosses a multiple of `block`, and after the last turn. The cut points depend only on the turns before
    them, so they stay put as the conversation grows (block <= 0: after every turn)."""

    def __init__(self, tokenizer: Tokenizer, history: Sequence[Sequence[Message]], block: int):
        wrap = _message_overhead(tokenizer) if history else 0
        sizes = [sum(len(tokenizer.encode(m["content"])) + wrap for m in turn) for turn in history]
        self.running = np.cumsum([0, *sizes])
        crossed = [k for k in range(1, len(sizes) + 1) if block <= 0 or _blocks(self.running, k, block)]
        self.points = [*crossed, len(sizes)] if sizes else []
        self.dropped, self.one_by_one = 0, block <= 0

    def next(self, over: int) -> tuple[int, int]:
        """Drop to the first cut point that removes about `over` tokens (or the next one: the assembly checks the
        real count again); returns (turns dropped now, their content tokens)."""
        start = self.running[self.dropped]
        later = [p for p in self.points if p > self.dropped]
        enough = (p for p in later if self.one_by_one or self.running[p] - start >= over)
        point = next(enough, later[-1])
        count, self.dropped = point - self.dropped, point
        return count, int(self.running[point] - start)


def _message_overhead(tokenizer: Tokenizer) -> int:
    """Template tokens around one message (role header, end marker), measured on the chat template itself."""
    one = [{"role": "system", "content": "s"}, {"role": "user", "content": "x"}]
    three = [*one, {"role": "assistant", "content": "y"}, {"role": "user", "content": "x"}]
    texts = len(tokenizer.encode("y")) + len(tokenizer.encode("x"))
    extra = len(tokenizer.apply_chat_template(three)) - len(tokenizer.apply_chat_template(one)) - texts
    return max(extra // 2, 0)


def _blocks(running: np.ndarray, k: int, block: int) -> bool:
    return bool(running[k] // block > running[k - 1] // block)


def _is_summary(turn: Sequence[Message]) -> bool:
    return len(turn) == 1 and turn[0]["content"].startswith("(Summary of the conversation so far:")


def _too_long(tokens: int, window: int, reserved: int, inputs: Inputs, *, exact: bool) -> str:
    """The error for a prompt that cannot fit: its size (`exact`: as the template renders it, else the system
    prompt and the message alone, a lower bound) and the fix that applies."""
    needs = f"needs {tokens}" if exact else f"needs at least {tokens}"
    room = max(window - reserved, 0)  # what the answer's reserve leaves of the window
    if tokens < window and reserved > window - tokens:  # it would fit without the answer's reserve
        return (
            f"The prompt {needs} tokens even with all history and memory left out, and max_tokens={reserved} "
            f"leaves {room} of the {window}-token window for it: lower max_tokens to at most "
            f"{window - tokens}{'' if exact else ' (less, for the chat template)'}, or use a larger context window."
        )
    shorten = (
        "the message, the system prompt or the tools offered" if inputs.tools else "the message or the system prompt"
    )
    return (
        f"The prompt {needs} tokens even with all history and memory left out, but only {room} fit "
        f"({window}-token window, {reserved} reserved for the answer): shorten {shorten}, or lower max_tokens."
    )


def _provenance(
    tokenizer: Tokenizer, ids: Sequence[int], parts: Sequence[PromptPart]
) -> tuple[tuple[Segment, ...], tuple[Run, ...]]:
    """Segments (with token counts) and runs of tokens per segment; the last segment is the template."""
    pieces = [tokenizer.token_bytes(i) for i in ids]
    starts = np.cumsum([0] + [len(p) for p in pieces[:-1]])  # byte offset of each token
    owner = _byte_owners(b"".join(pieces), parts)
    template = len(parts)
    token_owner = [int(owner[s]) if len(pieces[i]) and owner[s] >= 0 else template for i, s in enumerate(starts)]
    counts = np.bincount(token_owner, minlength=len(parts) + 1)
    segments = tuple(
        Segment(kind=p.kind, label=p.label, tokens=int(counts[k]), text=p.text) for k, p in enumerate(parts)
    )
    segments += (Segment(kind="template", label="chat template", tokens=int(counts[template])),)
    return segments, _runs(token_owner)


def _byte_owners(prompt: bytes, parts: Sequence[PromptPart]) -> np.ndarray:
    """For each byte of the prompt, the index of the part whose text it is, or -1 (template text)."""
    owner = np.full(len(prompt) + 1, -1, np.int32)
    cursor = 0
    for k, part in enumerate(parts):
        text = part.text.encode("utf-8")
        at = prompt.find(text, cursor) if text else -1
        if at < 0:
            at = prompt.find(text.strip(), cursor) if text.strip() else -1  # templates may trim
            text = text.strip()
        if at >= 0:
            owner[at : at + len(text)] = k
            cursor = at + len(text)
    return owner


def _runs(owner: Sequence[int]) -> tuple[Run, ...]:
    runs: list[Run] = []
    for i, segment in enumerate(owner):
        if runs and runs[-1].segment == segment:
            runs[-1] = dataclasses.replace(runs[-1], end=i + 1)
        else:
            runs.append(Run(segment=segment, start=i, end=i + 1))
    return tuple(runs)
