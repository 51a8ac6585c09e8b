"""The panel's looks inside a finished turn (`inside_requests.py`): the `lens` and `why` requests answered with the
model's own `lens` and `attribution` over the turn's ids, per segment sums that add up, progress while integrated
gradients run, and an error reply the view shows for what cannot be looked into. On the tiny random model (its
vocabulary is small, so the whole ranking of a row is known and the rank of each token of a `series` can be checked)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from jupyter_chatflow.events import ContextAssembled, Run, Segment, TokenDelta, Tokenized
from jupyter_chatflow.frontends.panel import inside_requests
from jupyter_chatflow.frontends.panel.inside_requests import rounds_of, segment_sums, settled_row
from jupyter_chatflow.frontends.panel.widget import ChatWidget
from jupyter_chatflow.pipeline.chat import Chat
from jupyter_chatflow.store.database import Database

from .test_widget import QUICK, Recorder, message


@pytest.fixture(scope="module")
def looked(tiny_model, tmp_path_factory):
    """A panel over the tiny model with one finished turn: (panel, the turn's events, its prompt ids, its answer
    tokens)."""
    tiny_model.prompt_cache.clear()
    chat = Chat(model=tiny_model, db=Database(tmp_path_factory.mktemp("inside") / "chat.db"), session="inside")
    panel = ChatWidget(chat, settings={**QUICK, "max_tokens": 6})
    panel.send = Recorder()  # type: ignore[method-assign]
    response = panel.ask("Hello there")
    panel.wait(60)
    events = list(response)
    prompt = list(next(e for e in events if isinstance(e, Tokenized)).ids)
    tokens = [e for e in events if isinstance(e, TokenDelta)]
    return panel, events, prompt, tokens


def ask(panel: ChatWidget, **content) -> tuple[dict, list]:
    """Send a view's request, wait for the engine thread, return the reply (the one non-progress message)."""
    before = len(panel.send.messages)
    message(panel, **content)
    panel.chat.submit(lambda: None).result(120)  # (the look ran before this)
    replies = [(c, b) for c, b in panel.send.messages[before:] if c["type"] != "inside_progress"]
    assert len(replies) == 1, replies
    return replies[0]


def arrays(reply: dict, buffers: list) -> dict[str, np.ndarray]:
    dtypes = {"int32": "<i4", "float32": "<f4"}
    return {a["name"]: np.frombuffer(data, dtypes[a["dtype"]]).reshape(a["shape"])
            for a, data in zip(reply["arrays"], buffers, strict=True)}  # fmt: skip


def test_the_lens_reply_is_the_models_lens_at_each_answer_tokens_position(looked, tiny_model):
    panel, events, prompt, tokens = looked
    reply, buffers = ask(panel, type="lens", request_id="l1", turn_id=events[0].turn_id)
    got = arrays(reply, buffers)
    sequence = prompt + [t.token_id for t in tokens[:-1]]
    vocab = tiny_model.config.vocab_size
    whole = tiny_model.lens(sequence, k=vocab)  # every row's whole ranking
    rows = tiny_model.config.n_layers + 1
    n = len(tokens)
    assert reply["type"] == "lens" and reply["request_id"] == "l1" and reply["layers"] == rows - 1
    assert reply["indices"] == [t.index for t in tokens]
    assert reply["positions"] == list(range(len(prompt) - 1, len(prompt) - 1 + n))
    assert got["top_ids"].shape == (n, rows, 5) and got["series_ranks"].shape[::2] == (n, rows)
    depth = reply["depth"]
    assert depth == vocab  # (every rank is known)
    for i, token in enumerate(tokens):
        at = len(prompt) - 1 + i
        assert np.array_equal(got["top_ids"][i], whole.top_ids[:, at, :5])
        np.testing.assert_allclose(got["top_logprobs"][i], whole.top_logprobs[:, at, :5], atol=1e-5)
        series = [t for t in reply["series"][i] if t >= 0]
        assert series[0] == token.token_id and set(series) == {
            token.token_id,
            *(a.token_id for a in token.alternatives),
        }
        for m, token_id in enumerate(series):
            rank = np.argmax(whole.top_ids[:, at, :] == token_id, axis=1) + 1  # (every id is in the whole ranking)
            known = rank <= depth
            assert np.array_equal(got["series_ranks"][i, m], np.where(known, rank, 0))
            exact = whole.top_logprobs[np.arange(rows), at, rank - 1]
            np.testing.assert_allclose(got["series_logprobs"][i, m][known], exact[known], atol=1e-5)
            assert np.isnan(got["series_logprobs"][i, m][~known]).all()
        tops = whole.top_ids[:, at, 0]
        stays = [r for r in range(rows) if all(tops[r:] == token.token_id)]
        assert reply["settled"][i] == (stays[0] if stays else -1)
    # the prompt's positions: the model's own next-token choice after each, and the row from which it was
    assert reply["prompt_tokens"] == len(prompt)
    assert reply["prompt_top"] == whole.top_ids[-1, : len(prompt), 0].tolist()
    np.testing.assert_allclose(got["prompt_logprobs"], whole.top_logprobs[-1, : len(prompt), 0], atol=1e-5)
    tokenized = next(e for e in events if isinstance(e, Tokenized))
    context = next(e for e in events if isinstance(e, ContextAssembled))
    user = [r for r in tokenized.provenance if context.segments[r.segment].kind == "user"]
    assert reply["message_end"] == user[-1].end - 1
    pieces = reply["pieces"]
    assert {str(i) for i in np.unique(got["top_ids"])} <= set(pieces) and str(tokens[0].token_id) in pieces
    assert reply["compute_ms"] > 0 and reply["compile_ms"] >= 0


