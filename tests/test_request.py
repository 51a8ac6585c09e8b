import pytest

from jupyter_chatflow.request import ChatRequest, Features, RequestError


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
        ({"max_tokens": 9000}, "does not fit the model's window"),
        ({"safety": "maybe"}, "safety must be one of off|input|all"),
        ({"tool_choice": "required"}, "needs at least one tool"),
        ({"tool_choice": "weather", "tools": "calculator"}, "tool_choice must be"),
        ({"top_p": "high"}, "wrong type"),
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


def test_lone_surrogates_become_replacement_characters():
    request = ChatRequest.build("bad \ud800 text")
    assert request.text == "bad \ufffd text"
    request.text.encode("utf-8")


def test_envelope_is_json_ready():
    import json

    envelope = ChatRequest.build("Hi", stop=["\n\n"], tools="calculator").envelope()
    assert json.loads(json.dumps(envelope))["features"]["tools"] == ["calculator"]


def test_features_defaults():
    assert Features() == Features(tools=(), tool_choice="auto", memory=True, safety="all", trim="drop")
