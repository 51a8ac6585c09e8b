"""The turn's options (`settings.OPTIONS`) as each front end spells them: command-line flags for `chatflow chat` and
`%%chat`, `%config ChatMagics.<name>` traits, the panel's settings, and back to the request's keyword arguments.

A flag left out parses to None, which stands for "not given": the magic then takes its trait and the request the
option's default. A bool option that is on by default is turned off with `--no-<name>`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import traitlets

from jupyter_chatflow.settings import OPTIONS, Option


def flag_arguments(option: Option) -> tuple[tuple[str, ...], dict[str, Any]]:
    """(flags, argparse keyword arguments) for one option."""
    shown = _default_text(option)
    help_text = f"{option.help} (default: {shown})" if shown else option.help
    if option.type is bool:
        on = option.default is True
        flag = f"--no-{option.name.replace('_', '-')}" if on else option.flag
        return (flag,), {"dest": option.name, "action": "store_const", "const": not on, "default": None,
                         "help": help_text}  # fmt: skip
    kwargs: dict[str, Any] = {"dest": option.name, "default": None, "help": help_text}
    if option.choices:
        kwargs["choices"] = list(option.choices)
    if option.repeated:
        kwargs.update(action="append", metavar="TEXT")
    elif option.type in (int, float):
        kwargs["type"] = option.type
    return (option.flag,), kwargs


def add_flags(add_argument: Callable[..., Any]) -> None:
    """Add every option's flag with `add_argument` (argparse's, or IPython's `magic_arguments.argument`)."""
    for option in OPTIONS:
        flags, kwargs = flag_arguments(option)
        add_argument(*flags, **kwargs)


def options_given(args: argparse.Namespace) -> dict[str, Any]:
    """The options a command line gave (None: not given)."""
    return {o.name: getattr(args, o.name) for o in OPTIONS if getattr(args, o.name, None) is not None}


def trait(option: Option) -> traitlets.TraitType:
    """A configurable trait for one option (`%config ChatMagics.top_p = 0.5`)."""
    kind: Callable[..., traitlets.TraitType]
    args: tuple[Any, ...] = (option.default,)
    if option.type is bool:
        kind = traitlets.Bool
    elif option.choices:
        kind, args = traitlets.Enum, (list(option.choices), option.default)
    elif option.repeated:
        kind, args = traitlets.List, (traitlets.Unicode(), list(option.default))
    elif option.many:
        kind, args = traitlets.Unicode, (",".join(option.default),)  # tools: "calculator,variable"
    else:
        kind = {int: traitlets.CInt, float: traitlets.CFloat}.get(option.type, traitlets.Unicode)
    return kind(*args, allow_none=option.optional, help=option.help).tag(config=True)


def panel_settings() -> dict[str, Any]:
    """The panel's settings as it starts: every option at its default, lists as JSON arrays."""
    return {o.name: list(o.default) if o.many else o.default for o in OPTIONS}


def _default_text(option: Option) -> str:
    if option.type is bool or option.default is None:
        return ""
    return ", ".join(option.default) if option.many else str(option.default)
