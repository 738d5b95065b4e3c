"""What every view of one opened in-process ledger shares: the wiring and the
runtime loops (worker, recovery, subscribers of the log, webhook deliverer)."""

from __future__ import annotations

import threading

from adapters.bootstrap import Ledger, preflight
from adapters.runtime import Runtime, build_runtime


class Engine:
    """The wiring and its loops, started at most once and closed once."""

    def __init__(self, wiring: Ledger) -> None:
        self.wiring = wiring
        self.runtime: Runtime | None = None
        self.closed = False
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.lock:
            if self.closed:
                raise RuntimeError("the ledger is closed")
            if self.runtime is not None:
                return
            preflight(self.wiring.settings)
            runtime = build_runtime(self.wiring)
            runtime.start()
            self.runtime = runtime

    def stop(self) -> None:
        with self.lock:
            runtime, self.runtime = self.runtime, None
        if runtime is not None:
            runtime.stop()

    def close(self) -> None:
        self.stop()
        with self.lock:
            if self.closed:
                return
            self.closed = True
        self.wiring.close()
