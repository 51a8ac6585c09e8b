"""Tool calls decoded under the JSON-schema token mask: whatever the logits, the call parses and validates."""

from __future__ import annotations

from typing import Literal

import jsonschema
import numpy as np
import pytest

from jupyter_chatflow.pipeline.tools import (
    Tool,
    ToolCallConstraint,
    ToolError,
    calculator,
    call_schema,
    evaluate,
    parse_tool_call,
    tool,
    tools_system_prompt,
)
from jupyter_chatflow.pipeline.tools.constrained import lltokenizer


@tool
def weather(city: str, unit: Literal["c", "f"] = "c", days: int = 1, alerts: bool = False) -> str:
    """The weather in a city."""
    return "sunny"


@tool
def plot(values: list[float], title: str | None = None) -> str:
    """Plot some numbers."""
    return "ok"


TOOLS = [calculator, weather, plot]
FINITE = Tool(  # a call of this one has a bounded length, so even random sampling finishes it
    name="switch",
    description="Turn a light on or off.",
    parameters={
        "type": "object",
        "properties": {"room": {"enum": ["kitchen", "hall"]}, "on": {"type": "boolean"}},
        "required": ["room", "on"],
        "additionalProperties": False,
    },
    function=lambda room, on: f"{room}: {on}",
)


def drive(constraint: ToolCallConstraint, seed: int, steps: int = 3000) -> str:
    """Sample from random logits masked by allowed(), nudging towards tokens that close strings and objects."""
    rng = np.random.default_rng(seed)
    tokenizer = constraint.tokenizer
    closers = np.array([any(c in tokenizer.token_bytes(i) for c in b'"}],') for i in range(tokenizer.vocab_size)])
    for _ in range(steps):
        if constraint.is_done():
            return constraint.text
        allowed = constraint.allowed()
        assert allowed.dtype == bool and allowed.shape == (constraint.vocab_size,) and allowed.any()
        logits = rng.standard_normal(allowed.size) + 4.0 * closers
        logits[~allowed] = -np.inf
        constraint.advance(int(np.argmax(logits)))
    raise AssertionError(f"no complete call after {steps} steps: {constraint.text[:200]!r}")


def check_call(text: str, tools=TOOLS) -> tuple[str, dict]:
    """The text is one call of one of the tools, with arguments valid for its schema."""
    assert text.rstrip().endswith("</tool_call>")
    name, arguments = parse_tool_call(text)
    chosen = {t.name: t for t in tools}[name]
    jsonschema.validate(arguments, chosen.parameters)
    assert chosen.run(arguments).ok or name == "calculator"  # random expressions may not compute
    return name, arguments


@pytest.mark.parametrize("seed", range(6))
def test_random_logits_give_valid_calls_tiny_vocab(tiny_model, seed):
    constraint = ToolCallConstraint(tiny_model.tokenizer, TOOLS, include_open=seed % 2 == 0)
    text = drive(constraint, seed)
    assert text.startswith("<tool_call>") == (seed % 2 == 0)
    check_call(text)


def test_random_logits_give_valid_calls_real_vocab(real_model_path):
    from jupyter_chatflow.model.gguf_file import read_metadata
    from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_metadata(read_metadata(real_model_path))
    names = set()
    for seed in range(4):
        names.add(check_call(drive(ToolCallConstraint(tokenizer, TOOLS), seed))[0])
    assert names <= {"calculator", "weather", "plot"}


def test_only_forces_the_named_tool(tiny_model):
    for seed in range(3):
        text = drive(ToolCallConstraint(tiny_model.tokenizer, TOOLS, only="weather"), seed)
        assert check_call(text)[0] == "weather"
    with pytest.raises(ToolError, match=r"no tool named 'shell'.*calculator, weather, plot"):
        ToolCallConstraint(tiny_model.tokenizer, TOOLS, only="shell")


def test_a_token_outside_the_mask_is_refused(tiny_model):
    tokenizer = tiny_model.tokenizer
    constraint = ToolCallConstraint(tokenizer, [FINITE], include_open=True)
    allowed = constraint.allowed()
    assert allowed.sum() >= 1 and allowed[tokenizer.encode("<")[0]]
    bad = int(np.flatnonzero(~allowed)[0])
    with pytest.raises(ToolError, match="breaks the tool-call grammar"):
        constraint.advance(bad)


def test_prefix_continues_a_call_the_model_began(tiny_model):
    tokenizer = tiny_model.tokenizer
    constraint = ToolCallConstraint(tokenizer, TOOLS, prefix='\n{"name": "wea')
    text = drive(constraint, seed=0)
    assert text.startswith('\n{"name": "weather", ') and check_call(text)[0] == "weather"
    with pytest.raises(ToolError, match="does not fit"):
        ToolCallConstraint(tokenizer, TOOLS, prefix='{"name": "shell"')


