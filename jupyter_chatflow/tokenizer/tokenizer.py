"""Tokenizer for GGUF byte-level BPE and SentencePiece vocabularies: a real `tiktoken.Encoding`, byte-exact
with llama.cpp.

It also renders the GGUF's chat template with jinja2 (as Hugging Face does) and detokenizes incrementally.

How it stays exact with llama.cpp (`llm_tokenizer_bpe` in `src/llama-vocab.cpp`):

- Words are cut by the pre-tokenizer named in `tokenizer.ggml.pre`, folded into one pattern
  (`jupyter_chatflow.tokenizer.pretokenize`).
- tiktoken merges the pair whose *merged token* has the lowest rank; llama.cpp merges the pair that comes
  first in `tokenizer.ggml.merges`. With rank = token id the two agree when ids grow with merge order, which
  `from_metadata` checks (ModelFormatError otherwise). tiktoken also takes a word that is itself a token
  whole: llama.cpp's llama3 family does the same, and for SmolLM2 every token's own bytes merge back to it.
- llama.cpp silently drops a byte whose single-byte token is missing from the vocabulary (SmolLM2 lacks 21 of
  them, e.g. 0x04 and the 0xF5-0xFF lead bytes). tiktoken would panic, so such bytes get placeholder ranks
  `vocab_size + byte` in the Encoding and `encode` drops them.
- Special tokens are cut out first, longest text first, like `tokenizer_st_partition`: control tokens only in
  template text (`encode_template`), user-defined ones everywhere (llama.cpp does that even for user text),
  with the token types amended by text as llama.cpp amends them at load time (`jupyter_chatflow.tokenizer.specials`:
  Gemma 3's user-defined `</s>` counts as control, Phi-3's special tokens eat the whitespace after them).

SentencePiece vocabularies (`tokenizer.ggml.model == "llama"`: Gemma 2/3, Phi-3, TinyLlama, Llama 2) follow
llama.cpp's `llm_tokenizer_spm` through a tiered tiktoken Encoding whose ranks are mapped to ids
(`jupyter_chatflow.tokenizer.spm`); each text fragment that is first or follows a special token gets a space prefix
(`tokenizer.ggml.add_space_prefix`, default true), ' ' becomes '▁', BOS is added by default, and tokens
decode with '▁' as ' ' and '<0xNN>' as that byte. `decode` keeps the prefix space (" Hello"), like the
token-by-token pieces of `StreamDecoder`.

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

from jupyter_chatflow.errors import GenerationError, ModelFormatError

from .bpe import TYPE_NORMAL, BpeVocab
from .chat_template import CHATML_TEMPLATE, chat_template_of, compile_template
from .pretokenize import pre_tokenizer
from .specials import EOG_TEXTS, SpecialTokens, special_tokens
from .spm import SpmCodec, spm_piece_bytes

__all__ = ["CHATML_TEMPLATE", "StreamDecoder", "Tokenizer"]

# GGUF token types (gguf.TokenType); 5 (unused) tokens are neither text llama.cpp's BPE makes nor special.

_C_SPACES = " \t\n\v\f\r"  # C isspace: what llama.cpp strips next to an RSTRIP token


def clean_text(text: str) -> str:
    """Make any str encodable: surrogate pairs are joined, lone surrogates become U+FFFD (as in tiktoken)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _partition(text: str, specials: Sequence[tuple[str, int]], rstrip: frozenset[int] = frozenset()) -> list[str | int]:
    """Cut special tokens out of text, longest text first, as llama.cpp's `tokenizer_st_partition` does."""
    parts: list[str | int] = [text] if text else []
    for token_text, token_id in specials:
        if not any(isinstance(p, str) and token_text in p for p in parts):
            continue
        cut: list[str | int] = []
        for part in parts:
            if isinstance(part, int) or token_text not in part:
                cut.append(part)
            elif token_id in rstrip:
                cut += _cut_stripping(part, token_text, token_id)
            else:
                for k, piece in enumerate(part.split(token_text)):
                    if k:
                        cut.append(token_id)
                    if piece:
                        cut.append(piece)
        parts = cut
    return parts


