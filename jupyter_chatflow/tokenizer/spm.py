"""SentencePiece ('llama') GGUF vocabularies as a real `tiktoken.Encoding`, byte-exact with llama.cpp.

llama.cpp's `llm_tokenizer_spm_session::tokenize` (`src/llama-vocab.cpp`) starts from the UTF-8 characters of
the escaped text (' ' -> '▁') and keeps merging the adjacent pair whose concatenation is a token with the
highest score (ties: the leftmost pair). A final symbol that is not a token (a character of no token) becomes
the `<0xNN>` byte tokens of its bytes. tiktoken keeps merging the adjacent pair whose concatenation has the
lowest rank (ties: leftmost), starting from bytes. The Encoding here gets ranks in three tiers:

- tier 0: the 256 single bytes;
- tier 1: every character that is a token or occurs in a multi-character token, and the byte-prefixes of
  those characters, so a character's bytes merge into it before any tier-2 merge (a tier-1 string never
  spans two characters, so these merges never cross a character boundary);
- tier 2: every multi-character token (any type: llama.cpp's `text_to_token` knows them all), by score
  descending, ties by id.

tiktoken takes a piece that is itself a token whole, without merging; where SPM does not rebuild a token from
its own characters (`_not_self_merging`, found at load time), such a piece gets SPM's tokens instead.

Ranks are therefore not token ids: a table (`_single`, or `_starts`/`_lengths`/`_flat`) maps each rank to the ids
it stands for (a token: [id]; a
helper rank, i.e. a character or byte-prefix that is not a token: the byte tokens of its bytes; a single byte:
its one-character token if there is one, else its byte token, as `byte_to_token` picks).

Limitation: llama.cpp breaks a score tie between *different* tokens by position, tiktoken by rank (here: id).
`tie_conflicts` lists the tied token pairs where that can matter (see `_tie_conflicts`), and `Tokenizer`
refuses such a vocabulary. There are none when the multi-character tokens' scores are distinct; Llama 2,
TinyLlama and Mistral v0.1 should qualify (their normal tokens' scores follow merge order, and the control and
byte tokens that share the score 0 do not overlap), but no such file was at hand to check.

Pre-tokenizing: SPM has no word split, but tiktoken's merge loop is quadratic in the piece length. A character
that occurs in no multi-character token can never merge, so it is a piece of its own; and when no token has
'▁' after a non-'▁' character (`split_at_space`), no token crosses the start of a '▁' run that follows another
character, so the text is also cut there. Otherwise a run of mergeable characters is one piece (tiktoken 0.14
measured ~10 ms for one 100 KB piece, so long pieces are affordable).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tiktoken

from jupyter_chatflow.errors import ModelFormatError

__all__ = ["SPACE", "SpmCodec", "spm_piece_bytes"]

SPACE = "\u2581"  # '▁', SentencePiece's visible space
_BYTE_TYPE = 6


def _byte_token_text(byte: int) -> str:
    return f"<0x{byte:02X}>"


def spm_piece_bytes(text: str, kind: int) -> bytes | None:
    """The bytes a normal or byte token stands for ('▁the' -> b' the', '<0x0A>' -> b'\\n'); None for others."""
    if kind == _BYTE_TYPE:
        if len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
            try:
                return bytes([int(text[3:5], 16)])
            except ValueError:
                pass
        return text.encode("utf-8")
    if kind == 1:
        return text.replace(SPACE, " ").encode("utf-8")
    return None


def _escape(code: int) -> str:
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


def _char_class(chars: set[str]) -> str:
    """A regex character class body for these characters, as ranges."""
    codes = sorted(ord(c) for c in chars)
    parts: list[str] = []
    k = 0
    while k < len(codes):
        j = k
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        parts.append(_escape(codes[k]) + (f"-{_escape(codes[j])}" if j > k else ""))
        k = j + 1
    return "".join(parts)


@dataclass(frozen=True, eq=False)
class SpmCodec:
    """The tiktoken Encoding for an SPM vocabulary and the table from its ranks to token ids."""

    encoding: tiktoken.Encoding
    add_space_prefix: bool
    split_at_space: bool
    """Whether the pattern also cuts before a '▁' run that follows another character (see the module doc)."""
    tie_conflicts: tuple[tuple[int, int], ...]
    """(left id, right id) of tied multi-character tokens whose merge order may depend on position."""
    _whole: dict[str, list[int]]
    """Tokens SPM does not rebuild from their own text, with the ranks it gives instead (see `encode_fragment`)."""
    _whole_ranks: np.ndarray
    _merging_codes: np.ndarray
    """The code points of the characters that occur in some multi-character token, sorted."""
    _rank_chars: np.ndarray
    """Per rank, how many characters start in its bytes (UTF-8 lead bytes)."""
    _single: np.ndarray
    _starts: np.ndarray
    _lengths: np.ndarray
    _flat: np.ndarray

    @classmethod
    def build(
        cls,
        texts: Sequence[str],
        scores: Sequence[float],
        metadata: Mapping[str, Any],
        cut_texts: Collection[str] = (),
    ) -> SpmCodec:
        """Build the tiered Encoding from the tokens and scores (see the module doc).

        cut_texts: the texts llama.cpp always cuts out of the text before SPM sees it (user-defined tokens).
        A token containing one of them, or an ASCII space (SPM sees ' ' as '▁'), never forms inside a
        fragment, so it is left out of the merges: Gemma's '\n\n' and '\t\t' runs share one score and
        would otherwise look like ties that depend on position.
        """
        token_id = {text: i for i, text in enumerate(texts)}  # a repeated text: the last id, as llama.cpp
        unk = metadata.get("tokenizer.ggml.unknown_token_id")
        byte_ids: list[int] = []
        for byte in range(256):  # llama.cpp's byte_to_token: <0xNN>, else the one-byte text
            tid = token_id.get(_byte_token_text(byte), token_id.get(chr(byte)) if byte < 0x80 else None)
            if tid is None:
                tid = unk if unk is not None and 0 <= unk < len(texts) else None
            if tid is None:
                raise ModelFormatError(
                    f"the SentencePiece vocabulary has no byte token {_byte_token_text(byte)} and no unknown "
                    "token, so text with an unknown character cannot be tokenized. Re-convert the model with "
                    "llama.cpp's convert_hf_to_gguf.py."
                )
            byte_ids.append(tid)
        multi = _reachable([t for t in token_id if len(t) > 1], cut_texts)
        chars = {c for t in multi for c in t} | {t for t in token_id if len(t) == 1}
        ranks: dict[bytes, int] = {}
        ids: list[list[int]] = []

        def add(data: bytes, targets: list[int]) -> None:
            if data not in ranks:
                ranks[data] = len(ids)
                ids.append(targets)

        for byte in range(256):  # tier 0
            one = token_id.get(chr(byte)) if byte < 0x80 else None
            add(bytes([byte]), [byte_ids[byte] if one is None else one])
        for char in sorted(chars):  # tier 1
            data = char.encode("utf-8")
            for end in range(2, len(data) + 1):
                part = data[:end]
                tid = token_id.get(char) if end == len(data) else None
                add(part, [tid] if tid is not None else [byte_ids[b] for b in part])
        order = sorted(multi, key=lambda t: (-float(scores[token_id[t]]), token_id[t]))
        for text in order:  # tier 2
            add(text.encode("utf-8"), [token_id[text]])
        split_at_space = not any(SPACE in t.lstrip(SPACE) for t in multi)
        merging = {c for t in multi for c in t}
        pattern = _pattern(merging, split_at_space)
        encoding = tiktoken.Encoding(
            name=f"gguf-spm-{len(texts)}", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
        )
        whole = _not_self_merging(multi, ranks, chars)
        lengths = np.array([len(t) for t in ids], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        flat = np.array([i for t in ids for i in t], dtype=np.int64)
        single = np.array([t[0] if len(t) == 1 else -1 for t in ids], dtype=np.int64)
        return cls(
            encoding=encoding,
            add_space_prefix=bool(metadata.get("tokenizer.ggml.add_space_prefix", True)),
            split_at_space=split_at_space,
            tie_conflicts=_tie_conflicts(multi, token_id, scores),
            _whole=whole,
            _whole_ranks=np.array(sorted(ranks[t.encode("utf-8")] for t in whole), dtype=np.int64),
            _merging_codes=np.array(sorted(ord(c) for c in merging), dtype=np.uint32),
            _rank_chars=_rank_chars(ranks),
            _single=single,
            _starts=starts,
            _lengths=lengths,
            _flat=flat,
        )

    def encode_fragment(self, text: str, space_prefix: bool) -> list[int]:
        """Token ids of one raw-text fragment, as llama.cpp's SPM branch tokenizes it."""
        if space_prefix and self.add_space_prefix:
            text = " " + text
        if not text:
            return []
        escaped = text.replace(" ", SPACE)
        ranks = np.asarray(self.encoding.encode_ordinary(escaped), dtype=np.int64)
        if self._whole and np.isin(ranks, self._whole_ranks).any():
            ranks = self._unshortcut(escaped, ranks)
        single = self._single[ranks]
        if (single >= 0).all():
            return single.tolist()
        lengths = self._lengths[ranks]
        ends = np.cumsum(lengths)
        index = np.arange(int(ends[-1])) - np.repeat(ends - lengths, lengths) + np.repeat(self._starts[ranks], lengths)
        return self._flat[index].tolist()

    def _unshortcut(self, escaped: str, ranks: np.ndarray) -> np.ndarray:
        """Undo tiktoken's whole-piece lookup where SPM would not make that token from the piece's characters.

        tiktoken returns a piece that is itself a token as that token without merging; llama.cpp only gets
        there by merges. Such a token in the output that spans a whole piece gets SPM's ranks for it
        (precomputed in `_whole`). A piece starts at the text's start, at or after a character that never
        merges, and (with `split_at_space`) at a '▁' run after another character; it ends likewise.
        """
        counts = self._rank_chars[ranks]
        starts = np.cumsum(counts) - counts
        codes = np.frombuffer(escaped.encode("utf-32-le"), dtype=np.uint32)
        merging = np.isin(codes, self._merging_codes)
        cut = np.ones(len(codes) + 1, dtype=bool)  # cut[i]: a piece boundary before escaped[i]
        cut[1:-1] = ~merging[:-1] | ~merging[1:]
        if self.split_at_space:
            space = codes == ord(SPACE)
            cut[1:-1] |= space[1:] & ~space[:-1]
        found = np.flatnonzero(np.isin(ranks, self._whole_ranks))
        found = found[cut[starts[found]] & cut[starts[found] + counts[found]]]
        if not len(found):
            return ranks
        parts, previous = [], 0
        ends = starts + counts
        for index, begin, end in zip(found.tolist(), starts[found].tolist(), ends[found].tolist(), strict=True):
            parts += [ranks[previous:index], np.asarray(self._whole[escaped[begin:end]], dtype=np.int64)]
            previous = index + 1
        return np.concatenate([*parts, ranks[previous:]])