def test_mask_padding_and_tokenizer_cache(tiny_model):
    tokenizer = tiny_model.tokenizer
    assert lltokenizer(tokenizer) is lltokenizer(tokenizer)
    padded = ToolCallConstraint(tokenizer, [FINITE], vocab_size=tokenizer.vocab_size + 7)
    mask = padded.allowed()
    assert mask.shape == (tokenizer.vocab_size + 7,) and not mask[tokenizer.vocab_size :].any()


def test_call_schema_layout():
    schema = call_schema([calculator, weather])
    assert [o["properties"]["name"] for o in schema["anyOf"]] == [{"const": "calculator"}, {"const": "weather"}]
    assert schema["anyOf"][1]["properties"]["arguments"] == weather.parameters
    single = call_schema([calculator, weather], only="calculator")
    assert "anyOf" not in single and single["x-guidance"]["whitespace_flexible"] is False


def test_engine_generates_under_the_constraint(tiny_model):
    tokenizer = tiny_model.tokenizer
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Lights on in the hall"}])
    for seed in range(3):
        constraint = ToolCallConstraint(tokenizer, [FINITE], include_open=True, vocab_size=tiny_model.config.vocab_size)
        generation = tiny_model.generate(prompt, constraint=constraint, temperature=1.0, seed=seed, max_tokens=200)
        text = "".join(step.text for step in generation)
        assert constraint.is_done() and constraint.text.startswith(text)  # a fixed end is taken, not generated
        check_call(constraint.text, [FINITE])


def _smollm_prompt(tokenizer, question: str, tools) -> list[int]:
    messages = [
        {"role": "system", "content": tools_system_prompt(tools, tool_choice="required")},
        {"role": "user", "content": question},
    ]
    return tokenizer.apply_chat_template(messages)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("question", "name", "arguments"),
    [
        ("What's the weather in Paris?", "weather", {"city": "Paris"}),
        ("Tell me the forecast for New York", "weather", {"city": "New York"}),
        ("Calculate 2 to the power of 16", "calculator", 65536),
        ("How much is 1234 + 5678?", "calculator", 6912),
    ],
)
def test_real_model_generate_with_constraint(real_model, question, name, arguments):
    tokenizer = real_model.tokenizer
    tools = [calculator, weather]
    ids = _smollm_prompt(tokenizer, question, tools)
    constraint = ToolCallConstraint(tokenizer, tools, include_open=True, vocab_size=real_model.config.vocab_size)
    fixed = constraint.take_forced()  # `<tool_call>\n{"name": "`, prefilled: the model picks the tool
    steps = real_model.generate([*ids, *fixed], constraint=constraint, temperature=0.0, max_tokens=120)
    generated = "".join(step.text for step in steps)
    text = constraint.text
    assert text.startswith("<tool_call>\n{") and text.endswith("}\n</tool_call>")  # the model's own layout
    assert text.startswith(tokenizer.decode(fixed) + generated)  # then the fixed end, taken without generating
    called, given = check_call(text, tools)
    assert called == name
    assert given["city"] == arguments["city"] if name == "weather" else evaluate(given["expression"]) == arguments


@pytest.fixture(scope="module")
def smollm_tokenizer(real_model_path):
    from jupyter_chatflow.model.gguf_file import read_metadata
    from jupyter_chatflow.tokenizer.tokenizer import Tokenizer

    return Tokenizer.from_metadata(read_metadata(real_model_path))


def _allowed_pieces(constraint: ToolCallConstraint) -> set[str]:
    return {constraint.tokenizer.piece(int(i)) for i in np.flatnonzero(constraint.allowed())}


def test_fixed_text_is_spelled_as_the_tokenizer_spells_it(smollm_tokenizer):
    """SmolLM2 wrote `".17 * 23"` for 17*23: the mask let it spell `": "` as `":`, a bare " ", then `".`, a split
    no text is encoded in. The fixed text now comes as the tokenizer encodes it, the last piece healed."""
    tokenizer = smollm_tokenizer
    constraint = ToolCallConstraint(tokenizer, [calculator], include_open=True)
    fixed = constraint.take_forced()
    assert fixed == tokenizer.encode('<tool_call>\n{"name": "calculator", "arguments": {"expression":')
    allowed = _allowed_pieces(constraint)  # the next token must begin with the rest of the fixed text, ` "`
    assert {' "', ' "(', ' ".'} <= allowed and " " not in allowed and all(p.startswith(' "') for p in allowed)
    for token in tokenizer.encode(' "17 * 23"'):
        constraint.advance(token)
    assert constraint.is_done()  # `}}\n</tool_call>` is fixed: taken, not generated
    call = '{"name": "calculator", "arguments": {"expression": "17 * 23"}}'
    assert constraint.text == f"<tool_call>\n{call}\n</tool_call>"
    assert constraint.forced == len(fixed) + len(tokenizer.encode("}}\n</tool_call>"))
    with pytest.raises(ToolError, match="must begin with"):
        healing = ToolCallConstraint(tokenizer, [calculator], include_open=True)
        healing.take_forced()
        healing.advance(tokenizer.encode(" ")[0])


