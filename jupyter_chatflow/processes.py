"""Whether a process of this machine still runs: what a turn left "running" in the database, or a write left in the
prepared-weights cache, is judged by (a killed process leaves both behind)."""

from __future__ import annotations

import os

__all__ = ["alive"]


def alive(pid: int) -> bool:
    """Whether process `pid` of this machine still runs: True for a live one (another user's too), False for one
    that has ended, reaped or not (a zombie, whose parent has not waited for it yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True  # (no /proc: macOS)
