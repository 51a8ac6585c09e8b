"""Which tokens are cut out of text before BPE/SPM: the GGUF's token types as llama.cpp amends them at load time."""

from __future__ import annotations

from jupyter_chatflow.tokenizer.specials import special_tokens
from jupyter_chatflow.tokenizer.tokenizer import _partition

NORMAL, CONTROL, USER_DEFINED = 1, 3, 4

_TOKENS = [
    ("<pad>", CONTROL),
    ("</s>", USER_DEFINED),  # Gemma 3: user-defined, but an end-of-generation text, so llama.cpp adds CONTROL
    ("<|fim_prefix|>", USER_DEFINED),  # Qwen 2.5: user-defined; llama.cpp finds it by text and adds CONTROL
    ("<tool_call>", USER_DEFINED),
    ("<|channel|>", CONTROL),  # gpt-oss: always rendered, so llama.cpp makes it USER_DEFINED
    ("a", NORMAL),
    ("<|eot_id|>", NORMAL),  # a normal token with an end-of-generation text: CONTROL too
    ("<unk>", 2),
    ("<s>", CONTROL),
    ("<|endoftext|>", CONTROL),
]
TEXTS = [text for text, _ in _TOKENS]
TYPES = [kind for _, kind in _TOKENS]


def _names(pairs) -> set[str]:
    return {text for text, _ in pairs}


def test_user_text_cuts_only_plain_user_defined_tokens() -> None:
    specials = special_tokens(TEXTS, TYPES, {})
    assert _names(specials.always) == {"<tool_call>", "<|channel|>"}
    assert _names(specials.template) == set(TEXTS) - {"a"}
    assert [len(text) for text, _ in specials.template] == sorted((len(t) for t in TEXTS if t != "a"), reverse=True)
    assert specials.rstrip == frozenset()


def test_fim_token_named_in_the_metadata_keeps_its_type() -> None:
    specials = special_tokens(TEXTS, TYPES, {"tokenizer.ggml.fim_pre_token_id": 2})
    assert _names(specials.always) == {"<tool_call>", "<|channel|>", "<|fim_prefix|>"}


def test_harmony_end_is_user_defined_and_gemma4_end_of_s_is_normal() -> None:
    harmony = [*TEXTS, "<|end|>", "<|return|>", "<|call|>"]
    specials = special_tokens(harmony, [*TYPES, CONTROL, CONTROL, CONTROL], {})
    assert "<|end|>" in _names(specials.always)
    gemma4 = [*TEXTS, "<|tool_response>"]
    assert "</s>" not in _names(special_tokens(gemma4, [*TYPES, CONTROL], {}).template)


def test_phi3_strips_whitespace_after_its_special_tokens() -> None:
    specials = special_tokens(TEXTS, TYPES, {"general.name": "Phi-3-mini-4k-instruct"})
    stripped = {TEXTS[i] for i in specials.rstrip}
    assert stripped == set(TEXTS) - {"a", "<unk>", "<s>", "<|endoftext|>"}


def test_rstrip_partition_eats_whitespace_and_the_tokens_inside_it() -> None:
    end = [("<|end|>", 7)]
    assert _partition("<|end|>\n  hi<|end|>", end, frozenset({7})) == [7, "hi", 7]
    assert _partition("<|end|>\n  hi<|end|>", end) == [7, "\n  hi", 7]
    # llama.cpp searches on after the stripped whitespace, so a newline token inside it is gone too
    newline = [("\n", 9)]
    assert _partition("a\n \n b", newline, frozenset({9})) == ["a", 9, "b"]
    assert _partition("a\n \n b", newline) == ["a", 9, " ", 9, " b"]