def test_the_model_chooses_the_tool_then_its_keys_are_fixed(smollm_tokenizer):
    tokenizer = smollm_tokenizer
    constraint = ToolCallConstraint(tokenizer, [calculator, weather], include_open=True)
    assert tokenizer.decode(constraint.take_forced()) == '<tool_call>\n{"name": "'
    names = _allowed_pieces(constraint)  # the name is the model's choice among the tools'
    assert {"calcul", "calc", "weather", "we"} <= names and "plot" not in names
    constraint.advance(tokenizer.encode("weather")[0])
    rest = []  # without take_forced, the fixed tokens come one at a time, each the only one allowed
    while constraint.allowed().sum() == 1:
        token = int(np.flatnonzero(constraint.allowed())[0])
        constraint.advance(token)
        rest.append(token)
    assert tokenizer.decode(rest) == '", "arguments": {"city":'
    with pytest.raises(ToolError, match="the grammar fixes"):
        other = ToolCallConstraint(tokenizer, [calculator, weather], include_open=True)
        other.take_forced()
        other.advance(tokenizer.encode("weather")[0])
        other.advance(tokenizer.encode("}")[0])


def test_a_call_with_nothing_to_choose_is_all_fixed(smollm_tokenizer):
    @tool
    def now() -> str:
        """The time."""
        return "noon"

    constraint = ToolCallConstraint(smollm_tokenizer, [now], include_open=True)
    assert constraint.is_done() and constraint.take_forced() == []
    assert parse_tool_call(constraint.text) == ("now", {}) and constraint.forced == len(constraint.ids)


def _write(constraint: ToolCallConstraint, text: str) -> None:
    """Advance through `text` as the tokenizer encodes it: as a model would have written it."""
    for token in constraint.tokenizer.encode(text):
        constraint.advance(token)


def _value(constraint: ToolCallConstraint, text: str) -> None:
    """Write `text` into the string value the call's fixed beginning opens (whose ` "` it may have left to heal)."""
    head = constraint.text
    _write(constraint, ("" if head.endswith('"') else '"' if head.endswith(" ") else ' "') + text)


@tool
def scribble(expression: str) -> str:
    """Take a note."""  # (no description for the parameter, a schema with no bounds: as users write tools)
    return expression


def test_a_call_ended_inside_its_string_ends_there(tiny_model):
    """SmolLM2-135M on `calculator(expression)` with no description wrote `"17*23}}</tool_call>` and then on to the
    token limit (the mask allows `}}` and the tag inside a string). The unclosed rule ends the string before `}}`
    (the rules read text: the tiny vocabulary shows them as SmolLM2's does)."""
    constraint = ToolCallConstraint(tiny_model.tokenizer, [scribble], include_open=True)
    constraint.take_forced()
    _value(constraint, "17*23}}</tool_call")
    assert not constraint.is_done() and constraint.guard == ""
    _write(constraint, ">")
    assert constraint.is_done() and constraint.guard == "unclosed"
    assert constraint.text == '<tool_call>\n{"name": "scribble", "arguments": {"expression": "17*23"}}\n</tool_call>'
    assert parse_tool_call(constraint.text) == ("scribble", {"expression": "17*23"})


def test_a_call_ended_inside_a_string_writes_on_while_an_argument_is_missing(tiny_model):
    @tool
    def pair(first: str, second: str) -> str:
        """Two notes."""
        return first + second

    constraint = ToolCallConstraint(tiny_model.tokenizer, [pair], include_open=True)
    constraint.take_forced()
    _value(constraint, "a}}</tool_call>")
    assert not constraint.is_done() and constraint.guard == ""  # `second` is required: no end there


def test_a_string_that_repeats_itself_is_closed_at_the_next_token(tiny_model):
    constraint = ToolCallConstraint(tiny_model.tokenizer, [scribble], include_open=True)
    constraint.take_forced()
    _value(constraint, "17*23 = 422" + ".222" * 8)  # 32 characters of the piece: not yet
    assert not all(p.startswith('"') for p in _allowed_pieces(constraint))
    _write(constraint, ".222" * 4)  # 48: the rule closes it
    allowed = _allowed_pieces(constraint)
    assert '"' in allowed and all(p.startswith('"') for p in allowed)
    constraint.advance(tiny_model.tokenizer.encode('"')[0])
    assert constraint.guard == "repeat" and constraint.is_done()  # `}}\n</tool_call>` is fixed from there
    assert parse_tool_call(constraint.text) == ("scribble", {"expression": "17*23 = 422" + ".222" * 12})
