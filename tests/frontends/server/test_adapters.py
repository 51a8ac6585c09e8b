"""The wire adapters: OpenAI chunks, ChatGPT "delta_encoding v1" patches, SSE framing and JSON lines."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from jupyter_chatflow.engine.generation import Alternative
from jupyter_chatflow.events import (
    Cancelled,
    Completed,
    Emitter,
    Event,
    Failed,
    PrefillDone,
    Timings,
    TokenDelta,
    ToolCall,
    ToolResult,
    TurnStarted,
    Usage,
    event_from_dict,
)
from jupyter_chatflow.frontends.server.adapters import (
    apply_delta_v1,
    delta_v1,
    delta_v1_sse,
    event_lines,
    openai_chunks,
    parse_sse,
    sse,
    sse_frame,
)
from jupyter_chatflow.frontends.server.completions import completion
from jupyter_chatflow.pipeline.response import Response

HEAD = {
    "id": "chatcmpl-turn-1",
    "object": "chat.completion.chunk",
    "created": 1700000000,
    "model": "tiny",
    "system_fingerprint": None,
}


def _token(index: int, text: str) -> TokenDelta:
    alternatives = (Alternative(token_id=9, text=text, logprob=-0.5, sampling_prob=0.6),)
    return TokenDelta(
        index=index, token_id=100 + index, text=text, logprob=-0.5, entropy=1.0, alternatives=alternatives
    )


def _turn(texts: list[str], terminal: Event, *, tool: bool = False) -> list[Event]:
    """TurnStarted, PrefillDone, one TokenDelta per text (a tool call after the first), then `terminal`."""
    emit = Emitter("turn-1", clock=iter(range(100)).__next__)
    started = TurnStarted(request_id="req-1", session_id="sess-1", user="Hi", params={}, features={}, created=1.7e9)
    events: list[Event] = [started, PrefillDone(prompt_tokens=7, reused_tokens=0, computed_tokens=7, latency_ms=1.0)]
    for index, text in enumerate(texts):
        events.append(_token(index, text))
        if tool and index == 0:
            events.append(ToolCall(call_id="call_1", name="add", arguments={"a": 1, "b": 2}))
            events.append(ToolResult(call_id="call_1", name="add", output="3"))
    return [emit(e) for e in [*events, terminal]]


def _completed(text: str, reason: str = "stop") -> Completed:
    return Completed(
        finish_reason=reason, text=text, usage=Usage(prompt_tokens=7, completion_tokens=3), timings=Timings()
    )


def _content(chunks: list) -> str:
    return "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if isinstance(c, dict) and c["choices"]
    )


def _raising_after(events: list[Event], count: int) -> Iterator[Event]:
    yield from events[:count]
    raise RuntimeError("the source was read past what the first items need")


# ---- OpenAI ----------------------------------------------------------------------------------------------------


def test_openai_chunks_have_the_exact_streaming_shape():
    chunks = list(openai_chunks(_turn(["Hel", "lo"], _completed("Hello")), model="tiny", logprobs=False))
    role = {"role": "assistant", "content": "", "refusal": None}
    assert chunks == [
        HEAD | {"choices": [{"index": 0, "delta": role, "logprobs": None, "finish_reason": None}]},
        HEAD | {"choices": [{"index": 0, "delta": {"content": "Hel"}, "logprobs": None, "finish_reason": None}]},
        HEAD | {"choices": [{"index": 0, "delta": {"content": "lo"}, "logprobs": None, "finish_reason": None}]},
        HEAD | {"choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]},
        "[DONE]",
    ]


class _Bytes:
    """A tokenizer's `token_bytes` over a table."""

    def __init__(self, table: dict[int, bytes]):
        self.table = table

    def token_bytes(self, token_id: int) -> bytes:
        return self.table[token_id]


def _delta(index: int, token_id: int, text: str, *, elapsed: float, alternatives=(), redacted=False) -> TokenDelta:
    return TokenDelta(index=index, token_id=token_id, text=text, logprob=-0.25 * (index + 1), entropy=1.0,
                      alternatives=alternatives, elapsed_ms=elapsed, redacted=redacted)  # fmt: skip


def _entries(chunks: list) -> list[dict]:
    return [e for c in chunks if isinstance(c, dict) and c.get("choices") and c["choices"][0]["logprobs"]
            for e in c["choices"][0]["logprobs"]["content"]]  # fmt: skip


