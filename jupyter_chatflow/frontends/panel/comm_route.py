"""Keep the panel's requests reaching the kernel when JupyterLab sends comm messages over kernel subshells.

JupyterLab >= 4.4 sends widget comm messages to a kernel subshell (setting `commsOverSubshells`, default one
subshell per comm target), which ipykernel >= 7 runs on a thread of its own. ipykernel 7.4 also routes a comm's
incoming messages to the subshell its last outgoing message answered (`BaseComm._reply_subshell_for`). After a
page reload the new page deletes subshells, and a comm can be left routed to one that no longer exists: the
kernel then drops every message of that comm ("Cannot handle comm_msg …: Unknown subshell_id"), and the panel's
Send, Stop and fork buttons do nothing (seen in about one end-to-end run in three). Here such a message goes to
a subshell that exists: the one the message names, else the main shell.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def route_to_live_subshells(comm: Any) -> None:
    """Wrap `comm`'s subshell routing (ipykernel >= 7.4) so it never picks a deleted subshell. A no-op where the
    kernel has no such routing (older ipykernel, other kernels, no kernel)."""
    choose: Callable[[Any, str | None], str | None] | None = getattr(comm, "_reply_subshell_for", None)
    if choose is None:
        return
    warned = False

    def route(data: Any, default: str | None) -> str | None:
        nonlocal warned
        chosen = choose(data, default)
        kernel = _kernel_of(comm)
        live = _live_subshells(kernel)
        if chosen is None or live is None or chosen in live:
            return chosen
        fallback = default if default in live else None
        if not warned:  # in the kernel's log (the server's terminal), not in a cell: sys.stderr is a cell's output
            warned = True
            getattr(kernel, "log", log).warning(
                "jupyter_chatflow: a panel message was routed to subshell %s, which no longer exists (JupyterLab's "
                "comms over subshells after a page reload); it goes to %s instead.",
                chosen, fallback or "the main shell",
            )  # fmt: skip
        return fallback

    comm._reply_subshell_for = route


def _live_subshells(kernel: Any) -> set[str] | None:
    """The ids of the kernel's subshells now, or None where they can't be listed."""
    try:
        manager = getattr(getattr(kernel, "shell_channel_thread", None), "manager", None)
        return set(manager.list_subshell()) if manager is not None else None
    except Exception:  # a kernel shutting down: leave the routing as it was
        return None


def _kernel_of(comm: Any) -> Any:
    if getattr(comm, "kernel", None) is not None:
        return comm.kernel
    from ipykernel.kernelbase import Kernel

    return Kernel.instance() if Kernel.initialized() else None
