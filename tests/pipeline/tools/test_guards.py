"""The string rules of a call under the mask, on text alone: where a string is, when it repeats, where it should
have ended when the model wrote the call's end inside it."""

from __future__ import annotations

import pytest

from jupyter_chatflow.pipeline.tools.guards import REPEAT_SPAN, TAIL, JsonWatch, repeating, unclosed_end

CALL = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "'


def test_the_watch_follows_strings_escapes_and_brackets():
    watch = JsonWatch()
    watch.feed(CALL + '2 * \\"x\\"')
    assert watch.in_string and watch.can_close and watch.string == '2 * \\"x\\"' and watch.closers() == "}}"
    watch.feed("\\")  # a quote now would be escaped, not close the string
    assert watch.in_string and not watch.can_close
    watch.feed('""}')
    assert not watch.in_string and watch.string == "" and watch.closers() == "}"
    watch.feed(', "list": [1, {"a": "b}]')  # brackets inside a string are text
    assert watch.in_string and watch.closers() == "}]}"


def test_the_watch_keeps_only_the_end_of_a_long_string():
    """A runaway string can be thousands of characters: the rules read its end, so that is all that is kept."""
    watch = JsonWatch()
    watch.feed(CALL + "x" * 5000)
    assert watch.in_string and watch.string == "x" * TAIL


@pytest.mark.parametrize(
    ("string", "repeats"),
    [
        ("17*23 = 422" + ".222" * 12, True),  # SmolLM2-135M's runaway: a 4-character piece, 48 characters of it
        ("17*23 = 422" + ".222" * 11, False),  # 44 characters: not yet
        ("=" * REPEAT_SPAN, True),
        ("abcdefghijklmnop" * 3, True),  # a 16-character piece 3 times
        ("abcdefghijklmnopq" * 3, False),  # 17 characters: longer than a piece the rule looks for
        ("The quick brown fox jumps over the lazy dog, twice over the lazy dog.", False),
    ],
)
def test_repeating_means_one_short_piece_over_the_last_48_characters(string, repeats):
    assert repeating(string) is repeats


@pytest.mark.parametrize(
    ("string", "closers", "end"),
    [
        ("17*23}}</tool_call>", "}}", 5),  # the reproduction: the string ends before the model's `}}`
        ("17*23 }} </tool_call>", "}}", 5),  # spaces between go too
        ("x = {}}}</tool_call>", "}}", 6),  # only as many brackets as the call needs: the code keeps its own `}`
        ("17*23</tool_call>", "}}", 5),  # no brackets written: they are added
        ("17*23}}", "}}", None),  # no tag: not the call's end
        ("17*23}}</tool_call", "}}", None),  # the tag not whole yet
    ],
)
def test_unclosed_end_is_before_the_tag_and_the_brackets_that_close_the_call(string, closers, end):
    assert unclosed_end(string, closers) == end
