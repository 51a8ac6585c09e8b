"""GPT-2-style byte-level BPE vocabularies from GGUF metadata, as tiktoken tables (rank = token id).

tiktoken merges the pair whose merged token has the lowest rank; llama.cpp merges the pair listed first in
`tokenizer.ggml.merges`. With rank = id the two agree when ids grow with merge order, which `BpeVocab.read`
checks. Bytes the vocabulary has no token for get placeholder ranks past the vocabulary (llama.cpp drops them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jupyter_chatflow.errors import ModelFormatError

# GGUF token types (gguf.TokenType); 5 (unused) tokens are neither text llama.cpp's BPE makes nor special.
TYPE_NORMAL, TYPE_UNKNOWN, TYPE_CONTROL, TYPE_USER_DEFINED, TYPE_BYTE = 1, 2, 3, 4, 6


def gpt2_byte_chars() -> list[str]:
    """GPT-2's `bytes_to_unicode`: the printable character that stands for each byte, in byte order."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(others)) for b in range(256)]


_BYTE_OF_CHAR = {char: byte for byte, char in enumerate(gpt2_byte_chars())}


def _gpt2_bytes(text: str) -> bytes | None:
    """The bytes a vocabulary string in GPT-2 form stands for ('Ġthe' -> b' the'), or None if it is not."""
    try:
        return bytes(_BYTE_OF_CHAR[c] for c in text)
    except KeyError:
        return None


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
class BpeVocab:
    """The vocabulary read from GGUF metadata: bytes per id, tiktoken's tables, token classes."""

    pieces: tuple[bytes, ...]
    ranks: dict[bytes, int]
    specials: dict[str, int]
    types: tuple[int, ...]
    texts: tuple[str, ...]

    @classmethod
    def read(cls, metadata: Mapping[str, Any], ignore_merges: bool) -> BpeVocab:
        """Read tokens, types and merges; decide which tokens tiktoken may produce by merging."""
        texts = tuple(metadata["tokenizer.ggml.tokens"])
        types = tuple(metadata.get("tokenizer.ggml.token_type") or [TYPE_NORMAL] * len(texts))
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
            data = _gpt2_bytes(text) if kind in (TYPE_NORMAL, TYPE_BYTE) else None
            pieces.append(text.encode("utf-8") if data is None else data)
            if data is None:
                specials[text] = i  # control, user-defined, unknown, unused: their text as is
            elif len(data) == 1 or ignore_merges or text in merged:
                ranks[data] = i  # a token llama.cpp's BPE can reach
        for byte in range(256):
            ranks.setdefault(bytes([byte]), len(texts) + byte)  # placeholder: llama.cpp drops the byte
        return cls(tuple(pieces), ranks, specials, types, texts)