def test_why_is_the_models_attribution_and_each_segment_sums_its_tokens(looked, tiny_model):
    panel, events, prompt, tokens = looked
    index = 3
    reply, buffers = ask(panel, type="why", request_id="w1", turn_id=events[0].turn_id, index=index,
                         method="grad_x_input")  # fmt: skip
    ids = prompt + [t.token_id for t in tokens[:index]]
    expected = tiny_model.attribution(ids, tokens[index].token_id)
    assert buffers == [] and reply["ids"] == ids and reply["prompt_tokens"] == len(prompt)
    assert reply["target_id"] == tokens[index].token_id and reply["target_logprob"] == tokens[index].logprob
    assert reply["steps"] == 0 and reply["contrast_id"] is None and reply["note"] == ""
    np.testing.assert_allclose(reply["values"], expected, rtol=1e-5, atol=1e-7)
    values, column = np.asarray(reply["values"]), np.asarray(reply["column"])
    assert [s["kind"] for s in reply["segments"]][-1] == "generated"  # the answer before the token
    assert np.all(column[len(prompt) :] == len(reply["segments"]) - 1)
    for k, segment in enumerate(reply["segments"]):
        assert segment["tokens"] == int((column == k).sum())
        assert segment["value"] == pytest.approx(values[column == k].sum(), abs=1e-6)
    assert sum(s["value"] for s in reply["segments"]) == pytest.approx(reply["total"], abs=1e-6)
    assert reply["total"] == pytest.approx(values.sum(), abs=1e-6)
    # the segments are the prompt's provenance: the user's message is its tokens
    tokenized = next(e for e in events if isinstance(e, Tokenized))
    context = next(e for e in events if isinstance(e, ContextAssembled))
    user = next(k for k, s in enumerate(reply["segments"]) if s["kind"] == "user")
    runs = [r for r in tokenized.provenance if context.segments[r.segment].kind == "user"]
    assert reply["segments"][user]["tokens"] == sum(r.end - r.start for r in runs)


def test_why_rather_than_an_alternative_attributes_the_difference(looked, tiny_model):
    panel, events, prompt, tokens = looked
    token = tokens[2]
    other = next(a for a in token.alternatives if a.token_id != token.token_id)
    reply, _ = ask(panel, type="why", request_id="w2", turn_id=events[0].turn_id, index=2, method="grad_x_input",
                   contrast_token_id=other.token_id)  # fmt: skip
    ids = prompt + [t.token_id for t in tokens[:2]]
    expected = tiny_model.attribution(ids, token.token_id, contrast_id=other.token_id)
    np.testing.assert_allclose(reply["values"], expected, rtol=1e-5, atol=1e-7)
    assert reply["contrast_id"] == other.token_id and reply["contrast_logprob"] == other.logprob
    assert [s["kind"] for s in reply["segments"]][-1] == "generated"


def test_integrated_gradients_report_their_steps_as_they_go(looked, tiny_model):
    panel, events, prompt, tokens = looked
    before = len(panel.send.messages)
    reply, _ = ask(panel, type="why", request_id="w3", turn_id=events[0].turn_id, index=0,
                   method="integrated_gradients", steps=8)  # fmt: skip
    with warnings.catch_warnings():  # (the quadrature's gap on this model: docs/inside.md; the reply says it)
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = tiny_model.attribution(prompt, tokens[0].token_id, method="integrated_gradients", steps=8)
    np.testing.assert_allclose(reply["values"], expected, rtol=1e-4, atol=1e-6)
    assert reply["steps"] == 8 and reply["method"] == "integrated_gradients"
    assert "integrated gradients' positions add up to" in reply["note"]  # (the model's warning, for the view)
    assert [s["kind"] for s in reply["segments"]][-1] != "generated"  # the first token: no answer before it
    progress = [c for c, _ in panel.send.messages[before:] if c["type"] == "inside_progress"]
    assert all(p["request_id"] == "w3" and p["request"] == "why" for p in progress)
    steps = [(p["done"], p["total"]) for p in progress if p["total"]]
    assert steps[-1] == (8, 8) and steps == sorted(steps)
    assert progress and panel.send.messages.index((reply, [])) > before + len(progress) - 1  # (the reply last)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ({"turn_id": "turn_nope", "index": 0}, "No turn 'turn_nope' in this panel."),
        ({"index": 99}, "This turn has no answer token 99 (it has 6)."),
        ({"index": 1, "contrast_token_id": "self"}, "The contrast is the token itself"),
    ],
)  # fmt: skip
def test_what_cannot_be_looked_into_gets_an_error_reply_the_view_shows(looked, content, said):
    panel, events, _, tokens = looked
    content = {"type": "why", "request_id": "e1", "turn_id": events[0].turn_id, "method": "grad_x_input",
               **content}  # fmt: skip
    if content.get("contrast_token_id") == "self":
        content["contrast_token_id"] = tokens[1].token_id
    reply, buffers = ask(panel, **content)
    assert reply == {"type": "inside_error", "request_id": "e1", "request": "why", "message": reply["message"]}
    assert said in reply["message"] and buffers == []


