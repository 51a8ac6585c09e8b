"""The thread that runs a scheduler's steps while there is work: started by a submit, ended after `IDLE_EXIT_S`
with nothing to do (so an unused scheduler, and the model it holds, can be collected) or by `close`."""

from __future__ import annotations

import threading
from collections.abc import Callable

IDLE_EXIT_S = 30.0  # the thread ends after this long with nothing to do (the next submit starts another)


class LoopThread:
    """Calls `step()` on a thread of its own while `has_work()`; `ended()` runs on it after `close`. Every method is
    called with `work` (the scheduler's condition, which guards `has_work`'s state) held."""

    def __init__(
        self, step: Callable[[], object], has_work: Callable[[], bool], ended: Callable[[], None],
        work: threading.Condition,
    ):  # fmt: skip
        self._step, self._has_work, self._ended, self._work = step, has_work, ended, work
        self.thread: threading.Thread | None = None
        """The running thread (None while idle)."""
        self.closing = False
        self._resting = False  # end the thread at its next idle wait, not IDLE_EXIT_S later

    def wake(self) -> None:
        """There is work: start the thread if none runs, else wake it."""
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="chatflow-scheduler", daemon=True)
            self.thread.start()
        self._work.notify()

    def rest(self) -> None:
        """End the thread now if it has nothing to do (else once it has not): its scheduler, and the model it holds,
        may then be collected at once. The scheduler stays usable: a submit starts a thread again."""
        self._resting = True
        self._work.notify()

    def close(self) -> threading.Thread | None:
        """Stop after the current step; returns the thread to join (None: none runs, `ended` is the caller's)."""
        self.closing = True
        self._work.notify()
        return self.thread

    def _run(self) -> None:
        while self._wait_for_work():
            self._step()
        if self.closing:  # (not after an idle end: a newer thread may be serving by now)
            self._ended()

    def _wait_for_work(self) -> bool:
        """Whether there is work; False when closing, or after `IDLE_EXIT_S` idle (the thread then ends)."""
        with self._work:
            while not self.closing and not self._has_work():
                if (self._resting or not self._work.wait(IDLE_EXIT_S)) and not self._has_work():
                    self.thread, self._resting = None, False  # (under the lock: a submit from now on starts anew)
                    return False
            return not self.closing
