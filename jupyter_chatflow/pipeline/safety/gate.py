"""The streaming output scan: holds back what could still become a match, redacts, and can stop generation.

`OutputGate.feed(index, text)` takes each generated token's text and returns what may be shown now: a `Release`
per token (in order) and, before them, a `SafetyDecision` for each flushed chunk in which a guard found something.
What it holds back is the tail after the last "hard" whitespace: one that no redaction pattern can run across
(`pii.holds_across`: not between digit groups, not around "=" or ":", not inside a private-key block) and that is
followed by more text. So an email or a card number still being typed stays hidden until it is complete, and a
chat answer lags by about one token. At most `max_hold` characters are held (more, up to `max_hold_open`, while a
redaction runs to the end of what has come, such as a private-key block); past that the gate releases anyway, so
the stream never stalls; only then can a match split across two releases escape.

Each chunk is scanned together with some released text before it (`context`, at least 128 characters where there
are) that starts at an earlier hard gap: no match crosses such a gap, and a look-behind sees the same there as after
whitespace, so the scan finds what a scan of the whole answer finds. The released texts, joined, equal
`pii.redact(full_text)`. A redacted span's replacement goes on the token where the span starts; the other tokens
of the span show "" (`redacted=True`). Decisions' spans are offsets in the raw generated text (before redaction).
A blocking match returns a block decision; `gate.blocked` is then set, nothing more is released, and the caller
stops generating. A block is settled once `SETTLE_WORDS` words have come after its last word, or at the end: until
then the words after it may still explain it away (a hazard cue's exclude phrase: "addressing" is private data
until "the issue" follows, "finds" a search until "you well"), so the gate holds the text from that last word on
and scans again with the next hard gap (at most `max_hold` characters).

>>> from jupyter_chatflow.pipeline.safety import PiiGuard
>>> gate = OutputGate(guards=(PiiGuard(),))
>>> items = [*gate.feed(0, "Write to"), *gate.feed(1, " bob"), *gate.feed(2, "@example.com"), *gate.feed(3, " soon")]
>>> [(i.text, i.redacted) if isinstance(i, Release) else i.action for i in items + gate.close()]
[('Write to', False), 'redact', (' [EMAIL]', True), ('', True), (' soon', False)]
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator, Sequence

from jupyter_chatflow.events import SafetyDecision, Span

from .decisions import describe_spans, merge, since
from .guards import Guard
from .pii import holds_across, resolve

__all__ = ["OutputGate", "Release"]

_GAP = re.compile(r"\s+")
_WORDS = re.compile(r"\w+")
SETTLE_WORDS = 6
"""Words after a block's last word before it stands: the longest exclude phrase's tail after its cue word
("find" … "you and your family well"), and one for a word still being typed."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Release:
    """What to show for one generated token: its text after redaction."""

    index: int
    text: str
    redacted: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Scan:
    """The guards' findings over the pending text, as spans relative to the start of the pending text."""

    redactions: list[Span]
    flags: list[Span]
    block: SafetyDecision | None
    guards: str
    latency_ms: float


