import pytest

from jupyter_chatflow.pipeline.request import ChatRequest, Features, RequestError


def test_build_splits_sampling_knobs_and_features():
    request = ChatRequest.build("Hi", temperature=0.7, top_p=0.8, tools="calculator, variable", safety="input")
    assert request.params.temperature == 0.7 and request.params.top_p == 0.8
    assert request.features.tools == ("calculator", "variable") and request.features.safety == "input"
    assert request.request_id.startswith("req_")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"temprature": 0.5}, "Unknown option"),
        ({"temperature": -1}, "temperature must be >= 0"),
        ({"max_tokens": 9000}, r"max_tokens must be from 1 to 8191 \(the model's window is 8192 tokens"),
        ({"safety": "maybe"}, "safety must be one of off|input|all"),
        ({"tool_choice": "required"}, "needs at least one tool"),
        ({"tool_choice": "weather", "tools": "calculator"}, "tool_choice must be"),
        ({"top_p": "high"}, r"top_p must be in \(0, 1\], a finite number; got 'high' \(str\)"),
    ],
)
def test_bad_options_are_clear_errors(options, message):
    with pytest.raises(RequestError, match=message):
        ChatRequest.build("Hi", window=8192, **options)


def test_empty_message_and_non_text_are_refused():
    with pytest.raises(RequestError, match="empty"):
        ChatRequest.build("   ")
    with pytest.raises(RequestError, match="must be text"):
        ChatRequest.build(b"bytes")  # type: ignore[arg-type]


def test_a_lone_surrogate_is_refused_where_it_is_and_a_pair_in_two_code_points_is_joined():
    """One decision for every entry point (the server's is a 400 naming the field): refused, not replaced."""
    with pytest.raises(RequestError, match=r"The message holds a lone UTF-16 surrogate \(U\+D800\) at character 4"):
        ChatRequest.build("bad \ud800 text")
    with pytest.raises(RequestError, match="The system prompt holds a lone UTF-16 surrogate"):
        ChatRequest.build("ok", system="s\udfff")
    assert ChatRequest.build("smile \ud83d\ude00").text == "smile \U0001f600"  # (as a JavaScript string holds it)


def test_envelope_is_json_ready():
    import json

    envelope = ChatRequest.build("Hi", stop=["\n\n"], tools="calculator").envelope()
    assert json.loads(json.dumps(envelope))["features"]["tools"] == ["calculator"]


def test_features_defaults():
    assert Features() == Features(tools=(), tool_choice="auto", memory=True, safety="all", trim="drop")


