"""Recovery (design.md 5.4): the worker in recovery mode, driven by the due-work index.

It queries due entries by ``next_action_at <= now`` in pages (never a scan)
and lets the worker decide per attempt, after a consistent re-read: an index
entry is a hint, never the truth. A restore that is recorded but not settled
yet is settled first (``restore.py``, I17): nothing restored is leased before
it is marked possibly dispatched.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from domain.errors import LedgerError, StoreUnavailable
from domain.services.execution import Outcome, Worker
from domain.services.restore import settle_pending_restore

DEFAULT_PAGE_SIZE = 100
ERROR = "error"  # an attempt the worker raised on (it stays due)
NOT_HOSTED = Outcome.NOT_HOSTED.value


@dataclass
class RecoveryReport:
    """What one recovery tick examined and did."""

    examined: int = 0
    pages: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)


def run_recovery(
    worker: Worker,
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
    max_items: int | None = None,
    max_not_hosted: int | None = None,
) -> RecoveryReport:
    """One tick: a pending restore settled first (I17), then every entry due now,
    oldest first.

    ``max_items`` bounds the entries acted on; attempts this worker does not host
    (``not_hosted``: left for a worker with their build) do not count, or a
    backlog of them at the head of the index would starve everything behind
    it. ``max_not_hosted`` bounds those separately (each costs a read)."""
    report = RecoveryReport()
    restored = settle_pending_restore(worker.ctx, worker.policy)
    if restored is not None:
        report.outcomes["restore_marked"] += restored.total
    now = worker.ctx.clock.now()
    cursor: str | None = None
    while True:
        page = worker.ctx.store.due_work(now, page_size, cursor)
        report.pages += 1
        for item in page.items:
            try:
                outcome = worker.recover(item.attempt_id).value
            except StoreUnavailable:
                raise  # the store is down: the next tick tries again
            except LedgerError:
                # One attempt that cannot be recovered must not stop the tick at
                # the oldest due entry forever; it stays due and is reported.
                outcome = ERROR
            report.examined += 1
            report.outcomes[outcome] += 1
            skipped = report.outcomes[NOT_HOSTED]
            if max_items is not None and report.examined - skipped >= max_items:
                return report
            if max_not_hosted is not None and skipped >= max_not_hosted:
                return report
        if page.cursor is None:
            return report
        cursor = page.cursor
