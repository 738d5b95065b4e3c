"""The runtime's real loops (with their logging), each run once to completion."""

from __future__ import annotations

import threading

from adapters.bootstrap import Ledger
from adapters.runtime import Runtime, subscriber_runs


class OnceFeed:
    """Hands out one batch, then stops its runtime."""

    def __init__(self, batch: list[str], stop: threading.Event) -> None:
        self.batch = batch
        self.stop = stop

    def poll(self, wait_seconds: float) -> list[str]:
        if self.batch:
            batch, self.batch = self.batch, []
            return batch
        self.stop.set()
        return []


def run_loops(
    ledger: Ledger,
    *,
    work: list[str] | None = None,
    project: list[str] | None = None,
    recover: bool = False,
) -> None:
    """The runtime's real loops (with their logging), each run once to completion."""
    runtime = Runtime(ledger, None, recovery_interval=3600, recovery=recover, poll_seconds=0)
    if work is not None:
        runtime.feed = OnceFeed(work, runtime.stop_event)
    if project is not None:  # the subscribers read the log itself: each step until caught up
        for run in subscriber_runs(ledger):
            while runtime.run_subscriber_once(run):
                pass
    if recover:
        runtime.on_recovery = lambda report: runtime.stop_event.set()
    runtime.start()
    for thread in runtime.threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in runtime.threads)
