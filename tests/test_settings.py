"""Every option of a turn is declared once (`settings.OPTIONS`); the sampler, the request, the CLI, the magics and
the panel all take their names, defaults and ranges from it."""

from __future__ import annotations

import dataclasses

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.frontends.cli import build_parser
from jupyter_chatflow.frontends.notebook.magics import ChatMagics
from jupyter_chatflow.frontends.options import options_given, panel_settings
from jupyter_chatflow.pipeline.request import ChatRequest, Features, RequestError
from jupyter_chatflow.settings import DEFAULTS, OPTIONS, SAMPLER_DEFAULTS, names


def test_the_sampler_and_the_features_are_the_declared_options():
    # (penalty_from is the pipeline's, not an option: a chat turn sets it to its prompt's length)
    sampler = {f.name: f.default for f in dataclasses.fields(SamplingParams) if f.name != "penalty_from"}
    features = {f.name: f.default for f in dataclasses.fields(Features)}
    assert list(sampler) == list(names("sampling")) and list(features) == list(names("features"))
    assert sampler == SAMPLER_DEFAULTS and features == {k: DEFAULTS[k] for k in names("features")}
    assert SamplingParams() == SamplingParams(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0)
    assert (DEFAULTS["temperature"], DEFAULTS["top_p"], DEFAULTS["repetition_penalty"]) == (0.2, 0.9, 1.1)
    assert DEFAULTS["max_tokens"] == 256  # one number: the magics said 512, the CLI and the panel 256


def test_a_request_without_options_samples_as_declared():
    request = ChatRequest.build("Hi")
    chat_defaults = {k: DEFAULTS[k] for k in names("sampling")}
    assert request.params == SamplingParams(**chat_defaults) and request.features == Features()
    assert request.params.temperature == 0.2 and request.params.max_tokens == 256


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"top_p": 0}, "top_p must be in (0, 1], a finite number; got 0"),
        ({"min_p": 1.0}, "min_p must be in [0, 1), a finite number; got 1.0"),
        ({"temperature": -1}, "temperature must be >= 0 (0 is greedy), a finite number; got -1"),
        ({"top_k": 2.5}, "top_k must be >= 0 (0 keeps all tokens), a whole number; got 2.5"),
        ({"seed": 2**32}, "seed must be None or a whole number from 0 to 4294967295; got 4294967296"),
        ({"repetition_penalty": 0}, "repetition_penalty must be > 0 (1 is off), a finite number; got 0"),
    ],
)
def test_a_value_out_of_range_is_refused_with_the_declared_range(options, message):
    with pytest.raises(RequestError) as error:
        ChatRequest.build("Hi", **options)
    assert str(error.value) == message


def test_the_command_line_has_a_flag_for_every_option_and_leaves_the_rest_to_the_defaults():
    parser = build_parser()
    args = parser.parse_args(["chat", "--top-p", "0.5", "--no-memory", "--stop", "END", "--stop", "STOP", "--trim",
                              "summarize", "--ignore-eos", "--tools", "calculator", "Hi"])  # fmt: skip
    assert options_given(args) == {"top_p": 0.5, "memory": False, "stop": ["END", "STOP"], "trim": "summarize",
                                   "ignore_eos": True, "tools": "calculator"}  # fmt: skip
    assert options_given(parser.parse_args(["chat", "Hi"])) == {}
    chat_help = parser._subparsers._group_actions[0].choices["chat"].format_help()  # type: ignore[union-attr]
    for option in OPTIONS:
        assert (option.flag if option.default is not True else f"--no-{option.name}") in chat_help


def test_the_magics_have_a_config_trait_for_every_option_with_its_default():
    InteractiveShell.clear_instance()
    try:
        magics = ChatMagics(shell=InteractiveShell.instance())
        traits = ChatMagics.class_traits(config=True)
        for option in OPTIONS:
            assert option.name in traits, option.name
            value = getattr(magics, option.name)
            expected = ",".join(option.default) if option.many and option.name == "tools" else option.default
            assert value == (list(expected) if option.name == "stop" else expected), option.name
    finally:
        InteractiveShell.clear_instance()


def test_the_panel_starts_with_every_option_at_its_default():
    settings = panel_settings()
    assert set(settings) == set(DEFAULTS)
    assert settings["tools"] == [] and settings["temperature"] == 0.2 and settings["max_tokens"] == 256
