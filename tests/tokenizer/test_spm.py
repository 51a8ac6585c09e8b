"""SentencePiece ('llama') vocabularies: the tiered tiktoken Encoding against a port of llama.cpp's SPM tokenizer.

The oracle below follows `llm_tokenizer_spm_session` and the SPM branch of `llama_vocab::impl::tokenize` in
llama.cpp's `src/llama-vocab.cpp`: a priority queue of bigrams by score (ties: leftmost), stale entries
skipped, `resegment` with byte fallback, the space prefix for text that is first or follows a special token,
' ' escaped as '▁'. The vocabulary is synthetic (no SPM model ships with the tests).
"""

from __future__ import annotations

import heapq
import random
import time

import pytest

from jupyter_chatflow.errors import ModelFormatError
from jupyter_chatflow.tokenizer import spm
from jupyter_chatflow.tokenizer.spm import SpmCodec
from jupyter_chatflow.tokenizer.tokenizer import StreamDecoder, Tokenizer

SP = "\u2581"
LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}"
    "{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}"
)

# ---------------------------------------------------------------------------------------------------------
# The oracle: a straightforward port of llama.cpp's SPM tokenizer.
# ---------------------------------------------------------------------------------------------------------


def _utf8_chars(data: bytes) -> list[bytes]:
    """Split bytes into UTF-8 characters by lead byte, as llama.cpp's unicode_len_utf8."""
    out, offs = [], 0
    while offs < len(data):
        lead = data[offs]
        n = (
            1
            if lead < 0x80
            else 2
            if lead >> 5 == 0b110
            else 3
            if lead >> 4 == 0b1110
            else 4
            if lead >> 3 == 0b11110
            else 1
        )
        out.append(data[offs : offs + n])
        offs += n
    return out


class SpmOracle:
    """llama.cpp's SPM tokenizer on a metadata dict."""

    def __init__(self, metadata: dict):
        self.texts = metadata["tokenizer.ggml.tokens"]
        self.scores = metadata["tokenizer.ggml.scores"]
        self.types = metadata["tokenizer.ggml.token_type"]
        self.token_id = {t.encode("utf-8"): i for i, t in enumerate(self.texts)}
        self.add_space_prefix = metadata.get("tokenizer.ggml.add_space_prefix", True)
        self.bos = metadata.get("tokenizer.ggml.bos_token_id", 1)
        self.add_bos = metadata.get("tokenizer.ggml.add_bos_token", True)
        specials = [i for i, k in enumerate(self.types) if k in (2, 3, 4)]
        self.specials = sorted(specials, key=lambda i: -len(self.texts[i].encode("utf-8")))

    def byte_to_token(self, byte: int) -> int:
        found = self.token_id.get(f"<0x{byte:02X}>".encode())
        return found if found is not None else self.token_id[bytes([byte])]

    def session(self, text: bytes) -> list[int]:
        """llm_tokenizer_spm_session::tokenize."""
        chars = _utf8_chars(text)
        # symbols: [offset, n, prev, next]
        symbols, offs = [], 0
        for i, c in enumerate(chars):
            symbols.append([offs, len(c), i - 1, -1 if i == len(chars) - 1 else i + 1])
            offs += len(c)
        queue: list = []
        rev_merge: dict[bytes, tuple[int, int]] = {}

        def try_add_bigram(left: int, right: int) -> None:
            if left == -1 or right == -1:
                return
            piece = text[symbols[left][0] : symbols[left][0] + symbols[left][1] + symbols[right][1]]
            token = self.token_id.get(piece)
            if token is None:
                return
            heapq.heappush(queue, (-self.scores[token], left, right, len(piece)))
            rev_merge[piece] = (left, right)

        for i in range(1, len(symbols)):
            try_add_bigram(i - 1, i)
        while queue:
            _, left, right, size = heapq.heappop(queue)
            ls, rs = symbols[left], symbols[right]
            if ls[1] == 0 or rs[1] == 0 or ls[1] + rs[1] != size:
                continue
            ls[1] += rs[1]
            rs[1] = 0
            ls[3] = rs[3]
            if rs[3] >= 0:
                symbols[rs[3]][2] = left
            try_add_bigram(ls[2], left)
            try_add_bigram(left, ls[3])
        out: list[int] = []

        def resegment(index: int) -> None:
            offs, n = symbols[index][0], symbols[index][1]
            piece = text[offs : offs + n]
            token = self.token_id.get(piece)
            if token is not None:
                out.append(token)
                return
            if piece not in rev_merge:
                out.extend(self.byte_to_token(b) for b in piece)
                return
            resegment(rev_merge[piece][0])
            resegment(rev_merge[piece][1])

        i = 0 if symbols else -1
        while i != -1:
            resegment(i)
            i = symbols[i][3]
        return out

    def tokenize(self, raw: str, add_special: bool, parse_special: bool) -> list[int]:
        """llama_vocab::impl::tokenize, SPM branch."""
        parts: list = [raw] if raw else []
        for tid in self.specials:
            if self.types[tid] in (2, 3) and not parse_special:
                continue
            token_text = self.texts[tid]
            cut: list = []
            for part in parts:
                if isinstance(part, int):
                    cut.append(part)
                    continue
                for k, piece in enumerate(part.split(token_text)):
                    if k:
                        cut.append(tid)
                    if piece:
                        cut.append(piece)
            parts = cut
        output: list[int] = []
        previous_special = True
        if add_special and self.add_bos:
            output.append(self.bos)
        for part in parts:
            if isinstance(part, int):
                output.append(part)
                previous_special = True
                continue
            text = (" " if self.add_space_prefix and previous_special else "") + part
            output += self.session(text.replace(" ", SP).encode("utf-8"))
            previous_special = False
        return output


