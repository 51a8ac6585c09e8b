"""What the repetition penalty did, as the real model reports it: each alternative says whether the penalty lowered
it and its probability after the penalty alone. A chat turn's penalty counts its answer alone; the engine's (and the
server's, as vLLM's and transformers') counts the prompt too."""

from __future__ import annotations

import itertools
import math

import pytest

from jupyter_chatflow import Chat
from jupyter_chatflow.engine.sampling import SamplingParams
from jupyter_chatflow.events import TokenDelta, Tokenized
from jupyter_chatflow.store.database import Database

OPTIONS = {"temperature": 0.2, "top_p": 0.9, "seed": 1, "memory": False, "repetition_penalty": 1.1}


@pytest.fixture(scope="module")
def follow_up(real_model, tmp_path_factory):
    """A follow-up question's turn at repetition penalty 1.1."""
    chat = Chat(model=real_model, db=Database(tmp_path_factory.mktemp("db") / "c.db"), session="penalty", new=True)
    chat.send("What is the capital of France?", max_tokens=60, **OPTIONS).text()
    return list(chat.send("And of Germany?", max_tokens=40, **OPTIONS))


def lowered_exactly_when_seen(alternatives, seen: set[int]) -> None:
    """Each alternative is marked lowered exactly when the penalty counts it, and the penalty leaves the ratios of
    the others as the model gave them."""
    assert [a.penalized for a in alternatives] == [a.token_id in seen for a in alternatives]
    free = [a for a in alternatives if not a.penalized]
    for a, b in itertools.pairwise(free):
        assert a.penalized_logprob - b.penalized_logprob == pytest.approx(a.logprob - b.logprob, abs=1e-3)


def test_a_chats_penalty_counts_its_answer_not_its_prompt(follow_up):
    """The system prompt and the conversation hold every common word: a chat's penalty leaves them be."""
    prompt = set(next(e for e in follow_up if isinstance(e, Tokenized)).ids)
    seen: set[int] = set()
    lowered_in_prompt = 0
    for token in (e for e in follow_up if isinstance(e, TokenDelta)):
        lowered_exactly_when_seen(token.alternatives, seen)
        lowered_in_prompt += sum(a.token_id in prompt and not a.penalized for a in token.alternatives)
        seen.add(token.token_id)
    assert lowered_in_prompt > 0  # alternatives in the prompt, left as the model gave them


def test_the_engines_penalty_counts_the_prompt_and_can_choose_the_token(real_model, follow_up):
    """The issue's case, with the engine's own penalty over the whole prompt: the model's favourite was in the
    prompt, the penalty lowered it, another token won, and its probability after the penalty says so."""
    ids = list(next(e for e in follow_up if isinstance(e, Tokenized)).ids)
    params = SamplingParams(temperature=0.2, top_p=0.9, seed=1, repetition_penalty=1.1, max_tokens=40)
    seen, chosen_by_penalty = set(ids), False
    for step in real_model.generate(ids, params=params):
        lowered_exactly_when_seen(step.top_alternatives, seen)
        top = max(step.top_alternatives, key=lambda a: a.logprob)
        chosen = next((a for a in step.top_alternatives if a.token_id == step.token_id), None)
        if top.penalized and chosen is not None and chosen is not top:
            assert chosen.penalized_logprob > chosen.logprob and top.penalized_logprob < top.logprob
            chosen_by_penalty |= math.exp(chosen.penalized_logprob) > math.exp(top.penalized_logprob)
        seen.add(step.token_id)
    assert chosen_by_penalty, "no token was chosen by the penalty over the prompt (the model's favourite won)"
