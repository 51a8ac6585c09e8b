"""One turn of "press Send": the request, safety layers, memory recall, context assembly, generation with
tools, streaming, the title; `Chat` runs it and `Response` replays its events.
"""

from typing import Any

from jupyter_chatflow import lazy

_NAMES = {
    "Abilities": ".answerer",
    "Answerer": ".answerer",
    "Chat": ".chat",
    "ChatRequest": ".request",
    "LocalAnswerer": ".local",
    "Prewarm": ".chat",
    "Releaser": ".release",
    "RemoteServer": ".remote_server",
    "RequestError": ".request",
    "Response": ".response",
    "Round": ".rounds",
    "RoundDriver": ".rounds",
    "SafetyPolicy": ".safety",
    "ServerAnswerer": ".remote",
    "Tool": ".tools",
    "Toolbox": ".tools",
    "Turn": ".turn",
    "TurnSetup": ".answerer",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _NAMES, name)