def test_a_malformed_look_is_refused_by_the_protocol(looked):
    panel, events, _, _ = looked
    before = len(panel.send.messages)
    message(panel, type="why", request_id="m", turn_id=events[0].turn_id, index=0, method="saliency")
    [(reply, _)] = panel.send.messages[before:]
    assert (
        reply["type"] == "request_error"
        and "method must be one of 'grad_x_input', 'integrated_gradients'" in (reply["message"])
    )


def test_a_live_turn_and_a_remote_chat_cannot_be_looked_into():
    remote = Chat(base_url="http://127.0.0.1:9/v1", model="gpt-x", persist=False)
    sent = Recorder()
    looks = inside_requests.InsideLooks(remote, sent)
    looks.request({"type": "lens", "request_id": "r", "turn_id": "t"}, [])
    [(reply, _)] = sent.messages
    assert reply["type"] == "inside_error" and "answered by a server (http://127.0.0.1:9/v1)" in reply["message"]
    live = [Tokenized(ids=(1, 2), provenance=(), sequence_number=2, turn_id="t")]  # (no terminal event yet)
    with pytest.raises(inside_requests.InsideRequestError, match="still generating"):
        inside_requests.finished_rounds(live)


def test_a_tool_turns_tokens_belong_to_the_round_they_were_answered_in():
    """A tool call ends a round; the answer after its result is the next round's, read after a longer prompt (the
    call and its result, between the rounds, carry no tokens). Segments are in the context's order."""
    seg = (Segment(kind="system", label="system", tokens=2), Segment(kind="user", label="user", tokens=2),
           Segment(kind="template", label="chat template", tokens=2), Segment(kind="tool", label="tool result",
                                                                            tokens=2))  # fmt: skip
    context = ContextAssembled(window=64, reserved_output=8, budget=56, prompt_tokens=6, segments=seg,
                               sequence_number=1, turn_id="t")  # fmt: skip

    def token(index: int, token_id: int) -> TokenDelta:
        return TokenDelta(index=index, token_id=token_id, text="x", logprob=-0.1, entropy=0.1, sequence_number=0,
                          turn_id="t")  # fmt: skip

    first = Tokenized(ids=(1, 2, 3, 4, 5, 6), provenance=(Run(segment=2, start=0, end=1), Run(segment=0, start=1,
                      end=3), Run(segment=1, start=3, end=5), Run(segment=2, start=5, end=6)), sequence_number=2,
                      turn_id="t")  # fmt: skip
    second = Tokenized(ids=(1, 2, 3, 4, 5, 6, 7, 8), provenance=(*first.provenance, Run(segment=3, start=6, end=8)),
                       sequence_number=6, turn_id="t")  # fmt: skip
    events = [context, first, token(0, 40), context, second, token(1, 41), token(2, 42)]  # (the call, its result)
    rounds = rounds_of(events)
    assert [len(r.ids) for r in rounds] == [6, 8]
    assert [[t.index for t in r.tokens] for r in rounds] == [[0], [1, 2]]
    assert rounds[0].segments == [("system", "system"), ("user", "user"), ("chat template", "template")]
    assert rounds[1].column.tolist() == [2, 0, 0, 1, 1, 2, 3, 3] and rounds[1].message_end == 4
    assert inside_requests.why_input(rounds, 2) == (rounds[1], 1)


def test_the_helpers_find_the_row_a_token_settled_at_and_sum_segments():
    top = np.array([5, 7, 5, 9, 9, 9])
    assert settled_row(top, 9) == 3 and settled_row(top, 5) == -1 and settled_row(np.array([9, 9]), 9) == 0
    assert segment_sums(np.array([1.0, 2.0, 4.0], np.float32), np.array([1, 0, 1]), 3).tolist() == [2.0, 5.0, 0.0]


def test_a_look_the_engine_cannot_take_ends_with_an_error_reply_and_its_clock_stops(looked):
    panel, events, _, _ = looked

    class Closed:
        abilities = panel.chat.abilities

        def submit(self, *args):
            raise RuntimeError("the chat is closed")

    sent = Recorder()
    look = inside_requests.InsideLooks(Closed(), sent).request({"type": "lens", "request_id": "c", "turn_id": "t"},
                                                               events)  # fmt: skip
    look._clock.join(2)
    assert not look._clock.is_alive()
    [(reply, _)] = [(c, b) for c, b in sent.messages if c["type"] != "inside_progress"]
    assert reply["type"] == "inside_error" and "the chat is closed" in reply["message"]