def test_openai_logprobs_carry_the_token_and_its_alternatives():
    tokenizer = _Bytes({100: "é".encode(), 9: b"e"})
    chunks = list(openai_chunks(_turn(["é"], _completed("é")), model="tiny", created=5, tokenizer=tokenizer))
    assert chunks[0]["created"] == 5
    assert chunks[1]["choices"][0]["logprobs"] == {
        "content": [
            {
                "token": "é",
                "logprob": -0.5,
                "bytes": [195, 169],
                "top_logprobs": [{"token": "e", "logprob": -0.5, "bytes": [101]}],
            }
        ],
        "refusal": None,
    }


def test_openai_logprobs_list_every_token_of_a_character_split_over_byte_tokens():
    """😀 is F0 9F 98 80: the first token's text waits (empty), the second completes it; both have entries."""
    tokenizer = _Bytes({300: b"\xf0\x9f", 301: b"\x98\x80 hi", 302: b"\xc3", 303: b"\xa9", 7: b"\xf0"})
    alternative = Alternative(token_id=7, text="<0xF0>", logprob=-3.0, sampling_prob=0.0)
    tokens = [
        _delta(0, 300, "", elapsed=1.0, alternatives=(alternative,)),
        _delta(1, 301, "😀 hi", elapsed=2.0),
        _delta(2, 302, "", elapsed=3.0),
        _delta(3, 303, "é", elapsed=4.0),
    ]
    started = TurnStarted(request_id="r", session_id="s", user="Hi", params={}, features={}, created=1.7e9)
    events = [started, *tokens, _completed("😀 hié")]
    chunks = list(openai_chunks(events, model="tiny", tokenizer=tokenizer))
    entries = _entries(chunks)
    assert [e["bytes"] for e in entries] == [[0xF0, 0x9F], [0x98, 0x80, 32, 104, 105], [0xC3], [0xA9]]
    assert [e["token"] for e in entries] == ["\ufffd", "\ufffd\ufffd hi", "\ufffd", "\ufffd"]
    assert [e["logprob"] for e in entries] == [-0.25, -0.5, -0.75, -1.0]
    assert entries[0]["top_logprobs"] == [{"token": "\ufffd", "logprob": -3.0, "bytes": [0xF0]}]
    assert bytes(b for e in entries for b in e["bytes"]).decode() == _content(chunks) == "😀 hié"
    deltas = [c["choices"][0]["delta"] for c in chunks[1:-2]]
    assert deltas == [{"content": ""}, {"content": "😀 hi"}, {"content": ""}, {"content": "é"}]


def test_openai_logprobs_text_settled_later_for_the_same_token_adds_no_entry():
    tokenizer = _Bytes({300: b"a", 301: b"\xf0\x9f"})
    tokens = [_delta(0, 300, "a", elapsed=1.0), _delta(1, 301, "", elapsed=2.0), _delta(2, 301, "\ufffd", elapsed=2.0)]
    chunks = list(openai_chunks([*tokens, _completed("a\ufffd")], model="tiny", tokenizer=tokenizer))
    assert [e["bytes"] for e in _entries(chunks)] == [[97], [0xF0, 0x9F]]
    assert _content(chunks) == "a\ufffd"


def test_openai_logprobs_never_show_what_the_output_scan_redacted():
    tokenizer = _Bytes({300: b" bob@example.com", 9: b" alice@example.com"})
    secret = Alternative(token_id=9, text=" alice@example.com", logprob=-1.0, sampling_prob=0.1)
    token = _delta(0, 300, " [EMAIL]", elapsed=1.0, alternatives=(secret,), redacted=True)
    chunks = list(openai_chunks([token, _completed(" [EMAIL]")], model="tiny", tokenizer=tokenizer))
    assert _entries(chunks) == [{"token": " [EMAIL]", "logprob": -0.25, "bytes": list(b" [EMAIL]"), "top_logprobs": []}]
    assert "example" not in json.dumps(chunks)


def test_openai_logprobs_need_the_tokenizer():
    with pytest.raises(ValueError, match="logprobs need the tokenizer"):
        list(openai_chunks(_turn(["x"], _completed("x")), model="tiny", logprobs=True))
    chunks = list(openai_chunks(_turn(["x"], _completed("x")), model="tiny"))
    assert all(c["choices"][0]["logprobs"] is None for c in chunks if isinstance(c, dict))


