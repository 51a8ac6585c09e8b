"""Text to token ids and back: byte-level BPE (a tiktoken Encoding built from the GGUF vocabulary) or
SentencePiece, pre-tokenization, and the chat template rendered with jinja2.
"""
