"""Text to token ids and back: byte-level BPE (a tiktoken Encoding built from the GGUF vocabulary) or
SentencePiece, pre-tokenization, and the chat template rendered with jinja2.
"""

from typing import Any

from jupyter_chatflow import lazy

_NAMES = {
    "StreamDecoder": ".tokenizer",
    "Tokenizer": ".tokenizer",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _NAMES, name)