# ---------------------------------------------------------------------------------------------------------
# A synthetic SentencePiece-like vocabulary.
# ---------------------------------------------------------------------------------------------------------

_SINGLE = [SP, *"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'-()<>/[]:", "é", "中", "ж", "\n"]
_WORDS = (  # noqa: SIM905 (a sentence reads better than a list)
    "the quick brown fox jumps over lazy dog hello world tokenizer piece score merge byte fallback "
    "sentence llama mistral inst system user assistant café naïve jalapeño Ωmega 中文 日本語 ümlaut "
    "привет мир 😀😀 😀 ok <s> [INST] [/INST] <<SYS>> 2024 3.14 don't it's"
).split()


def _spm_metadata(seed: int = 0, **changes) -> dict:
    rng = random.Random(seed)
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256))]
    types = [2, 3, 3, *[6] * 256]
    scores = [0.0] * len(tokens)
    for k, char in enumerate(_SINGLE):
        tokens.append(char)
        types.append(1)
        scores.append(-1000.0 - k)
    pieces: set[str] = set()
    for word in _WORDS:
        for start in range(len(word)):
            for end in range(start + 2, len(word) + 1):
                if rng.random() < 0.35:
                    pieces.add(word[start:end])
        pieces.add(SP + word)
        pieces.add(SP + word[: rng.randint(1, len(word))])
    pieces |= {SP * 2, SP * 3, SP * 4, "<<", ">>", "ñu", "\n\n"}
    pieces -= set(tokens)
    for piece in sorted(pieces):
        tokens.append(piece)
        types.append(1)
        scores.append(float(-rng.randint(1, 120)))  # few values: many ties
    # Ties llama.cpp breaks by position and tiktoken by id must not matter: move the conflicting ones apart.
    while conflicts := _tie_conflicts(tokens, scores):
        for left, _ in conflicts:
            scores[left] -= 1 / 64 + rng.random() / 1024
    tokens.append("<tool>")
    types.append(4)
    scores.append(0.0)
    metadata = {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": scores,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0,
        "tokenizer.chat_template": LLAMA2_TEMPLATE,
    }
    metadata.update(changes)
    return metadata


def _tie_conflicts(tokens: list[str], scores: list[float]) -> tuple:
    token_id = {t: i for i, t in enumerate(tokens)}
    return spm._tie_conflicts([t for t in token_id if len(t) > 1], token_id, scores)


@pytest.fixture(scope="module")
def meta() -> dict:
    return _spm_metadata()


@pytest.fixture(scope="module")
def tok(meta: dict) -> Tokenizer:
    return Tokenizer.from_metadata(meta)


@pytest.fixture(scope="module")
def oracle(meta: dict) -> SpmOracle:
    return SpmOracle(meta)


_ALPHABET = [
    *"abcdefghijklmnopqrstuvwxyzABCXYZ0123456789.,!?'-()<>/[]:;@#~",
    *[" ", " ", " ", "  ", "   ", "\n", "\t", "\r\n", "\u00a0", "\u3000"],
    *["é", "ñ", "ü", "ï", "Ω", "ж", "п", "中", "文", "日", "本", "語", "😀", "🦙", "\u0301", "\x00", "\U0010ffff"],
    *_WORDS,
    *["<s>", "</s>", "<unk>", "<tool>", "[INST]", "<<SYS>>", "<0x0A>", SP, "▁▁x"],
]