def _cut_stripping(text: str, token_text: str, token_id: int) -> list[str | int]:
    """Cut an RSTRIP token out of text: the whitespace after each occurrence goes, and the search goes on after
    it (so a later occurrence inside that whitespace goes too, as in llama.cpp)."""
    cut: list[str | int] = []
    position = 0
    while (found := text.find(token_text, position)) >= 0:
        if found > position:
            cut.append(text[position:found])
        cut.append(token_id)
        position = found + len(token_text)
        while position < len(text) and text[position] in _C_SPACES:
            position += 1
    if position < len(text):
        cut.append(text[position:])
    return cut


def _readable(data: bytes) -> str:
    """Bytes as text, with each byte that is not valid UTF-8 shown as <0xXX>."""
    text = data.decode("utf-8", "surrogateescape")
    return re.sub("[\udc80-\udcff]", lambda m: f"<0x{ord(m[0]) - 0xDC00:02X}>", text)


@dataclass(frozen=True, eq=False)
class Tokenizer:
    """A GGUF model's tokenizer: encode/decode byte-exact with llama.cpp, render and tokenize chat prompts.

    Build it with `Tokenizer.from_metadata(metadata)`; `encoding` is the real `tiktoken.Encoding` (BPE: its
    `encode_ordinary` may return placeholder ids >= vocab_size for bytes the vocabulary lacks; `encode`
    drops them, as llama.cpp does. SentencePiece: its ranks are not token ids; use `encode`).
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
    """The jinja2 chat template: the GGUF's, or its family's turn format when it has none (`template_origin`)."""
    template_origin: str
    """Where `chat_template` comes from, in words (`chat_template.chat_template_of`)."""
    _pieces: tuple[bytes, ...] = field(repr=False)
    _texts: tuple[str, ...] = field(repr=False)
    _specials: SpecialTokens = field(repr=False)
    _control_texts: tuple[str, ...] = field(repr=False)
    _template: jinja2.Template = field(repr=False)
    _spm: SpmCodec | None = field(default=None, repr=False)

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> Tokenizer:
        """Build the tokenizer from a GGUF's metadata ({key: field.contents()} from gguf.GGUFReader).

        Raises ModelFormatError for vocabularies this module cannot reproduce exactly.
        """
        model = metadata.get("tokenizer.ggml.model")
        if model == "llama":
            return cls._from_spm(metadata)
        if model != "gpt2":
            raise ModelFormatError(
                f"tokenizer.ggml.model is {model!r}; only GPT-2-style byte-level BPE ('gpt2') and SentencePiece "
                "('llama') vocabularies are supported. Use a model with one of these, such as SmolLM2 or TinyLlama."
            )
        pre = pre_tokenizer(metadata.get("tokenizer.ggml.pre"))
        vocab = BpeVocab.read(metadata, pre.ignore_merges)
        encoding = tiktoken.Encoding(
            name=f"gguf-{pre.kind}-{len(vocab.texts)}",
            pat_str=pre.pattern,
            mergeable_ranks=vocab.ranks,
            special_tokens=vocab.specials,
        )
        specials = special_tokens(vocab.texts, vocab.types, metadata)
        return cls._assemble(metadata, encoding, vocab.texts, specials, vocab.pieces, pre.add_bos_default, None)

    @classmethod
    def _from_spm(cls, metadata: Mapping[str, Any]) -> Tokenizer:
        """A SentencePiece vocabulary: tiered tiktoken ranks mapped to ids (`jupyter_chatflow.tokenizer.spm`)."""
        texts = tuple(metadata["tokenizer.ggml.tokens"])
        types = tuple(metadata.get("tokenizer.ggml.token_type") or [TYPE_NORMAL] * len(texts))
        scores = metadata.get("tokenizer.ggml.scores")
        if scores is None:  # llama.cpp reads 0.0 for all: every merge would be a tie, broken by position
            raise ModelFormatError(
                "the GGUF's SentencePiece ('llama') vocabulary has no tokenizer.ggml.scores, so every merge would "
                "be a tie (broken by position, which tiktoken cannot reproduce). Re-convert the model with "
                "llama.cpp's convert_hf_to_gguf.py, which writes the scores."
            )
        if not len(types) == len(scores) == len(texts):
            raise ModelFormatError(
                f"the GGUF has {len(texts)} tokens but {len(types)} token types and {len(scores)} scores: the "
                "file is damaged. Download or convert it again."
            )
        specials = special_tokens(texts, types, metadata)
        codec = SpmCodec.build(texts, scores, metadata, cut_texts=[text for text, _ in specials.always])
        if codec.tie_conflicts:
            left, right = codec.tie_conflicts[0]
            raise ModelFormatError(
                f"the SentencePiece vocabulary has {len(codec.tie_conflicts)} pairs of tokens with equal scores "
                f"whose merge order llama.cpp decides by position (e.g. {texts[left]!r} and {texts[right]!r}), "
                "which a tiktoken Encoding cannot reproduce. Use a GGUF of another model."
            )
        pieces = []
        for text, kind in zip(texts, types, strict=True):
            data = spm_piece_bytes(text, kind)
            pieces.append(text.encode("utf-8") if data is None else data)
        defaults = {"tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2}  # llama.cpp's for SPM
        metadata = {**defaults, **{k: v for k, v in metadata.items() if v is not None}}
        return cls._assemble(metadata, codec.encoding, texts, specials, tuple(pieces), True, codec)

    @classmethod
    def _assemble(
        cls,
        metadata: Mapping[str, Any],
        encoding: tiktoken.Encoding,
        texts: tuple[str, ...],
        specials: SpecialTokens,
        pieces: tuple[bytes, ...],
        add_bos_default: bool,
        spm: SpmCodec | None,
    ) -> Tokenizer:
        """The parts both vocabulary kinds share: special ids, stop ids, BOS, the chat template."""
        n = len(texts)
        bos, eos = metadata.get("tokenizer.ggml.bos_token_id"), metadata.get("tokenizer.ggml.eos_token_id")
        if eos is None or not 0 <= eos < n:
            raise ModelFormatError(
                f"the GGUF's tokenizer.ggml.eos_token_id is {eos!r}, not a token of its {n}, so generation "
                "could not stop. Re-convert it with llama.cpp's convert_hf_to_gguf.py."
            )
        if bos is not None and not 0 <= bos < n:
            bos = None
        chat_end = {i for i, text in enumerate(texts) if text in EOG_TEXTS}
        for key in ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
            if metadata.get(key) is not None:
                chat_end.add(int(metadata[key]))
        always = set(specials.always)
        source, origin = chat_template_of(metadata.get("tokenizer.chat_template"), {t for t, _ in specials.template})
        add_bos = metadata.get("tokenizer.ggml.add_bos_token")
        return cls(
            encoding=encoding,
            vocab_size=n,
            bos_id=None if bos is None else int(bos),
            eos_id=int(eos),
            stop_ids=frozenset({int(eos), *chat_end}),
            special_ids=frozenset(i for _, i in specials.template),
            add_bos=bool(add_bos_default if add_bos is None else add_bos),
            chat_template=source,
            template_origin=origin,
            _pieces=pieces,
            _texts=texts,
            _specials=specials,
            _control_texts=tuple(text for text, i in specials.template if (text, i) not in always),
            _template=compile_template(source),
            _spm=spm,
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of user text: control-token text such as '<|im_start|>' stays ordinary text.

        User-defined tokens (GGUF token type 4, as llama.cpp amends the types) are still matched, as llama.cpp
        and Hugging Face do.
        """
        return self._encode_parts(_partition(clean_text(text), self._specials.always, self._specials.rstrip))

    def encode_template(self, text: str) -> list[int]:
        """Token ids of template text: special-token text such as '<|im_start|>' becomes that token."""
        return self._encode_parts(_partition(clean_text(text), self._specials.template, self._specials.rstrip))

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
        text = clean_text(self.render_chat_template(escaped, add_generation_prompt))
        restore = re.compile(f"{marker}(\\d+){marker}")
        parts = [
            p if isinstance(p, int) else restore.sub(lambda m: originals[int(m[1])], p)
            for p in _partition(text, self._specials.template, self._specials.rstrip)
        ]
        ids = self._encode_parts(parts)
        if self.add_bos and self.bos_id is not None and ids[:1] != [self.bos_id]:
            ids.insert(0, self.bos_id)
        return ids

    def _encode_parts(self, parts: Sequence[str | int]) -> list[int]:
        """Encode the text parts, keep the special-token ids; BPE: drop placeholder ids."""
        ids: list[int] = []
        if self._spm is not None:  # llama.cpp: a space prefix for text that is first or follows a special token
            previous_special = True
            for part in parts:
                if isinstance(part, int):
                    ids.append(part)
                else:
                    ids.extend(self._spm.encode_fragment(part, space_prefix=previous_special))
                previous_special = isinstance(part, int)
            return ids
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
        seen = [self.chat_template, *(t for t, _ in self._specials.template)]
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
