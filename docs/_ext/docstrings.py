"""The package's docstrings as reStructuredText for autodoc.

The docstrings are written with Markdown's habits: `code` in single backticks, `**bold**`, `-` lists, `>>>`
examples, and characters reST reads as markup (`|`, `*`, a word ending in `_`). Each docstring is turned into reST
that says the same (code spans as inline literals, the rest escaped), then parsed once on its own: one that would
still give a docutils warning is shown as preformatted text instead, so a new docstring never breaks the build.
"""

from __future__ import annotations

import io
import re

from docutils.core import publish_doctree

CODE = re.compile(r"(`+)(.+?)\1")  # a Markdown code span: the same number of backticks on both sides
BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
ESCAPED = str.maketrans({"\\": "\\\\", "*": "\\*", "|": "\\|", "_": "\\_", "`": "\\`"})
OPENS = " \t\"'([{<-/:"  # what may stand before inline markup's start without an escaped space
CLOSES = " \t\"')]}>-/:.,;!?\\"  # and after its end


def to_rest(lines: list[str]) -> list[str]:
    """The docstring's lines in reST; `>>>` examples (to the next blank line) are kept as they are."""
    out, in_example = [], False
    for line in lines:
        in_example = line.lstrip().startswith(">>>") or (in_example and bool(line.strip()))
        out.append(line if in_example else _inline(line))
    return out


def _inline(line: str) -> str:
    pieces, at = [], 0
    for match in CODE.finditer(line):
        pieces.append(_plain(line[at : match.start()]))
        pieces.append(_separated(line, match.start(), match.end(), f"``{match.group(2).strip()}``"))
        at = match.end()
    pieces.append(_plain(line[at:]))
    return "".join(pieces)


def _plain(text: str) -> str:
    """Text outside code spans: `**bold**` kept, every other markup character escaped."""
    pieces, at = [], 0
    for match in BOLD.finditer(text):
        pieces.append(text[at : match.start()].translate(ESCAPED))
        pieces.append(_separated(text, match.start(), match.end(), f"**{match.group(1).translate(ESCAPED)}**"))
        at = match.end()
    pieces.append(text[at:].translate(ESCAPED))
    return "".join(pieces)


def _separated(text: str, start: int, end: int, markup: str) -> str:
    """`markup` with an escaped space on each side where reST would not otherwise see it as markup ("`Probe`s")."""
    before = "\\ " if start > 0 and text[start - 1] not in OPENS else ""
    after = "\\ " if end < len(text) and text[end] not in CLOSES else ""
    return before + markup + after


def parses_cleanly(lines: list[str], env: object = None) -> bool:
    """Whether docutils reads the reST (and resolves its references) without a warning or an error. Inside a Sphinx
    build, `env` is its environment, which the roles Sphinx registers with docutils read from the settings."""
    stream = io.StringIO()
    settings = {"report_level": 2, "halt_level": 5, "warning_stream": stream, "env": env}
    publish_doctree("\n".join(lines), settings_overrides=settings)
    return not stream.getvalue()


def process_docstring(app, what, name, obj, options, lines: list[str]) -> None:  # type: ignore[no-untyped-def]
    """autodoc's hook: the docstring's lines replaced in place."""
    if not lines:
        return
    rest = to_rest(lines)
    if not parses_cleanly(rest, app.env):
        rest = ["::", "", *(f"    {line}" for line in lines), ""]
    lines[:] = rest


def setup(app):  # type: ignore[no-untyped-def]
    app.connect("autodoc-process-docstring", process_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