class OutputGate:
    """Streaming output scan over one answer; `feed` each token's text, `close` at the end, then `summary`."""

    def __init__(self, guards: Sequence[Guard] = (), *, max_hold: int = 256, max_hold_open: int = 8192):
        self.guards = tuple(guards)
        self.max_hold, self.max_hold_open = max_hold, max_hold_open
        self.context = 128
        """Characters of released text scanned again with the pending text (at least, where there are)."""
        self.blocked: SafetyDecision | None = None
        self._pieces: list[tuple[int, str]] = []  # pending (token index, text)
        self._pending = ""
        self._released = ""  # released raw text since an earlier hard gap (the scan's context)
        self._offset = 0  # raw offset of the pending text in the whole answer
        self._found: list[SafetyDecision] = []
        self._anchors: list[int] = []  # offsets in `_released` where a hard gap was cut
        self._latency_ms = 0.0

    def feed(self, index: int, text: str) -> list[Release | SafetyDecision]:
        """Take one token's text; return the decisions and releases that are ready."""
        if self.blocked is not None:
            return []
        if not self.guards:
            return [Release(index=index, text=text)]
        if self._pieces and self._pieces[-1][0] == index:  # more text for a token still held
            self._pieces[-1] = (index, self._pieces[-1][1] + text)
        else:
            self._pieces.append((index, text))
        self._pending += text
        if not self._could_cut():
            return []
        return self._flush(final=False)

    def close(self) -> list[Release | SafetyDecision]:
        """The end of the answer: scan and release everything still held."""
        if self.blocked is not None or not self._pieces:
            return []
        return self._flush(final=True)

    def summary(self) -> SafetyDecision:
        """One decision for the whole output layer: the strongest action and everything found, total scan time."""
        names = "+".join(g.name for g in self.guards) or "none"
        if not self._found:
            reason = f"Nothing found in {self._offset} characters." if self.guards else "The output scan is off."
            return SafetyDecision(
                layer="output", action="allow", guard=names, reason=reason, latency_ms=self._latency_ms
            )
        merged = merge(self._found, layer="output", guard=names)
        reason = merged.reason if merged.action == "block" else describe_spans("Found", merged.spans)
        return dataclasses.replace(merged, reason=reason, latency_ms=self._latency_ms)

    # ---- internals ---------------------------------------------------------------------------------------------

    def _could_cut(self) -> bool:
        """Cheap test before scanning: a hard gap with text after it, or too much held."""
        return len(self._pending) > self.max_hold or any(True for _ in self._hard_gaps())

    def _hard_gaps(self) -> Iterator[tuple[int, int]]:
        """(start, end) of whitespace runs in the pending text that no redaction can cross, followed by text."""
        window, base = self._released + self._pending, len(self._released)
        for gap in _GAP.finditer(self._pending):
            if gap.end() < len(self._pending) and not holds_across(window, base + gap.start(), base + gap.end()):
                yield gap.start(), gap.end()

    def _flush(self, *, final: bool) -> list[Release | SafetyDecision]:
        scan = self._scan()
        self._latency_ms += scan.latency_ms
        hold = None
        if scan.block is not None:
            hold = None if final or len(self._pending) > self.max_hold else self._unsettled(scan.block)
            if hold is None:
                self.blocked = scan.block
                self._found.append(scan.block)
                return [scan.block]
        cut, forced = (len(self._pending), True) if final else self._cut(scan.redactions, hold)
        if cut == 0:
            return []
        redactions = [s for s in scan.redactions if s.start < cut]
        flags = [s for s in scan.flags if s.end <= cut or final]
        out: list[Release | SafetyDecision] = []
        if redactions or flags:
            out.append(self._decision(scan, redactions, flags))
        count = self._count_before(cut)
        offset = 0
        for index, text in self._pieces[:count]:
            touched = [s for s in redactions if s.start < offset + len(text) and s.end > offset]
            out.append(Release(index=index, text=_render(self._pending, offset, offset + len(text), touched),
                               redacted=bool(touched)))  # fmt: skip
            offset += len(text)
        self._advance(cut, count, hard=not forced)
        return out

    def _scan(self) -> _Scan:
        """Run every guard over the released context plus the pending text."""
        start = time.perf_counter()
        base = len(self._released)
        decisions = [guard.check(self._released + self._pending, layer="output") for guard in self.guards]

        def fresh(action: str) -> list[Span]:  # spans that reach into the pending text, relative to it
            spans = [s for d in decisions if d.action == action for s in d.spans if s.end > base]
            return [dataclasses.replace(s, start=max(s.start - base, 0), end=s.end - base) for s in spans]

        block = None
        blocks = [d for d in decisions if d.action == "block" and (not d.spans or any(s.end > base for s in d.spans))]
        if blocks:
            spans = tuple(self._absolute(s) for s in fresh("block"))
            block = dataclasses.replace(merge(blocks, layer="output"), spans=spans, latency_ms=since(start))
        return _Scan(
            redactions=resolve(fresh("redact")),
            flags=fresh("flag"),
            block=block,
            guards="+".join(d.guard for d in decisions if d.action != "allow"),
            latency_ms=since(start),
        )

    def _unsettled(self, block: SafetyDecision) -> int | None:
        """While every span of the block has fewer than `SETTLE_WORDS` words after it (what comes next may still
        explain it away): where the earliest span's last word starts in the pending text, to hold from there.
        None once any span stands."""
        holds = []
        for span in block.spans or (Span(start=self._offset, end=self._offset, category=""),):
            end = span.end - self._offset
            if end <= 0 or len(_WORDS.findall(self._pending, end)) >= SETTLE_WORDS:
                return None
            words = [m.start() for m in _WORDS.finditer(self._pending, 0, end)]
            holds.append(words[-1] if words else 0)
        return min(holds)

    def _cut(self, redactions: list[Span], limit: int | None = None) -> tuple[int, bool]:
        """Where to stop releasing (0: not yet), and whether that cuts through a redaction (the hold was full).

        Normally the last token boundary in a hard gap that no redaction crosses (and not after `limit`, where an
        unsettled block's last word starts); when the hold is full, the last boundary no redaction crosses, else
        everything.
        """
        crossed = lambda p: any(s.start < p < s.end for s in redactions)  # noqa: E731
        boundaries = [p for p in self._boundaries() if limit is None or p <= limit]
        gaps = list(self._hard_gaps())
        for point in reversed(boundaries):
            if any(a <= point <= b for a, b in gaps) and not crossed(point):
                return point, False
        open_span = any(s.end >= len(self._pending) for s in redactions)
        if len(self._pending) <= (self.max_hold_open if open_span else self.max_hold):
            return 0, False
        cut = next((p for p in reversed(boundaries) if not crossed(p)), len(self._pending))
        return cut, any(s.start < cut <= s.end for s in redactions)

    def _boundaries(self) -> list[int]:
        """Offsets in the pending text where a held token other than the first starts."""
        points, offset = [], 0
        for _index, text in self._pieces[:-1]:
            offset += len(text)
            points.append(offset)
        return [p for p in points if p > 0]

    def _count_before(self, cut: int) -> int:
        """How many held tokens end at or before `cut`."""
        count, offset = 0, 0
        for _index, text in self._pieces:
            offset += len(text)
            if offset > cut:
                break
            count += 1
        return count

    def _advance(self, cut: int, count: int, *, hard: bool) -> None:
        """Drop the released tokens from the pending text; keep released text since a hard gap as context."""
        self._pieces = self._pieces[count:]
        self._released += self._pending[:cut]
        if hard:  # the cut is in a hard gap: a context may start here
            self._anchors.append(len(self._released))
        keep = [a for a in self._anchors if a <= len(self._released) - self.context]
        drop = keep[-1] if keep else 0
        if len(self._released) > 32 * self.context and not keep:  # no hard gap for long: keep a bounded tail
            drop = len(self._released) - self.context
        self._released = self._released[drop:]
        self._anchors = [a - drop for a in self._anchors if a > drop]
        self._pending = self._pending[cut:]
        self._offset += cut

    def _absolute(self, span: Span) -> Span:
        """A span relative to the pending text as an offset in the whole answer."""
        return dataclasses.replace(span, start=span.start + self._offset, end=span.end + self._offset)

    def _decision(self, scan: _Scan, redactions: list[Span], flags: list[Span]) -> SafetyDecision:
        spans = tuple(sorted((self._absolute(s) for s in [*redactions, *flags]), key=lambda s: (s.start, s.end)))
        categories = tuple(dict.fromkeys(s.category for s in spans))
        decision = SafetyDecision(
            layer="output",
            action="redact" if redactions else "flag",
            guard=scan.guards,
            categories=categories,
            scores=dict.fromkeys(categories, 1.0),
            spans=spans,
            reason=describe_spans("Redacted" if redactions else "Flagged", spans),
            latency_ms=scan.latency_ms,
        )
        self._found.append(decision)
        return decision


def _render(text: str, start: int, end: int, spans: list[Span]) -> str:
    """text[start:end] with the parts inside spans dropped and each span's replacement where the span starts."""
    parts, position = [], start
    for span in spans:
        if span.start >= start:
            parts += [text[position : span.start], span.replacement]
        position = max(position, min(span.end, end))
    parts.append(text[position:end])
    return "".join(parts)
