"""Which tokens llama.cpp cuts out of text before BPE or SentencePiece, as it decides at load time.

The GGUF's `tokenizer.ggml.token_type` is only the start. `llama_vocab::impl::load` (`src/llama-vocab.cpp`)
then changes token attributes by their text, and `tokenizer_st_partition` cuts by those attributes:

- CONTROL and UNKNOWN tokens are cut only when special text is parsed (template text); USER_DEFINED tokens
  are cut always, from user text too.
- Tokens that look like control tokens get CONTROL added: the end-of-generation texts (`<|im_end|>`,
  `<end_of_turn>`, `</s>`, ...) and the fill-in-the-middle ones (`<|fim_prefix|>`, ...) unless the GGUF names
  those ids. So Gemma 3's user-defined `</s>` and Qwen 2.5's user-defined `<|fim_prefix|>` stay ordinary
  text in user text, as llama.cpp tokenizes them.
- gpt-oss's `<|channel|>`, `<|message|>`, `<|start|>` and `<|constrain|>` become USER_DEFINED (cut always).
- For a model whose `general.name` contains "phi-3" or "phi3", whitespace right after most special tokens is
  dropped (RSTRIP), as Phi-3's Hugging Face tokenizer does.

Texts are cut longest first (llama.cpp sorts the special tokens by text length; its sort is not stable, so
the order of two tokens of equal length is llama.cpp's accident; here it is the lower id first. The two
orders differ only where two equal-length special texts overlap in the text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["EOG_TEXTS", "SpecialTokens", "special_tokens"]

# gguf.TokenType values
_UNKNOWN, _CONTROL, _USER_DEFINED = 2, 3, 4

# llama.cpp's end-of-generation texts: each gets the CONTROL attribute, and a generation ends at it.
EOG_TEXTS = frozenset(
    {
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<|return|>",
        "<|call|>",
        "<|flush|>",
        "<|calls|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "</s>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "[EOT]",
        "[EOS]",
        "<|end_of_text|>",
        "<end_of_utterance>",
        "<eos>",
        "<turn|>",
        "<|tool_response>",
        "<\uff5cend\u2581of\u2581sentence\uff5c>",
        "[e~[",
    }
)

# Fill-in-the-middle texts by the metadata key that, when present, stops llama.cpp from looking for them.
_FIM_TEXTS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("fim_pre", "prefix"): (
        "<|fim_prefix|>",
        "<fim-prefix>",
        "<fim_prefix>",
        "<\uff5cfim\u2581begin\uff5c>",
        "<PRE>",
        "\u2581<PRE>",
        "<|code_prefix|>",
        "<|prefix|>",
    ),
    ("fim_suf", "suffix"): (
        "<|fim_suffix|>",
        "<fim-suffix>",
        "<fim_suffix>",
        "<\uff5cfim\u2581hole\uff5c>",
        "<SUF>",
        "\u2581<SUF>",
        "<|code_suffix|>",
        "<|suffix|>",
    ),
    ("fim_mid", "middle"): (
        "<|fim_middle|>",
        "<fim-middle>",
        "<fim_middle>",
        "<\uff5cfim\u2581end\uff5c>",
        "<MID>",
        "\u2581<MID>",
        "<|code_middle|>",
        "<|middle|>",
    ),
    ("fim_pad",): ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    ("fim_rep",): ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    ("fim_sep",): ("<|file_sep|>",),
}

_GPT_OSS_USER_DEFINED = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")
_PHI3_NOT_RSTRIP = ("<unk>", "<s>", "<|endoftext|>")


@dataclass(frozen=True)
class SpecialTokens:
    """The tokens llama.cpp cuts out of text, as (text, id) pairs, longest text first."""

    always: tuple[tuple[str, int], ...]
    """Cut from any text: USER_DEFINED tokens that are neither CONTROL nor UNKNOWN."""
    template: tuple[tuple[str, int], ...]
    """Cut when special text is parsed: every CONTROL, USER_DEFINED or UNKNOWN token."""
    rstrip: frozenset[int]
    """Tokens after which llama.cpp drops the whitespace that follows (Phi-3's special tokens)."""


def _attributes(texts: Sequence[str], types: Sequence[int], metadata: Mapping[str, Any]) -> dict[int, set[int]]:
    """Per token id, the set of llama.cpp's partition-relevant types: CONTROL, USER_DEFINED, UNKNOWN."""
    attrs = {i: {kind} for i, kind in enumerate(types) if kind in (_UNKNOWN, _CONTROL, _USER_DEFINED)}
    token_id = {text: i for i, text in enumerate(texts)}  # a repeated text: the last id, as llama.cpp

    def add_control(text: str) -> None:
        if text in token_id:
            attrs.setdefault(token_id[text], set()).add(_CONTROL)

    for keys, candidates in _FIM_TEXTS.items():
        if not any(metadata.get(f"tokenizer.ggml.{key}_token_id") is not None for key in keys):
            for text in candidates:  # llama.cpp takes the first it meets; a vocabulary has one of them
                add_control(text)
    for text in EOG_TEXTS:
        add_control(text)
    for text in _GPT_OSS_USER_DEFINED:
        if text in token_id:
            attrs[token_id[text]] = {_USER_DEFINED}
    has = set(token_id).__contains__
    calls = has("<|call|>") or has("<|calls|>")
    if has("<|end|>") and calls and (has("<|return|>") or has("<|flush|>")):  # o200k_harmony, solar-open
        attrs[token_id["<|end|>"]] = {_USER_DEFINED}
    if has("</s>") and (has("<|tool_response>") or has("<|plamo:eos|>")):  # gemma4, plamo: a normal </s>
        attrs.pop(token_id["</s>"], None)
    return attrs


def special_tokens(texts: Sequence[str], types: Sequence[int], metadata: Mapping[str, Any]) -> SpecialTokens:
    """Classify the tokens as llama.cpp does for this GGUF (see the module doc)."""
    attrs = _attributes(texts, types, metadata)
    by_length = sorted(attrs, key=lambda i: (-len(texts[i].encode("utf-8")), i))
    always = tuple((texts[i], i) for i in by_length if attrs[i] == {_USER_DEFINED})
    rstrip: set[int] = set()
    name = str(metadata.get("general.name") or "").lower()
    if "phi-3" in name or "phi3" in name:
        token_id = {text: i for i, text in enumerate(texts)}
        rstrip = set(attrs) | ({token_id["</s>"]} if "</s>" in token_id else set())
        rstrip -= {token_id[t] for t in _PHI3_NOT_RSTRIP if t in token_id}
    return SpecialTokens(always, tuple((texts[i], i) for i in by_length), frozenset(rstrip))