def _random_texts(seed: int, count: int, length: int = 12) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, length))) for _ in range(count)]


_FIXED = [
    "",
    " ",
    "Hello world",
    "hello  world   ",
    "  leading spaces",
    "café naïve jalapeño",
    "中文 日本語 テスト",
    "😀😀 🦙 emoji",
    "line\nbreak\n\n\ttab",
    "2024 3.14 don't",
    "<s>[INST] hi [/INST] ok</s>",
    "a<tool>b",
    "▁literal▁marks▁",
    "x" * 300,
    " " * 50,
]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_encode_matches_llama_cpp_spm(tok: Tokenizer, oracle: SpmOracle, seed: int) -> None:
    wrong = []
    for text in _FIXED + _random_texts(seed, 400):
        if tok.encode(text) != oracle.tokenize(text, add_special=False, parse_special=False):
            wrong.append(text)
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("seed", [4, 5])
def test_encode_template_matches_llama_cpp_spm(tok: Tokenizer, oracle: SpmOracle, seed: int) -> None:
    wrong = []
    for text in _FIXED + _random_texts(seed, 400):
        if tok.encode_template(text) != oracle.tokenize(text, add_special=False, parse_special=True):
            wrong.append(text)
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("seed", [10, 11, 12, 13])
def test_other_vocabularies_match(seed: int) -> None:
    meta = _spm_metadata(seed)
    tok, oracle = Tokenizer.from_metadata(meta), SpmOracle(meta)
    texts = _FIXED + _random_texts(seed, 300, length=20)
    wrong = [t for t in texts if tok.encode(t) != oracle.tokenize(t, add_special=False, parse_special=False)]
    assert not wrong, wrong[:5]


def test_fixed_cases(tok: Tokenizer, meta: dict) -> None:
    ids = tok.encode("hello")
    assert tok.decode(ids) == " hello"  # the space prefix llama.cpp adds
    assert tok.encode("") == []
    text_ids = tok.encode("<s>")
    assert 1 not in text_ids and tok.decode(text_ids) == " <s>"  # control text stays text in user text
    assert tok.encode_template("<s>hi")[0] == 1
    assert tok.encode_template("<s>hi")[1:] == tok.encode("hi")  # text after a special token: prefixed again
    assert tok.encode("a<tool>b")[2] == len(meta["tokenizer.ggml.tokens"]) - 1  # user-defined: everywhere
    byte_ids = tok.encode("🦙")  # no token has it: byte fallback after '▁'
    assert [tok.piece(i) for i in byte_ids[-4:]] == ["<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"]
    assert tok.vocab_size == len(meta["tokenizer.ggml.tokens"])