@pytest.mark.parametrize("safety", ["off", "all"])
def test_openai_logprobs_of_a_real_turn_have_one_entry_per_generated_token(tiny_model, safety):
    """The tiny model writes random bytes, so characters split over tokens; every generated token has an entry and
    the entries' bytes spell the answer."""
    from jupyter_chatflow.pipeline.chat import Chat

    chat = Chat(model=tiny_model, session="logprobs", db=":memory:", persist=False)
    split = 0  # tokens that end inside a UTF-8 character
    for seed in range(3):
        response = chat.send("hello", temperature=1.0, seed=seed, max_tokens=30, safety=safety, memory=False)
        chunks = list(openai_chunks(response, model="tiny", tokenizer=tiny_model.tokenizer))
        end = response.terminal()
        generated = end.usage.completion_tokens - (end.finish_reason == "stop")  # the stop token is not shown
        entries = _entries(chunks)
        assert len(entries) == generated
        raw = b"".join(bytes(e["bytes"]) for e in entries)
        assert raw.decode("utf-8", errors="replace") == _content(chunks) == end.text
        split += sum("\ufffd" in e["token"] for e in entries)
    assert split >= 3


def test_openai_tool_calls_and_content_add_up():
    events = _turn(["The sum", " is 3."], _completed("The sum is 3."), tool=True)
    chunks = list(openai_chunks(events, model="tiny"))
    assert _content(chunks) == Response(events).text() == "The sum is 3."
    [call] = [c for c in chunks if isinstance(c, dict) and "tool_calls" in c["choices"][0]["delta"]]
    assert call["choices"][0]["delta"] == {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
            }
        ]
    }


def test_openai_a_cut_call_sends_its_arguments_as_written_then_finishes_with_length():
    """OpenAI's shape for a call max_tokens cut: a tool_calls delta whose arguments are the unfinished JSON, then
    the finish chunk "length"; the whole completion carries the same call."""
    emit = Emitter("turn-1", clock=iter(range(10)).__next__)
    started = TurnStarted(request_id="req-1", session_id="s", user="Hi", params={}, features={}, created=1.7e9)
    cut = ToolCall(call_id="call_1", name="calculator", arguments={}, arguments_text='{"expression": "17*2', cut=True,
                   tokens=24)  # fmt: skip
    ended = Completed(finish_reason="length", text="", usage=Usage(prompt_tokens=7, completion_tokens=24),
                      timings=Timings())  # fmt: skip
    chunks = list(openai_chunks([emit(e) for e in (started, cut, ended)], model="tiny", include_usage=True))
    [delta] = [c["choices"][0]["delta"]["tool_calls"] for c in chunks[:-1] if c["choices"] and
               "tool_calls" in c["choices"][0]["delta"]]  # fmt: skip
    assert delta == [{"index": 0, "id": "call_1", "type": "function",
                      "function": {"name": "calculator", "arguments": '{"expression": "17*2'}}]  # fmt: skip
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1] if c["choices"]][-1] == "length"
    message = completion(chunks)["choices"][0]
    assert message["finish_reason"] == "length" and message["message"]["content"] is None
    assert message["message"]["tool_calls"][0]["function"]["arguments"] == '{"expression": "17*2'


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls_exhausted", "tool_calls"),
        ("content_filter", "content_filter"),
    ],
)
def test_openai_finish_reasons_are_mapped(reason, expected):
    chunks = list(openai_chunks(_turn(["x"], _completed("x", reason)), model="tiny"))
    assert chunks[-2]["choices"][0]["finish_reason"] == expected


def test_openai_cancelled_finishes_with_stop_and_reports_what_it_used():
    cancelled = Cancelled(text="Hel", usage=Usage(prompt_tokens=7, completion_tokens=1))
    chunks = list(openai_chunks(_turn(["Hel"], cancelled), model="tiny", include_usage=True))
    assert chunks[-3]["choices"][0]["finish_reason"] == "stop"
    assert all(c["usage"] is None for c in chunks[:-2])
    usage = {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}
    assert chunks[-2:] == [HEAD | {"usage": usage, "choices": []}, "[DONE]"]