def _reachable(multi: list[str], cut_texts: Collection[str]) -> list[str]:
    """The multi-character tokens a fragment of text can contain: no ASCII space, no text of cut_texts."""
    cuts = sorted({" ", *cut_texts}, key=len)
    if len(cuts) == 1:
        return [t for t in multi if " " not in t]
    unreachable = re.compile("|".join(re.escape(c) for c in cuts))
    return [t for t in multi if unreachable.search(t) is None]


def _not_self_merging(multi: Sequence[str], ranks: dict[bytes, int], chars: set[str]) -> dict[str, list[int]]:
    """Multi-character tokens whose own text SPM does not merge into them, with the ranks it gives instead.

    Each token is encoded as one piece followed by a character of no token (so tiktoken cannot take it whole);
    that character's bytes never merge with the token's. All pieces go through tiktoken in one call (a call
    per token costs ~1 s for Gemma 3's 240k tokens); each piece's ranks are found by their byte lengths.
    """
    if not multi:
        return {}
    sentinel = next(chr(c) for c in range(0xE000, 0x10FFFF) if chr(c) not in chars)
    pattern = f"[^{_escape(ord(sentinel))}]*{_escape(ord(sentinel))}"
    whole_text = tiktoken.Encoding(name="spm-whole", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    tail = len(whole_text.encode_ordinary(sentinel))
    got = np.asarray(whole_text.encode_ordinary(sentinel.join(multi) + sentinel), dtype=np.int64)
    lengths = np.fromiter((len(data) for data in ranks), dtype=np.int64, count=len(ranks))  # ranks: in rank order
    ends = np.cumsum([len(text.encode("utf-8")) + len(sentinel.encode("utf-8")) for text in multi])
    bounds = np.searchsorted(np.cumsum(lengths[got]), ends) + 1  # each piece's last rank, exclusive
    starts = np.concatenate([[0], bounds[:-1]])
    own = np.array([ranks[text.encode("utf-8")] for text in multi], dtype=np.int64)
    whole = (bounds - starts == tail + 1) & (got[np.minimum(starts, len(got) - 1)] == own)
    return {multi[k]: got[starts[k] : bounds[k] - tail].tolist() for k in np.flatnonzero(~whole).tolist()}


def _rank_chars(ranks: dict[bytes, int]) -> np.ndarray:
    """Per rank, how many UTF-8 lead bytes its bytes hold (ranks: a dict in rank order)."""
    flat = np.frombuffer(b"".join(ranks), dtype=np.uint8)
    lengths = np.fromiter((len(data) for data in ranks), dtype=np.int64, count=len(ranks))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.add.reduceat((flat & 0xC0 != 0x80).astype(np.int64), starts)


def _pattern(mergeable: set[str], split_at_space: bool) -> str:
    """The piece pattern: runs of characters that can merge, cut before '▁' runs if split_at_space.

    Every character matches some alternative (tiktoken silently drops unmatched text).
    """
    body = _char_class(mergeable - {SPACE})
    if SPACE not in mergeable:
        return f"[{body}]+|[^{body}]" if body else "(?s:.)"
    if not body:
        return f"{SPACE}+|[^{SPACE}]"
    if split_at_space:
        return f"{SPACE}*[{body}]+|{SPACE}+|[^{body}{SPACE}]"
    return f"[{body}{SPACE}]+|[^{body}{SPACE}]"


def _tie_conflicts(
    multi: Sequence[str], token_id: Mapping[str, int], scores: Sequence[float]
) -> tuple[tuple[int, int], ...]:
    """(left, right) ids of tied tokens whose merge order can depend on position, sorted.

    llama.cpp merges the leftmost of two equal-score candidates; tiktoken the lower rank (here: lower id).
    They can differ only when the right candidate X has a lower id than the left one Y and one merge can
    cancel the other: Y's proper suffix is X's proper prefix (they share a symbol), or a token W scoring at
    least as high contains one of them and reaches into the other (a proper suffix of Y + ... + X + ..., or
    ... + Y + ... + a proper prefix of X): merges growing from the first one may then take the other's symbol.
    The check is conservative (it does not ask whether the merges up to W exist).
    """
    score = {t: float(scores[token_id[t]]) for t in multi}
    counts: dict[float, int] = {}
    for text in multi:
        counts[score[text]] = counts.get(score[text], 0) + 1
    tied = [t for t in multi if counts[score[t]] > 1]
    first: dict[tuple[float, str], int] = {}  # (score, proper prefix) -> lowest id of a tied token with it
    last: dict[tuple[float, str], int] = {}  # (score, proper suffix) -> highest id of a tied token with it
    for text in tied:
        tid = token_id[text]
        for k in range(1, len(text)):
            key = (score[text], text[:k])
            first[key] = min(first.get(key, tid), tid)
            key = (score[text], text[k:])
            last[key] = max(last.get(key, tid), tid)
    found: set[tuple[int, int]] = set()
    for y in tied:  # shared symbol
        for k in range(1, len(y)):
            x_id = first.get((score[y], y[k:]))
            if x_id is not None and x_id < token_id[y]:
                found.add((token_id[y], x_id))
    tied_set = set(tied)
    lowest = min((score[t] for t in tied), default=float("inf"))
    for w in multi:  # a cascade of merges scoring at least as high that starts at one and takes a symbol of the other
        if score[w] < lowest:  # (no tied token scores at most w's: skips most of a large vocabulary)
            continue
        for i in range(len(w)):
            for j in range(i + 2, len(w) + 1):
                x = w[i:j]
                if x not in tied_set or score[x] > score[w]:
                    continue
                tid = token_id[x]
                for k in range(1, i + 1):  # w = (proper suffix of y) + ... + x + ...: x first lets w take y's symbol
                    y_id = last.get((score[x], w[:k]))
                    if y_id is not None and y_id > tid:
                        found.add((y_id, tid))
                for k in range(j, len(w)):  # w = ... + x + ... + (proper prefix of y), x on the left
                    y_id = first.get((score[x], w[k:]))
                    if y_id is not None and y_id < tid:
                        found.add((tid, y_id))
    return tuple(sorted(found))
