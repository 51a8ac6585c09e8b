"""A file without a chat template gets its family's turn format, told by the turn tokens of its vocabulary."""

from __future__ import annotations

import pytest

from jupyter_chatflow.tokenizer.chat_template import (
    CHATML_TEMPLATE,
    compile_template,
    fallback_template,
    tool_call_format,
)

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi "},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "2+2?"},
]


def render(source: str) -> str:
    return compile_template(source).render(messages=MESSAGES, add_generation_prompt=True, bos_token="<bos>")


def test_gemma_turns_put_the_system_text_in_the_first_user_turn_and_call_the_assistant_model():
    name, source = fallback_template({"<start_of_turn>", "<end_of_turn>", "<bos>"})
    assert name == "Gemma turns"
    assert render(source) == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n"
    )


@pytest.mark.parametrize(
    ("token", "family", "starts"),
    [
        ("<|im_start|>", "ChatML", "<|im_start|>system\nBe brief.<|im_end|>\n"),
        ("<|start_header_id|>", "Llama 3 headers", "<bos><|start_header_id|>system<|end_header_id|>\n\nBe brief."),
        ("<|assistant|>", "Phi-3 turns", "<|system|>\nBe brief.<|end|>\n<|user|>\nHi <|end|>\n"),
    ],
)
def test_each_family_is_told_by_its_turn_token(token, family, starts):
    name, source = fallback_template({token})
    assert name == family and render(source).startswith(starts)


def test_a_vocabulary_of_no_known_family_gets_chatml_as_text():
    assert fallback_template({"<s>", "</s>"}) == ("ChatML", CHATML_TEMPLATE)


def test_the_tool_call_format_says_whether_it_is_the_familys_own():
    assert tool_call_format("... <tool_call>\n{...}\n</tool_call> ...").startswith("the template's own")
    assert tool_call_format("{{ '<|python_tag|>' }}").startswith("Llama 3.1's JSON is not read yet")
    assert tool_call_format(CHATML_TEMPLATE).startswith("none in the template")


def test_gemma_turns_with_an_empty_system_message_add_no_blank_lines():
    _, source = fallback_template({"<start_of_turn>"})
    text = compile_template(source).render(
        messages=[{"role": "system", "content": ""}, {"role": "user", "content": "Hi"}],
        add_generation_prompt=True,
        bos_token="<bos>",
    )
    assert text == "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
