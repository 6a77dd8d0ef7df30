"""Stop a long run cleanly on SIGINT or SIGTERM, and never in the middle of a write.

Ctrl-C raises ``KeyboardInterrupt``, but SIGTERM (what ``kill``, batch schedulers and
``timeout`` send) ends a Python process at once, without running ``finally`` blocks. While
an :class:`InterruptGuard` is active both raise :class:`Interrupted`, except inside
:meth:`InterruptGuard.hold`, where they wait until the held block (writing one chunk of
output) has finished.  SIGKILL cannot be caught: a record it cuts short is found and
dropped when the run is resumed (see :mod:`pll_harness.tools.resumable`).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

CAUGHT_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A run stopped by signal ``signum``.  A ``KeyboardInterrupt``, so that whatever
    handles Ctrl-C handles SIGTERM the same way."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class InterruptGuard:
    """Within ``with InterruptGuard() as guard:``, SIGINT and SIGTERM raise
    :class:`Interrupted` in the main thread, and ``with guard.hold():`` defers them.

    Only signals left at their usual handling are taken over (a SIGINT ignored by the
    shell, as for background jobs, stays ignored; a handler of the caller's stays), and
    only in the main thread, where Python runs signal handlers.  The previous handlers
    come back on exit.
    """

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}
        self._holding = False
        self._pending: int | None = None

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            for signum in CAUGHT_SIGNALS:
                if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._holding:
            self._pending = signum
            return
        raise Interrupted(signum)

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Run the block to its end; a signal that arrives meanwhile is raised after it."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        if self._pending is not None:
            signum, self._pending = self._pending, None
            raise Interrupted(signum)
