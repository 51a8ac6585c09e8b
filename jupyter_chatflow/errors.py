"""The package's exceptions: one base class, each message says what to do next."""

from __future__ import annotations


class ChatflowError(Exception):
    """Base class for every error jupyter_chatflow raises on purpose."""


class ModelNotFoundError(ChatflowError):
    """No model file where one was asked for, or none installed by default."""


class ModelFormatError(ChatflowError):
    """The file is not a GGUF we can read: truncated, corrupt, or an unsupported architecture/quant type."""


class GenerationError(ChatflowError):
    """A request to the engine that cannot be served (prompt longer than the window, bad sampling params)."""


class ModelTooLargeError(ChatflowError):
    """The model would not fit in the memory available now: refused before any weight is dequantized."""
