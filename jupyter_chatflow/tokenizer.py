"""Tokenizer for GGUF byte-level BPE vocabularies: a real `tiktoken.Encoding`, byte-exact with llama.cpp.

It also renders the GGUF's chat template with jinja2 (as Hugging Face does) and detokenizes incrementally.

How it stays exact with llama.cpp (`llm_tokenizer_bpe` in `src/llama-vocab.cpp`):

- Words are cut by the pre-tokenizer named in `tokenizer.ggml.pre`, folded into one pattern
  (`jupyter_chatflow.pretokenize`).
- tiktoken merges the pair whose *merged token* has the lowest rank; llama.cpp merges the pair that comes
  first in `tokenizer.ggml.merges`. With rank = token id the two agree when ids grow with merge order, which
  `from_metadata` checks (ModelFormatError otherwise). tiktoken also takes a word that is itself a token
  whole: llama.cpp's llama3 family does the same, and for SmolLM2 every token's own bytes merge back to it.
- llama.cpp silently drops a byte whose single-byte token is missing from the vocabulary (SmolLM2 lacks 21 of
  them, e.g. 0x04 and the 0xF5-0xFF lead bytes). tiktoken would panic, so such bytes get placeholder ranks
  `vocab_size + byte` in the Encoding and `encode` drops them.
- Special tokens are cut out first, longest text first, like `tokenizer_st_partition`: control tokens only in
  template text (`encode_template`), user-defined ones everywhere (llama.cpp does that even for user text).

Example:
    >>> tok = Tokenizer.from_metadata(metadata)            # metadata: {key: field.contents()} of a GGUF
    >>> tok.decode(tok.encode("Hello world"))
    'Hello world'
    >>> tok.apply_chat_template([{"role": "user", "content": "Hi"}])[:3]   # SmolLM2: <|im_start|> system \n
    [1, 9690, 198]
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2
import tiktoken

from jupyter_chatflow.chat_template import CHATML_TEMPLATE, compile_template
from jupyter_chatflow.errors import GenerationError, ModelFormatError
from jupyter_chatflow.pretokenize import pre_tokenizer

__all__ = ["CHATML_TEMPLATE", "StreamDecoder", "Tokenizer"]

# GGUF token types (gguf.TokenType); 5 (unused) tokens are neither text llama.cpp's BPE makes nor special.
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _BYTE = 1, 2, 3, 4, 6

# Token texts that end a chat turn (llama.cpp's end-of-generation list, less the fill-in-the-middle ones).
_CHAT_END_TEXTS = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|end|>",
    "<end_of_turn>",
    "<EOT>",
    "<end_of_utterance>",
)


def _gpt2_byte_decoder() -> dict[str, int]:
    """GPT-2's `bytes_to_unicode`, inverted: the printable character that stands for each byte."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    mapping = {chr(b): b for b in printable}
    mapping.update({chr(256 + n): b for n, b in enumerate(others)})
    return mapping


_BYTE_OF_CHAR = _gpt2_byte_decoder()


def _gpt2_bytes(text: str) -> bytes | None:
    """The bytes a vocabulary string in GPT-2 form stands for ('Ġthe' -> b' the'), or None if it is not."""
    try:
        return bytes(_BYTE_OF_CHAR[c] for c in text)
    except KeyError:
        return None


def _clean(text: str) -> str:
    """Make any str encodable: surrogate pairs are joined, lone surrogates become U+FFFD (as in tiktoken)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _partition(text: str, specials: Sequence[tuple[str, int]]) -> list[str | int]:
    """Cut special tokens out of text, longest text first, as llama.cpp's `tokenizer_st_partition` does."""
    parts: list[str | int] = [text] if text else []
    for token_text, token_id in specials:
        if not any(isinstance(p, str) and token_text in p for p in parts):
            continue
        cut: list[str | int] = []
        for part in parts:
            if isinstance(part, int) or token_text not in part:
                cut.append(part)
                continue
            for k, piece in enumerate(part.split(token_text)):
                if k:
                    cut.append(token_id)
                if piece:
                    cut.append(piece)
        parts = cut
    return parts