def test_every_token_text_alone(meta: dict) -> None:
    # A piece that is itself a token: tiktoken would return it whole, llama.cpp merges its characters.
    changed = {**meta, "tokenizer.ggml.add_space_prefix": False}
    tok, oracle = Tokenizer.from_metadata(changed), SpmOracle(changed)
    texts = [t for t, k in zip(meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"], strict=True) if k == 1]
    not_rebuilt = 0
    for text in texts:
        plain = text.replace(SP, " ")
        expected = oracle.tokenize(plain, add_special=False, parse_special=False)
        assert tok.encode(plain) == expected, text
        assert tok.encode(plain + "🦙" + plain)[: len(expected)] == expected, text  # cut by a char of no token
        not_rebuilt += expected != [meta["tokenizer.ggml.tokens"].index(text)]
    assert not_rebuilt > 50  # random scores: many tokens are not what SPM makes of their own text


def test_no_space_prefix(meta: dict) -> None:
    changed = {**meta, "tokenizer.ggml.add_space_prefix": False}
    tok, oracle = Tokenizer.from_metadata(changed), SpmOracle(changed)
    assert tok.decode(tok.encode("hello")) == "hello"
    for text in _FIXED + _random_texts(21, 200):
        assert tok.encode_template(text) == oracle.tokenize(text, add_special=False, parse_special=True), text


def test_round_trip_decode(tok: Tokenizer) -> None:
    for text in _FIXED + _random_texts(31, 300):
        # llama.cpp prefixes a space to text that is first or follows a special token (here only <tool>)
        expected = "<tool>".join(" " + t if t else t for t in text.split("<tool>")).replace(SP, " ")
        assert tok.decode(tok.encode(text)) == expected


def test_stream_decoder_on_byte_fallback(tok: Tokenizer) -> None:
    ids = tok.encode("🦙🦙x")
    assert len(ids) >= 9  # eight byte tokens
    stream = StreamDecoder(tok)
    pieces = [stream.push(i) for i in ids]
    assert "".join(pieces) + stream.flush() == " 🦙🦙x"
    assert "" in pieces and "🦙" in pieces  # partial characters are held back, then released whole
    rng = random.Random(5)
    for _ in range(200):
        seq = [rng.randrange(tok.vocab_size) for _ in range(rng.randint(0, 10))]
        stream = StreamDecoder(tok)
        assert "".join(stream.push(i) for i in seq) + stream.flush() == tok.decode(seq)


def test_token_bytes_and_pieces(tok: Tokenizer, meta: dict) -> None:
    texts = meta["tokenizer.ggml.tokens"]
    assert tok.token_bytes(texts.index("<0x0A>")) == b"\n"
    assert tok.token_bytes(texts.index(SP + "hello")) == b" hello"
    assert tok.piece(1) == "<s>" and tok.piece(2) == "</s>"
    assert tok.piece(texts.index("<0xE4>")) == "<0xE4>"
    assert (tok.bos_id, tok.eos_id, tok.add_bos) == (1, 2, True)
    assert {0, 1, 2, len(texts) - 1} == tok.special_ids


def test_chat_template_llama2(tok: Tokenizer, oracle: SpmOracle) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello world"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "what about </s> and <s>?"},
    ]
    rendered = tok.render_chat_template(messages)
    assert rendered.startswith("<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nhello world [/INST] ok </s><s>[INST]")
    ids = tok.apply_chat_template(messages)
    # llama.cpp with parse_special (the message has control text, which stays text here: compare without it)
    plain = [{"role": m["role"], "content": m["content"].replace("</s>", "x").replace("<s>", "y")} for m in messages]
    assert tok.apply_chat_template(plain) == oracle.tokenize(
        tok.render_chat_template(plain), add_special=False, parse_special=True
    )
    assert [i for i in ids if i in (1, 2)] == [1, 2, 1]  # BOS once per user turn, EOS after the answer
    assert ids.count(1) == 2 and ids[0] == 1
    assert tok.decode(ids).replace(" ", "") == rendered.replace(" ", "")


def test_bos_added_when_template_has_none(meta: dict) -> None:
    changed = {**meta, "tokenizer.chat_template": None}  # ChatML fallback: no <s> in the text
    tok = Tokenizer.from_metadata(changed)
    ids = tok.apply_chat_template([{"role": "user", "content": "hi"}])
    assert ids[0] == 1 and ids.count(1) == 1
    no_bos = Tokenizer.from_metadata({**changed, "tokenizer.ggml.add_bos_token": False})
    assert no_bos.apply_chat_template([{"role": "user", "content": "hi"}]) == ids[1:]


def test_pattern_split_rule_and_unsplit_fallback(meta: dict) -> None:
    assert SpmCodec.build(meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.scores"], meta).split_at_space
    # a token with '▁' inside: pieces may not be cut before '▁' runs, and results must still match
    changed = _spm_metadata(3)
    changed["tokenizer.ggml.tokens"] = [*changed["tokenizer.ggml.tokens"], "o▁w", "d▁▁t"]
    changed["tokenizer.ggml.scores"] = [*changed["tokenizer.ggml.scores"], -0.25, -0.75]
    changed["tokenizer.ggml.token_type"] = [*changed["tokenizer.ggml.token_type"], 1, 1]
    codec = SpmCodec.build(changed["tokenizer.ggml.tokens"], changed["tokenizer.ggml.scores"], changed)
    assert not codec.split_at_space
    tok, oracle = Tokenizer.from_metadata(changed), SpmOracle(changed)
    assert tok.encode("hello world")[1:3] != oracle.tokenize("hello", False, False)  # 'o▁w' takes part
    for text in ["hello world", "old  tad", *_random_texts(41, 200)]:
        assert tok.encode(text) == oracle.tokenize(text, add_special=False, parse_special=False), text


@pytest.mark.parametrize(
    ("extra", "scores", "text"),
    [
        (["qv", "vz"], [-0.1, -0.2], "qvz"),  # share the symbol 'v': the right one has the lower id
        (["kq", "jz", "kqj"], [-0.2, -0.1, -0.05], "kqjz"),  # merging 'kq' first lets 'kqj' take the 'j'
    ],
)
def test_position_dependent_ties_are_refused(meta: dict, extra: list, scores: list, text: str) -> None:
    # right-hand token first in id order, then equal scores: llama.cpp picks the leftmost, tiktoken the lower id
    tokens = [*extra[1::-1], *extra[2:]]
    tied = [scores[0], scores[0], *scores[2:]]
    changed = {
        **meta,
        "tokenizer.ggml.tokens": [*meta["tokenizer.ggml.tokens"], *tokens],
        "tokenizer.ggml.scores": [*meta["tokenizer.ggml.scores"], *tied],
        "tokenizer.ggml.token_type": [*meta["tokenizer.ggml.token_type"], *[1] * len(tokens)],
    }
    n = len(meta["tokenizer.ggml.tokens"])
    codec = SpmCodec.build(changed["tokenizer.ggml.tokens"], changed["tokenizer.ggml.scores"], changed)
    assert (n + 1, n) in codec.tie_conflicts  # (left-hand token, right-hand token)
    with pytest.raises(ModelFormatError, match="equal scores"):
        Tokenizer.from_metadata(changed)
    # the refusal is needed: tiktoken's order differs from llama.cpp's on this text
    ranks = codec.encoding.encode_ordinary(text.replace(" ", SP))
    assert [codec.encoding.decode_single_token_bytes(r) for r in ranks] != [
        changed["tokenizer.ggml.tokens"][i].encode() for i in SpmOracle(changed).session(text.encode())
    ]
    # with distinct scores the same tokens are accepted and exact
    changed["tokenizer.ggml.scores"] = [*meta["tokenizer.ggml.scores"], *scores[1::-1], *scores[2:]]
    tok = Tokenizer.from_metadata(changed)
    assert tok.encode(text) == SpmOracle(changed).tokenize(text, add_special=False, parse_special=False)


def test_missing_scores_or_bytes_raise(meta: dict) -> None:
    with pytest.raises(ModelFormatError, match="scores"):
        Tokenizer.from_metadata({**meta, "tokenizer.ggml.scores": None})
    kept = [i for i, t in enumerate(meta["tokenizer.ggml.tokens"]) if t != "<0x80>"]
    broken = {
        **meta,
        "tokenizer.ggml.unknown_token_id": None,
        **{k: [meta[k][i] for i in kept] for k in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores")},
        "tokenizer.ggml.token_type": [meta["tokenizer.ggml.token_type"][i] for i in kept],
    }
    with pytest.raises(ModelFormatError, match="<0x80>"):
        Tokenizer.from_metadata(broken)


def test_speed_100kb(tok: Tokenizer, oracle: SpmOracle) -> None:
    rng = random.Random(9)
    words = [w for w in _WORDS if w not in ("<s>",)]
    text = " ".join(rng.choice(words) for _ in range(20_000))[:100_000]
    start = time.perf_counter()
    ids = tok.encode(text)
    elapsed = time.perf_counter() - start
    print(f"\nSPM encode of {len(text.encode()) / 1000:.0f} KB: {elapsed * 1000:.1f} ms, {len(ids)} tokens")
    assert elapsed < 5
    assert ids == oracle.tokenize(text, add_special=False, parse_special=False)


def test_user_defined_runs_sharing_one_score_are_accepted(meta: dict) -> None:
    # Gemma 3: runs of newlines, tabs and spaces are user-defined tokens, all scored -1000. llama.cpp cuts them
    # out of the text before SPM, so their ties never meet in a merge: the vocabulary is accepted, and exact.
    runs = ["\t\t\t\t", "\t\t\t", "\t\t", "\n\n\n\n", "\n\n\n", "  ", "\n\t"]  # longest first: ties the wrong way
    changed = {
        **meta,
        "tokenizer.ggml.tokens": [*meta["tokenizer.ggml.tokens"], *runs],
        "tokenizer.ggml.scores": [*meta["tokenizer.ggml.scores"], *[-1000.0] * len(runs)],
        "tokenizer.ggml.token_type": [*meta["tokenizer.ggml.token_type"], *[4] * len(runs)],
    }
    assert _tie_conflicts(changed["tokenizer.ggml.tokens"], changed["tokenizer.ggml.scores"])  # taken alone
    tok, oracle = Tokenizer.from_metadata(changed), SpmOracle(changed)
    texts = [*_FIXED, "a\n\n\n\n\nb\t\t\t\t\tc   d", "\n\t\n\n\t", *_random_texts(51, 300, length=20)]
    for text in texts:
        assert tok.encode(text) == oracle.tokenize(text, add_special=False, parse_special=False), text
        assert tok.encode_template(text) == oracle.tokenize(text, add_special=False, parse_special=True), text
    ids = tok.encode("x\t\t\t\t\t")  # the run of four is one token; text after it gets llama.cpp's space prefix
    assert ids.count(len(meta["tokenizer.ggml.tokens"])) == 1 and tok.decode(ids) == " x\t\t\t\t \t"
