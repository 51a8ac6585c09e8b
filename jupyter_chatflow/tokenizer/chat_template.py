"""Chat templates: the GGUF's Jinja template compiled the way Hugging Face compiles it, and a ChatML fallback."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from jupyter_chatflow.errors import GenerationError, ModelFormatError

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""The fallback chat template (ChatML) for a GGUF without `tokenizer.chat_template`."""


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, **kwargs: Any) -> str:
    """Hugging Face's `tojson` filter: plain json.dumps, no HTML escaping."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, **kwargs)


def _raise_exception(message: str) -> None:
    """`raise_exception` for chat templates: the template rejects the message list."""
    raise GenerationError(f"the model's chat template rejected the messages: {message}. Fix the message list.")


def _strftime_now(fmt: str) -> str:
    """`strftime_now` for chat templates (Llama 3.x puts today's date in the system prompt)."""
    return datetime.now().strftime(fmt)


def compile_template(source: str) -> jinja2.Template:
    """Compile a chat template the way Hugging Face does (sandboxed, trim_blocks, lstrip_blocks)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
    try:
        return env.from_string(source)
    except jinja2.TemplateError as err:
        raise ModelFormatError(
            f"the GGUF's chat template (tokenizer.chat_template) is not valid jinja2: {err}. "
            "Use another GGUF of the model, or one converted with a newer llama.cpp."
        ) from err
