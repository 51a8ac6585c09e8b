"""Context assembly: system prompt, memory, tools, history and the user's message, fitted to the window.

The budget is the model's window minus the tokens reserved for the answer. When the prompt is over budget the
oldest history turns go first (dropped, or summarized by the model), then recalled memories; the system
prompt and the newest user message are never removed (if they alone do not fit, that is an error that says
what to shorten). Every prompt token is attributed to the segment it came from, or to the chat template.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

from .errors import ChatflowError
from .events import ContextAssembled, Run, Segment, Snippet, Tokenized, Trim
from .tokenizer import Tokenizer

Message = dict[str, str]
Summarizer = Callable[[Sequence[Message]], str]
MEMORY_HEADER = "What you remember about the user (use it only where it helps):"


class ContextError(ChatflowError):
    """The system prompt and the user's message alone do not fit the window."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Part:
    """A piece of text headed for the prompt, with the segment it belongs to."""

    kind: str
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
    tokenizer: Tokenizer, inputs: Inputs, *, window: int, reserved_output: int, summarize: Summarizer | None = None
) -> Assembled:
    """Fit `inputs` into `window - reserved_output` tokens and tokenize them with the chat template."""
    started = time.perf_counter()
    budget = window - reserved_output
    alone = len(tokenizer.encode(inputs.system)) + len(tokenizer.encode(inputs.user))
    if alone > budget:  # checked first: a huge message fails fast, without rendering the template again and again
        raise ContextError(_too_long(alone, window, reserved_output))
    history, memory, trims = list(inputs.history), list(inputs.memory), []
    while True:
        parts = _parts(dataclasses.replace(inputs, history=history, memory=memory))
        messages = _messages(parts)
        ids = tokenizer.apply_chat_template(messages)
        if len(ids) <= budget:
            break
        trims.append(_trim_one(tokenizer, history, memory, summarize, len(ids) - budget))
        if trims[-1] is None:
            raise ContextError(_too_long(len(ids), window, reserved_output))
    segments, runs = _provenance(tokenizer, ids, parts)
    elapsed = (time.perf_counter() - started) * 1000
    context = ContextAssembled(
        window=window, reserved_output=reserved_output, budget=budget, prompt_tokens=len(ids),
        segments=segments, trimmed=tuple(t for t in trims if t is not None),
        strategy="summarize" if summarize else "drop", latency_ms=elapsed,
    )  # fmt: skip
    return Assembled(messages=messages, ids=ids, context=context, tokenized=Tokenized(ids=tuple(ids), provenance=runs))


def _parts(inputs: Inputs) -> list[Part]:
    """The prompt's pieces in order; the system message is the system prompt + memory + tools."""
    parts = [Part(kind="system", label="system", text=inputs.system)]
    if inputs.memory:
        lines = "\n".join(f"- {s.text}" for s in inputs.memory)
        parts.append(Part(kind="memory", label="memory", text=f"\n\n{MEMORY_HEADER}\n{lines}"))
    if inputs.tools:
        parts.append(Part(kind="tools", label="tools", text=f"\n\n{inputs.tools}"))
    for k, turn in enumerate(inputs.history):
        parts += [Part(kind="history", label=f"history[{k}] {m['role']}", text=m["content"]) for m in turn]
    parts.append(Part(kind="user", label="user", text=inputs.user))
    for m in inputs.pending:
        is_result = m["role"] in ("tool", "ipython") or m["content"].startswith("<tool_response>")
        kind = "tool" if is_result else "generated"
        parts.append(Part(kind=kind, label=f"{kind} {m['role']}", text=m["content"]))
    return parts


def _messages(parts: Sequence[Part]) -> list[Message]:
    system = "".join(p.text for p in parts if p.kind in ("system", "memory", "tools"))
    messages = [{"role": "system", "content": system}]
    for part in parts:
        if part.kind in ("history", "user", "tool", "generated"):
            messages.append({"role": _role(part), "content": part.text})
    return messages


def _role(part: Part) -> str:
    if part.kind == "user":
        return "user"
    return part.label.rsplit(" ", 1)[-1]


def _trim_one(
    tokenizer: Tokenizer, history: list, memory: list, summarize: Summarizer | None, over: int
) -> Trim | None:
    """Remove the oldest history turn (or summarize all of it), else the least relevant memory; None if nothing."""
    reason = f"the prompt was {over} tokens over the budget"
    if history and summarize is not None and not _is_summary(history[0]):
        turns = [m for turn in history for m in turn]
        tokens = sum(len(tokenizer.encode(m["content"])) for m in turns)
        history[:] = [[{"role": "user", "content": f"(Summary of the conversation so far: {summarize(turns)})"}]]
        return Trim(label=f"history[0..{len(turns) - 1}]", tokens=tokens, action="summarized", reason=reason)
    if history:
        turn = history.pop(0)
        tokens = sum(len(tokenizer.encode(m["content"])) for m in turn)
        return Trim(label="oldest history turn", tokens=tokens, action="dropped", reason=reason)
    if memory:
        snippet = memory.pop()
        return Trim(label=f"memory #{snippet.memory_id}", tokens=len(tokenizer.encode(snippet.text)), action="dropped",
                    reason=reason)  # fmt: skip
    return None


def _is_summary(turn: Sequence[Message]) -> bool:
    return len(turn) == 1 and turn[0]["content"].startswith("(Summary of the conversation so far:")


def _too_long(tokens: int, window: int, reserved: int) -> str:
    return (
        f"The prompt needs {tokens} tokens even with all history and memory left out, but only "
        f"{window - reserved} fit ({window}-token window, {reserved} reserved for the answer): shorten the "
        "message or the system prompt, or lower max_tokens."
    )


def _provenance(
    tokenizer: Tokenizer, ids: Sequence[int], parts: Sequence[Part]
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


def _byte_owners(prompt: bytes, parts: Sequence[Part]) -> np.ndarray:
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