BAD_VALUES = [
    ({"max_tokens": 1.5}, r"max_tokens must be >= 1, a whole number; got 1.5"),
    ({"max_tokens": True}, r"max_tokens must be >= 1, a whole number; got True \(bool\)"),
    ({"max_tokens": 0}, r"max_tokens must be >= 1"),
    ({"seed": "abc"}, r"seed must be None or a whole number from 0 to 4294967295; got 'abc' \(str\)"),
    ({"seed": 2**32}, r"seed must be None or a whole number from 0 to 4294967295; got 4294967296"),
    ({"seed": -1}, r"from 0 to 4294967295; got -1"),
    ({"seed": 1.0}, r"seed must be None or a whole number"),
    ({"temperature": float("inf")}, r"temperature must be >= 0 \(0 is greedy\), a finite number; got inf"),
    ({"temperature": float("nan")}, r"temperature must be >= 0 .*got nan"),
    ({"temperature": True}, r"temperature must be .*got True \(bool\)"),
    ({"temperature": "0.5"}, r"temperature must be .*got '0.5' \(str\)"),
    ({"top_p": 0.0}, r"top_p must be in \(0, 1\]"),
    ({"top_p": 1.5}, r"top_p must be in \(0, 1\]"),
    ({"top_k": 2.5}, r"top_k must be >= 0 \(0 keeps all tokens\), a whole number; got 2.5"),
    ({"top_k": -1}, r"top_k must be >= 0"),
    ({"min_p": 1.0}, r"min_p must be in \[0, 1\)"),
    ({"min_p": float("-inf")}, r"min_p must be in \[0, 1\), a finite number"),
    ({"repetition_penalty": 0}, r"repetition_penalty must be > 0 \(1 is off\)"),
    ({"repetition_penalty": float("inf")}, r"repetition_penalty must be > 0 .*a finite number; got inf"),
    ({"stop": 5}, r"stop must be a non-empty string or a list of them; got 5"),
    ({"stop": [["a"]]}, r"stop must be a non-empty string or a list of them; got \[\['a'\]\] \(list\)"),
    ({"stop": ["ok", ""]}, r"stop must be a non-empty string"),
    ({"stop": {"a"}}, r"stop must be a non-empty string .*\(set\)"),
    ({"ignore_eos": "yes"}, r"ignore_eos must be True or False; got 'yes' \(str\)"),
    ({"memory": "no"}, r"memory must be True or False, got 'no'"),
    ({"tools": [["calculator"]]}, r"tools must be names, as 'calculator,variable' or a list of str"),
    ({"tools": 5}, r"tools must be names"),
    ({"tool_choice": 1}, r"tool_choice must be a string"),
    ({"max_tool_rounds": 2.5}, r"max_tool_rounds must be a whole number >= 1, got 2.5"),
    ({"max_tool_rounds": 0}, r"max_tool_rounds must be a whole number >= 1, got 0"),
    ({"trim": "squash"}, r"trim must be one of drop\|summarize"),
    ({"session": 5}, r"session must be a name \(str\), got 5"),
    ({"system": ["be brief"]}, r"system must be text or None"),
]


@pytest.mark.parametrize(("options", "message"), BAD_VALUES, ids=[str(o) for o, _ in BAD_VALUES])
def test_every_option_is_checked_for_type_and_range(options, message):
    """Each wrong value is refused when the request is built (before anything runs), naming the option and range."""
    with pytest.raises(RequestError, match=message):
        ChatRequest.build("Hi", window=8192, **options)


def test_max_tokens_bound_is_the_window_actually_enforced():
    assert ChatRequest.build("Hi", window=512, max_tokens=511).params.max_tokens == 511
    with pytest.raises(RequestError, match=r"max_tokens must be from 1 to 511 \(the model's window is 512 tokens"):
        ChatRequest.build("Hi", window=512, max_tokens=512)


def test_good_values_are_normalized_to_plain_json_values():
    import numpy as np

    request = ChatRequest.build(
        "Hi", temperature=np.float32(0.5), top_k=np.int64(3), max_tokens=7, seed=0, stop="END", tools=["calculator"]
    )
    params = request.params
    assert (params.temperature, params.top_k, params.seed, params.stop) == (0.5, 3, 0, ("END",))
    assert type(params.temperature) is float and type(params.top_k) is int
    assert request.features.tools == ("calculator",)
    assert ChatRequest.build("Hi", temperature=1).params.temperature == 1.0  # an int where a float goes is fine
    assert ChatRequest.build("Hi", seed=None, tools=None).params.seed is None  # None: the default


def test_chat_send_refuses_before_anything_runs(tiny_model):
    from jupyter_chatflow.pipeline.chat import Chat

    chat = Chat(model=tiny_model, session="validate", db=":memory:")
    with pytest.raises(RequestError, match=r"max_tokens must be >= 1, a whole number; got 1\.5"):
        chat.send("Hi", max_tokens=1.5)
    with pytest.raises(RequestError, match=r"must be from 1 to 511 \(the model's window is 512"):
        chat.send("Hi", max_tokens=600)
    with pytest.raises(RequestError, match=r"The message must be text \(str\), got list"):
        chat.send(["What is", ["the capital"]])  # type: ignore[arg-type]  # not joined into one message
    assert chat.history() == []
