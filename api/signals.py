"""How the long-running commands stop: the first ``SIGTERM`` or ``SIGINT`` asks
for a graceful stop, a second one ends the process at once.

A graceful stop leases nothing more and lets what is in flight finish and be
recorded (``Runtime.stop``); the process then exits 0. The second signal is
for an operator who will not wait: the process exits immediately with
128 + the signal number, and whatever was in flight is taken over by
recovery, exactly as after ``SIGKILL``.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
AT_ONCE = b"ledger: second signal: stopping at once; recovery takes over what was in flight\n"


class StopSignals:
    """A context that owns ``SIGTERM`` and ``SIGINT`` while a command runs (main
    thread only). ``requested`` is set by the first signal; ``received`` names it."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.received: signal.Signals | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for number in STOP_SIGNALS:
            self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if self.requested.is_set():
            os.write(2, AT_ONCE)  # a handler must not take the stream locks print would
            os._exit(128 + number)
        self.received = signal.Signals(number)
        self.requested.set()

    def wait(self, alive: Callable[[], bool] | None = None) -> bool:
        """Block until a stop is asked for (True) or ``alive()`` turns False (False)."""
        while not self.requested.wait(0.25):
            if alive is not None and not alive():
                return False
        return True