def test_openai_usage_is_the_terminal_events():
    chunks = list(openai_chunks(_turn(["x"], _completed("x")), model="tiny", include_usage=True))
    assert chunks[-2]["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def test_openai_failed_turn_ends_with_an_error_object():
    chunks = list(openai_chunks(_turn(["Hel"], Failed(error="engine_error", message="Out of memory.")), model="tiny"))
    error = {"message": "Out of memory.", "type": "engine_error", "param": None, "code": None}
    assert chunks[-2:] == [{"error": error}, "[DONE]"]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-2])


def test_openai_a_stream_without_a_terminal_event_ends_with_an_error():
    chunks = list(openai_chunks(_turn(["Hel"], _completed("Hel"))[:-1], model="tiny"))
    assert chunks[-2]["error"]["type"] == "incomplete"
    assert chunks[-1] == "[DONE]"


def test_openai_text_settled_only_by_the_terminal_event_is_sent_before_the_finish():
    chunks = list(openai_chunks(_turn(["Hel"], _completed("Hello")), model="tiny"))
    assert chunks[-3]["choices"][0]["delta"] == {"content": "lo"}
    assert _content(chunks) == "Hello"


# ---- ChatGPT delta_encoding v1 -----------------------------------------------------------------------------------


def test_delta_v1_has_the_exact_patch_sequence():
    items = list(delta_v1(_turn(["Hel", "lo", "!"], _completed("Hello!"))))
    skeleton = {
        "id": "turn-1",
        "author": {"role": "assistant", "name": None, "metadata": {}},
        "create_time": 1.7e9,
        "update_time": None,
        "content": {"content_type": "text", "parts": [""]},
        "status": "in_progress",
        "end_turn": None,
        "weight": 1.0,
        "metadata": {},
        "recipient": "all",
    }
    finish = {"is_complete": True, "finish_details": {"type": "stop"}}
    assert items == [
        "v1",
        {"p": "", "o": "add", "v": {"message": skeleton, "conversation_id": "sess-1"}, "c": 0},
        {"p": "/message/content/parts/0", "o": "append", "v": "Hel"},
        {"v": "lo"},
        {"v": "!"},
        {
            "p": "",
            "o": "patch",
            "v": [
                {"p": "/message/status", "o": "replace", "v": "finished_successfully"},
                {"p": "/message/end_turn", "o": "replace", "v": True},
                {"p": "/message/metadata", "o": "append", "v": finish},
            ],
        },
        "[DONE]",
    ]


def test_apply_delta_v1_rebuilds_the_turns_text():
    events = _turn(["The sum", " is", " 3."], _completed("The sum is 3."), tool=True)
    document = apply_delta_v1(delta_v1(events, conversation_id="conv-9"))
    message = document["message"]
    assert document["conversation_id"] == "conv-9"
    assert message["content"]["parts"] == [Response(events).text()]
    assert (message["status"], message["end_turn"]) == ("finished_successfully", True)
    assert message["metadata"] == {"is_complete": True, "finish_details": {"type": "stop"}}


@pytest.mark.parametrize(
    ("terminal", "status", "finish", "end_turn"),
    [
        (_completed("Hello", "length"), "finished_successfully", "max_tokens", False),
        (Cancelled(text="Hello"), "finished_partial_completion", "interrupted", True),
        (Failed(error="engine_error", message="Out of memory.", text="Hello"), "finished_with_error", "error", True),
    ],
)
def test_apply_delta_v1_shows_how_the_turn_ended(terminal, status, finish, end_turn):
    message = apply_delta_v1(delta_v1(_turn(["Hel", "lo"], terminal)))["message"]
    assert message["content"]["parts"] == ["Hello"]
    outcome = {"status": status, "finish": finish, "end_turn": end_turn}
    assert outcome == {
        "status": message["status"],
        "finish": message["metadata"]["finish_details"]["type"],
        "end_turn": message["end_turn"],
    }


def test_delta_v1_failure_keeps_the_streamed_text_and_records_the_error():
    document = apply_delta_v1(delta_v1(_turn(["Hel"], Failed(error="engine_error", message="Out of memory."))))
    assert document["message"]["content"]["parts"] == ["Hel"]
    assert document["error"] == "Out of memory."