def _readable(data: bytes) -> str:
    """Bytes as text, with each byte that is not valid UTF-8 shown as <0xXX>."""
    text = data.decode("utf-8", "surrogateescape")
    return re.sub("[\udc80-\udcff]", lambda m: f"<0x{ord(m[0]) - 0xDC00:02X}>", text)


def _check_merge_order(merges: Sequence[str], token_id: Mapping[str, int]) -> set[str]:
    """Check that token ids grow with merge order (so tiktoken's priority is llama.cpp's); return the merged.

    Raises ModelFormatError when a merge makes a string that is not a token, or when ids and merge order
    disagree: then no tiktoken Encoding with rank = id can reproduce llama.cpp.
    """
    merged: set[str] = set()
    last = -1
    for index, merge in enumerate(merges):
        split = merge.find(" ", 1)  # llama.cpp splits at the first space after the first character
        result = merge[:split] + merge[split + 1 :] if split > 0 else merge
        tid = token_id.get(result)
        if tid is None:
            raise ModelFormatError(
                f"merge #{index} {merge!r} makes {result!r}, which is not in the vocabulary: the GGUF's "
                "tokenizer is inconsistent. Re-convert the model with llama.cpp's convert_hf_to_gguf.py."
            )
        if result in merged:
            continue  # a second merge to the same token: tiktoken ranks it with the first
        if tid <= last:
            raise ModelFormatError(
                f"token ids do not follow merge order (merge #{index} {merge!r} makes id {tid} after id "
                f"{last}), so this vocabulary cannot be a tiktoken Encoding that matches llama.cpp. "
                "Use a GGUF of another model."
            )
        merged.add(result)
        last = tid
    return merged


@dataclass(frozen=True, eq=False)
class _Vocab:
    """The vocabulary read from GGUF metadata: bytes per id, tiktoken's tables, token classes."""

    pieces: tuple[bytes, ...]
    ranks: dict[bytes, int]
    specials: dict[str, int]
    types: tuple[int, ...]
    texts: tuple[str, ...]

    @classmethod
    def read(cls, metadata: Mapping[str, Any], ignore_merges: bool) -> _Vocab:
        """Read tokens, types and merges; decide which tokens tiktoken may produce by merging."""
        texts = tuple(metadata["tokenizer.ggml.tokens"])
        types = tuple(metadata.get("tokenizer.ggml.token_type") or [_NORMAL] * len(texts))
        if len(types) != len(texts):
            raise ModelFormatError(
                f"the GGUF has {len(texts)} tokens but {len(types)} token types: the file is damaged. "
                "Download or convert it again."
            )
        token_id = {text: i for i, text in enumerate(texts)}  # a repeated text: the last id, as llama.cpp
        merges = metadata.get("tokenizer.ggml.merges")
        if merges is None:
            raise ModelFormatError(
                "the GGUF has a BPE vocabulary but no tokenizer.ggml.merges. Re-convert it with llama.cpp's "
                "convert_hf_to_gguf.py."
            )
        merged = _check_merge_order(merges, token_id)
        pieces: list[bytes] = []
        ranks: dict[bytes, int] = {}
        specials: dict[str, int] = {}
        for i, (text, kind) in enumerate(zip(texts, types, strict=True)):
            data = _gpt2_bytes(text) if kind in (_NORMAL, _BYTE) else None
            pieces.append(text.encode("utf-8") if data is None else data)
            if data is None:
                specials[text] = i  # control, user-defined, unknown, unused: their text as is
            elif len(data) == 1 or ignore_merges or text in merged:
                ranks[data] = i  # a token llama.cpp's BPE can reach
        for byte in range(256):
            ranks.setdefault(bytes([byte]), len(texts) + byte)  # placeholder: llama.cpp drops the byte
        return cls(tuple(pieces), ranks, specials, types, texts)


