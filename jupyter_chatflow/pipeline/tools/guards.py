"""Two stated rules that end a string argument the model does not end itself while it writes a call under the mask.

A JSON-schema mask keeps a call valid, but it cannot make a small model close a string: inside a string almost
every character is allowed, so a model that "closes" the call with `}}</tool_call>` but forgets the quote before
it writes those characters into the string, and then goes on (SmolLM2-135M, asked for `calculator(expression)`:
`"17*23}}</tool_call>  # 17*23 = 422.222.222.222…` to the token limit). Two rules, applied by
`ToolCallConstraint` to every string it decodes:

- **unclosed** — a string that comes to end with the call's closing tag (`</tool_call>`, which no argument
  holds) ended where the model closed the call: the string ends before the tag and the brackets the model wrote
  before it, and the call is closed there with the quote and the brackets it needs (`"17*23"}}`). Applied only
  when the grammar accepts that end (every required argument present); otherwise the model writes on.
- **repeat** — a string whose last `REPEAT_SPAN` characters are one piece of at most `REPEAT_UNIT` characters
  repeated (`.222.222…`, `aaaa…`) is closed at the next token: the mask lets through only tokens that begin with
  the closing quote (where the grammar allows one). What the model wrote stays in the string.

A call's `guard` says which rule, if any, ended one of its strings; the views show it.
"""

from __future__ import annotations

import re

from jupyter_chatflow.events import CallGuard

from .calls import CALL_CLOSE

__all__ = ["REPEAT_SPAN", "REPEAT_UNIT", "TAIL", "CallGuard", "JsonWatch", "repeating", "unclosed_end"]

REPEAT_UNIT = 16
"""The longest repeated piece the repeat rule looks for, in characters."""
REPEAT_SPAN = 48
"""How many characters at the end of a string the repeated piece must cover (so at least 3 repeats)."""
TAIL = 256
"""How much of an open string `JsonWatch` keeps: its end is all the rules read."""

_CLOSING = {"{": "}", "[": "]"}
_TRAILING = re.compile(r"[\s}\]]*$")


class JsonWatch:
    """Follows a call's text character by character: which brackets are open, whether a string is, and its text.

    >>> watch = JsonWatch()
    >>> watch.feed('<tool_call>\\n{"name": "calculator", "arguments": {"expression": "17*23')
    >>> watch.in_string, watch.string, watch.closers()
    (True, '17*23', '}}')
    """

    def __init__(self) -> None:
        self.in_string = False
        self.string = ""
        """The end of the open string's text so far (its last `TAIL` characters, as written, escapes included); ""
        when none is open."""
        self._escaped = False
        self._open: list[str] = []  # brackets open outside strings, innermost last

    def feed(self, text: str) -> None:
        """Take the next characters of the call's text."""
        for char in text:
            if self.in_string:
                self._in_string(char)
            elif char == '"':
                self.in_string, self.string = True, ""
            elif char in _CLOSING:
                self._open.append(char)
            elif char in "}]" and self._open:
                self._open.pop()
        self.string = self.string[-TAIL:]

    def _in_string(self, char: str) -> None:
        if self._escaped:
            self._escaped = False
        elif char == "\\":
            self._escaped = True
        elif char == '"':
            self.in_string, self.string = False, ""
            return
        self.string += char

    @property
    def can_close(self) -> bool:
        """A quote now would close the open string (not escape a character)."""
        return self.in_string and not self._escaped

    def closers(self) -> str:
        """The brackets that close what is open, innermost first."""
        return "".join(_CLOSING[b] for b in reversed(self._open))


def repeating(string: str) -> bool:
    """True when the last `REPEAT_SPAN` characters of `string` are one piece of at most `REPEAT_UNIT` repeated.

    >>> repeating("17*23 = 422" + ".222" * 12), repeating("17*23 = 422" + ".222" * 3)
    (True, False)
    """
    if len(string) < REPEAT_SPAN:
        return False
    tail = string[-REPEAT_SPAN:]
    return any(tail[size:] == tail[:-size] for size in range(1, REPEAT_UNIT + 1))


def unclosed_end(string: str, closers: str) -> int | None:
    """Where a string that ends with `</tool_call>` should have ended (its length without the tag, the brackets
    before it that close the call, at most `closers`' count, and the spaces between); None if it does not end so.

    >>> unclosed_end("17*23}}</tool_call>", "}}"), unclosed_end("x = {}}}</tool_call>", "}}")
    (5, 6)
    """
    if not string.endswith(CALL_CLOSE):
        return None
    body = string[: -len(CALL_CLOSE)]
    trailing = _TRAILING.search(body)
    end = trailing.start() if trailing else len(body)
    brackets = 0
    for index in range(len(body) - 1, end - 1, -1):  # the model's own closing brackets, as many as are open
        if body[index] in "}]":
            if brackets == len(closers):
                return index + 1
            brackets += 1
    return end
