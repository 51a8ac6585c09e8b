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
"""The fallback chat template (ChatML) for a GGUF without `tokenizer.chat_template` nor another family's turn
tokens."""

# Each family's turn format, for a file that ships its vocabulary's turn tokens but no template (Gemma 3 270M's
# GGUF has none). Gemma has no system role: its own template puts the system text before the first user message.
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% set first = messages[0] if messages else {'role': '', 'content': ''} %}"
    "{% set system = first['content'] + '\n\n' if first['role'] == 'system' and first['content'] else '' %}"
    "{% for message in messages if message['role'] != 'system' %}"
    "{% set role = 'model' if message['role'] == 'assistant' else 'user' %}"
    "{{ '<start_of_turn>' + role + '\n' + (system if loop.first else '') + message['content'] | trim"
    " + '<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)
LLAMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim"
    " + '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
PHI3_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
_FALLBACKS = (  # (a turn token of the family's vocabulary, its name, its template), in the order tried
    ("<start_of_turn>", "Gemma turns", GEMMA_TEMPLATE),
    ("<|im_start|>", "ChatML", CHATML_TEMPLATE),
    ("<|start_header_id|>", "Llama 3 headers", LLAMA3_TEMPLATE),
    ("<|assistant|>", "Phi-3 turns", PHI3_TEMPLATE),
)


def chat_template_of(file_template: str | None, special_texts: set[str]) -> tuple[str, str]:
    """(template, where it comes from, in words) of a file: its own `tokenizer.chat_template`, or its family's turn
    format told by its special tokens' texts when it has none. The tokenizer renders it; `chatflow model info` says it.
    """
    if file_template:
        return file_template, "the file's own (tokenizer.chat_template)"
    family, source = fallback_template(special_texts)
    return source, f"none in the file: {family}, told by the vocabulary's turn tokens"


def fallback_template(tokens: set[str] | frozenset[str]) -> tuple[str, str]:
    """(name, template) for a file without a chat template: its family's turn format, told by the turn tokens its
    vocabulary has, or ChatML written as plain text when it has none of them."""
    return next(((name, source) for token, name, source in _FALLBACKS if token in tokens), ("ChatML", CHATML_TEMPLATE))


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


def tool_call_format(template: str) -> str:
    """How a model with this chat template calls tools here, in words for `chatflow model info` and the docs.

    Every model gets the tools in its system prompt in the Hermes format (`<tool_call>` JSON; see
    `pipeline/tools/calls.py`) and its calls held to the JSON grammar by the constrained-decoding mask; what differs
    is whether that is the family's own format."""
    if "<tool_call>" in template:
        return "the template's own: <tool_call> JSON (Hermes, as Qwen 2.5/3 write it)"
    if "<|python_tag|>" in template or "ipython" in template:
        return ("Llama 3.1's JSON is not read yet: tools by prompt as <tool_call> JSON, held to the grammar by the "
                "constrained-decoding mask")  # fmt: skip
    return ("none in the template: tools by prompt as <tool_call> JSON, held to the grammar by the "
            "constrained-decoding mask")  # fmt: skip
