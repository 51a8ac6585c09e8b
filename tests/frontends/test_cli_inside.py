"""`chatflow lens` and `chatflow why` print what `Model.lens` and `Model.attribution` compute, for scripts too."""

from __future__ import annotations

import json

import numpy as np

from jupyter_chatflow import load_model
from jupyter_chatflow.frontends.cli import main

TEXT = "the theater in the sea"


def test_lens_json_is_the_models_lens_with_each_token_spelled(tiny_path, capsys):
    assert main(["lens", "--model", str(tiny_path), "--json", "--k", "3", TEXT]) == 0
    said = json.loads(capsys.readouterr().out)
    model = load_model(tiny_path)
    ids = model.tokenizer.encode(TEXT)
    lens = model.lens(ids, k=3)
    assert said["ids"] == ids and "".join(said["pieces"]) == TEXT
    assert said["top_ids"] == lens.top_ids.tolist()
    assert np.allclose(said["top_logprobs"], lens.top_logprobs, atol=1e-5)
    assert said["top_pieces"][-1][-1][0] == model.tokenizer.decode([lens.top_ids[-1, -1, 0]])


def test_lens_text_shows_each_layer_at_the_last_position(tiny_path, capsys):
    assert main(["lens", "--model", str(tiny_path), TEXT]) == 0
    lines = capsys.readouterr().out.splitlines()
    tokenizer = load_model(tiny_path).tokenizer
    ids = tokenizer.encode(TEXT)
    assert lines[0] == f"After {tokenizer.decode(ids[-1:])!r} (position {len(ids) - 1}), each layer's top 5:"
    assert "embeddings" in lines[1]
    assert [line.split()[0:2] for line in lines[2:]] == [["layer", "1"], ["layer", "2"]]  # the tiny model's two


def test_why_explains_the_models_own_choice_against_another(tiny_path, capsys):
    model = load_model(tiny_path)
    ids = model.tokenizer.encode(TEXT)
    top = int(model.logits(ids)[-1].argmax())
    assert main(["why", "--model", str(tiny_path), "--json", "--contrast", "e", TEXT]) == 0
    said = json.loads(capsys.readouterr().out)
    contrast = model.tokenizer.encode("e")[0]
    assert said["target"]["id"] == top and said["contrast"]["id"] == contrast
    expected = model.attribution(ids, top, contrast_id=contrast)
    assert np.allclose(said["attribution"], expected, atol=1e-5) and len(said["attribution"]) == len(ids)


def test_a_target_of_more_than_one_token_is_refused_naming_its_pieces(tiny_path, capsys):
    assert main(["why", "--model", str(tiny_path), "--target", "the sea", TEXT]) == 1
    assert "give one token" in capsys.readouterr().err