def test_delta_v1_closing_patch_appends_a_tail_or_replaces_a_revised_text():
    items = list(delta_v1(_turn(["Hel"], _completed("Hello"))))
    assert items[-2]["v"][0] == {"p": "/message/content/parts/0", "o": "append", "v": "lo"}
    items = list(delta_v1(_turn(["my mail is a@b.c"], _completed("my mail is [email]"))))
    assert items[-2]["v"][0] == {"p": "/message/content/parts/0", "o": "replace", "v": "my mail is [email]"}
    assert apply_delta_v1(items)["message"]["content"]["parts"] == ["my mail is [email]"]


def test_delta_v1_sse_frames_like_the_web_backend_and_parses_back():
    events = _turn(["Hel", "lo\n", "there"], _completed("Hello\nthere"))
    frames = list(delta_v1_sse(events))
    assert frames[0] == 'event: delta_encoding\ndata: "v1"\n\n'
    assert frames[-1] == "data: [DONE]\n\n"
    parsed = parse_sse("".join(frames))
    assert [name for name, _ in parsed] == ["delta_encoding"] + ["delta"] * 5 + [None]
    items = [data if data == "[DONE]" else json.loads(data) for _, data in parsed]
    assert items == list(delta_v1(events))
    assert apply_delta_v1(items)["message"]["content"]["parts"] == ["Hello\nthere"]


def test_apply_delta_v1_rejects_a_bare_patch_with_nothing_before_it():
    with pytest.raises(ValueError, match="no earlier patch"):
        apply_delta_v1([{"v": "Hi"}])


# ---- SSE and JSON lines ------------------------------------------------------------------------------------------


def test_sse_frames_json_compactly_and_done_bare():
    frames = list(sse([{"a": 1, "b": "é"}, "[DONE]"], event="chunk"))
    assert frames == ['event: chunk\ndata: {"a":1,"b":"é"}\n\n', "data: [DONE]\n\n"]


def test_sse_round_trips_data_with_line_breaks():
    items = ["one\ntwo", "crlf\r\nline", "trailing\n", "", {"text": "a\nb"}, "[DONE]"]
    parsed = parse_sse("".join(sse(items, event="message")))
    assert parsed[:4] == [
        ("message", "one\ntwo"),
        ("message", "crlf\nline"),
        ("message", "trailing\n"),
        ("message", ""),
    ]
    assert json.loads(parsed[4][1]) == {"text": "a\nb"}
    assert parsed[5] == (None, "[DONE]")
    assert sse_frame("a\nb") == "data: a\ndata: b\n\n"


def test_sse_event_name_cannot_break_a_line():
    with pytest.raises(ValueError, match="line break"):
        sse_frame("x", event="a\nb")


def test_parse_sse_follows_the_spec_edges():
    text = ": keep-alive\n\nevent:x\ndata:no space\ndata\n\nid: 7\n\ndata: unterminated"
    assert parse_sse(text) == [("x", "no space\n")]


def test_event_lines_round_trip_the_events():
    events = _turn(["Hel", "lo"], _completed("Hello"), tool=True)
    lines = list(event_lines(events))
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    assert [event_from_dict(json.loads(line)) for line in lines] == events


# ---- laziness and replay -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("adapter", "count"),
    [
        (lambda events: openai_chunks(events, model="tiny"), 3),  # role chunk, "Hel", "lo"
        (delta_v1, 4),  # "v1", add, append "Hel", {"v": "lo"}
        (delta_v1_sse, 4),
        (lambda events: sse(openai_chunks(events, model="tiny")), 3),
        (event_lines, 4),
    ],
)
def test_adapters_stream_before_the_turn_ends(adapter, count):
    events = _turn(["Hel", "lo", "!"], _completed("Hello!"))
    stream = adapter(_raising_after(events, 4))  # TurnStarted, PrefillDone, "Hel", "lo", then the source fails
    firsts = [next(stream) for _ in range(count)]
    assert len(firsts) == count
    with pytest.raises(RuntimeError, match="read past"):
        list(stream)


def test_adapters_read_a_response_and_replay_it():
    response = Response(iter(_turn(["Hel", "lo"], _completed("Hello"))))
    first = list(openai_chunks(response, model="tiny"))
    assert list(openai_chunks(response, model="tiny")) == first
    assert _content(first) == response.text()