@dataclass(frozen=True, eq=False)
class Tokenizer:
    """A GGUF model's tokenizer: encode/decode byte-exact with llama.cpp, render and tokenize chat prompts.

    Build it with `Tokenizer.from_metadata(metadata)`; `encoding` is the real `tiktoken.Encoding` (its
    `encode_ordinary` may return placeholder ids >= vocab_size for bytes the vocabulary lacks; `encode`
    drops them, as llama.cpp does).
    """

    encoding: tiktoken.Encoding
    vocab_size: int
    bos_id: int | None
    eos_id: int
    stop_ids: frozenset[int]
    """End-of-turn ids: eos plus chat-end control tokens (<|im_end|>, <|eot_id|>, <|endoftext|>, ...)."""
    special_ids: frozenset[int]
    """Control, user-defined and unknown tokens: the ones that are not pieces of text."""
    add_bos: bool
    """Whether llama.cpp puts BOS before a prompt (`tokenizer.ggml.add_bos_token`)."""
    chat_template: str
    """The jinja2 chat template: the GGUF's, or CHATML_TEMPLATE when it has none."""
    _pieces: tuple[bytes, ...] = field(repr=False)
    _texts: tuple[str, ...] = field(repr=False)
    _user_specials: tuple[tuple[str, int], ...] = field(repr=False)
    _template_specials: tuple[tuple[str, int], ...] = field(repr=False)
    _control_texts: tuple[str, ...] = field(repr=False)
    _template: jinja2.Template = field(repr=False)

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> Tokenizer:
        """Build the tokenizer from a GGUF's metadata ({key: field.contents()} from gguf.GGUFReader).

        Raises ModelFormatError for vocabularies this module cannot reproduce exactly.
        """
        model = metadata.get("tokenizer.ggml.model")
        if model != "gpt2":
            follow_up = (
                " SentencePiece ('llama') vocabularies such as TinyLlama's are a planned follow-up."
                if model == "llama"
                else ""
            )
            raise ModelFormatError(
                f"tokenizer.ggml.model is {model!r}; only GPT-2-style byte-level BPE ('gpt2') is supported."
                f"{follow_up} Use a model with a 'gpt2' vocabulary, such as SmolLM2."
            )
        pre = pre_tokenizer(metadata.get("tokenizer.ggml.pre"))
        vocab = _Vocab.read(metadata, pre.ignore_merges)
        n = len(vocab.texts)
        encoding = tiktoken.Encoding(
            name=f"gguf-{pre.kind}-{n}",
            pat_str=pre.pattern,
            mergeable_ranks=vocab.ranks,
            special_tokens=vocab.specials,
        )
        bos, eos = metadata.get("tokenizer.ggml.bos_token_id"), metadata.get("tokenizer.ggml.eos_token_id")
        if eos is None or not 0 <= eos < n:
            raise ModelFormatError(
                f"the GGUF's tokenizer.ggml.eos_token_id is {eos!r}, not a token of its {n}, so generation "
                "could not stop. Re-convert it with llama.cpp's convert_hf_to_gguf.py."
            )
        if bos is not None and not 0 <= bos < n:
            bos = None
        kinds = {_CONTROL, _UNKNOWN, _USER_DEFINED}
        special = frozenset(i for i, kind in enumerate(vocab.types) if kind in kinds)
        chat_end = {i for i, text in enumerate(vocab.texts) if text in _CHAT_END_TEXTS}
        for key in ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
            if metadata.get(key) is not None:
                chat_end.add(int(metadata[key]))
        by_length = sorted(special, key=lambda i: (-len(vocab.pieces[i]), i))
        source = metadata.get("tokenizer.chat_template") or CHATML_TEMPLATE
        return cls(
            encoding=encoding,
            vocab_size=n,
            bos_id=None if bos is None else int(bos),
            eos_id=int(eos),
            stop_ids=frozenset({int(eos), *chat_end}),
            special_ids=special,
            add_bos=bool(metadata.get("tokenizer.ggml.add_bos_token", pre.add_bos_default)),
            chat_template=source,
            _pieces=vocab.pieces,
            _texts=vocab.texts,
            _user_specials=tuple((vocab.texts[i], i) for i in by_length if vocab.types[i] == _USER_DEFINED),
            _template_specials=tuple((vocab.texts[i], i) for i in by_length),
            _control_texts=tuple(vocab.texts[i] for i in by_length if vocab.types[i] != _USER_DEFINED),
            _template=compile_template(source),
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of user text: control-token text such as '<|im_start|>' stays ordinary text.

        User-defined tokens (GGUF token type 4) are still matched, as llama.cpp and Hugging Face do.
        """
        return self._encode_parts(_partition(_clean(text), self._user_specials))

    def encode_template(self, text: str) -> list[int]:
        """Token ids of template text: special-token text such as '<|im_start|>' becomes that token."""
        return self._encode_parts(_partition(_clean(text), self._template_specials))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids; bytes that are not valid UTF-8 become U+FFFD."""
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", "replace")

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes one token stands for (a control token: its text)."""
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(f"token id {token_id} is outside the vocabulary (0..{self.vocab_size - 1})")
        return self._pieces[token_id]

    def piece(self, token_id: int) -> str:
        """Readable text of one token: control tokens as their text, stray UTF-8 bytes as <0xXX>."""
        return _readable(self.token_bytes(token_id))

    def render_chat_template(self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True) -> str:
        """The prompt text the chat template makes of these messages."""
        bos = "" if self.bos_id is None else self._texts[self.bos_id]
        return self._template.render(
            messages=[dict(m) for m in messages],
            add_generation_prompt=add_generation_prompt,
            bos_token=bos,
            eos_token=self._texts[self.eos_id],
        )

    def apply_chat_template(
        self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True
    ) -> list[int]:
        """Token ids of the rendered prompt, as llama.cpp tokenizes it, with message text kept as user text.

        Control-token text inside a message (say '<|im_start|>' typed by a user) is swapped for a private
        marker before rendering and swapped back after the template's special tokens are cut out, so it is
        BPE-encoded as ordinary text together with the template text around it. A message without such text
        gives exactly llama.cpp's tokens for `render_chat_template(messages)` with special tokens parsed.
        """
        marker = self._free_marker(messages)
        originals: list[str] = []
        escaped = [{k: self._escape(v, marker, originals) for k, v in m.items()} for m in messages]
        text = _clean(self.render_chat_template(escaped, add_generation_prompt))
        restore = re.compile(f"{marker}(\\d+){marker}")
        parts = [
            p if isinstance(p, int) else restore.sub(lambda m: originals[int(m[1])], p)
            for p in _partition(text, self._template_specials)
        ]
        ids = self._encode_parts(parts)
        if self.add_bos and self.bos_id is not None and ids[:1] != [self.bos_id]:
            ids.insert(0, self.bos_id)
        return ids

    def _encode_parts(self, parts: Sequence[str | int]) -> list[int]:
        """BPE-encode the text parts, keep the special-token ids, drop placeholder ids."""
        ids: list[int] = []
        for part in parts:
            if isinstance(part, int):
                ids.append(part)
            else:
                ids.extend(self.encoding.encode_ordinary(part))
        if self.encoding.max_token_value >= self.vocab_size:
            ids = [i for i in ids if i < self.vocab_size]
        return ids

    def _escape(self, value: Any, marker: str, originals: list[str]) -> Any:
        """Replace control-token text in a message field with numbered markers (originals keeps the text)."""
        if not isinstance(value, str):
            return value
        texts = [t for t in self._control_texts if t in value]
        if not texts:
            return value
        pattern = "|".join(re.escape(t) for t in texts)  # longest first, as sorted

        def swap(match: re.Match[str]) -> str:
            originals.append(match[0])
            return f"{marker}{len(originals) - 1}{marker}"

        return re.sub(pattern, swap, value)

    def _free_marker(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """A private-use character that occurs in no message, template or special token."""
        seen = [self.chat_template, *(t for t, _ in self._template_specials)]
        seen += [v for m in messages for v in m.values() if isinstance(v, str)]
        for code in range(0xE000, 0xF900):
            if not any(chr(code) in s for s in seen):
                return chr(code)
        raise GenerationError("the messages use every private-use character; remove some of them.")


class StreamDecoder:
    """Incremental detokenizer: text of each new token, never half a UTF-8 character.

    >>> stream = StreamDecoder(tokenizer)
    >>> "".join(stream.push(i) for i in ids) + stream.flush() == tokenizer.decode(ids)
    True
    """

    def __init__(self, tokenizer: Tokenizer):
        self._tokenizer = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        """The text completed by this token; bytes of an unfinished character wait for the next tokens."""
        return self._utf8.decode(self._tokenizer.token_bytes(token_id))

    def flush(self) -> str:
        """Whatever is left (an unfinished character becomes U+FFFD); the decoder starts afresh."""
        text = self._utf8.decode(b"", final=True)
        self._utf8.reset()
        return text
