"""Restoring a backup never repeats an effect (I17).

A restored store can be older than what happened: an attempt dispatched (even
settled) after the backup was taken looks queued or executing again, and
dispatching it blindly could make a second effect. So a restore is recorded in
the restore log (``domain.restore``) and then settled here: every attempt that
is unsettled in the restored store (queued or executing: exactly the attempts
the due-work index holds, found by its query, never a scan) is marked
``PossiblyDispatched`` in one commit with its new due entry:

- ``provider_idempotency``: recovery leases it again and retries with the same
  key (the provider deduplicates), within ``LEDGER_MAX_DISPATCHES``; its next
  "nothing was written" is a re-send's, no proof of no effect;
- ``correlation_lookup``: recovery looks it up before anything else, once the
  build's settle window after the restore has passed (a call of the lost
  history may still land): found is ``succeeded``, "not applied" is
  ``failed_safe`` and watched (I12), anything else ``outcome_unknown``;
- ``operator_reconciliation_only``: ``outcome_unknown`` at once
  (``restored_possibly_dispatched``), for an admin.

Settled attempts stay as they are; ``outcome_unknown`` stays with the admin.
Marking is idempotent (each attempt records the restore's id), so a settle that
was interrupted runs again; the worker settles a pending restore before it
leases anything (``settle_pending_restore``), and so does every recovery tick.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from domain.attempt import ExecutionAttempt
from domain.directory import DeliveryMode
from domain.errors import ConcurrencyConflict, IllegalTransition
from domain.ports import Commit, DueWork
from domain.restore import RESTORE_LOG_ID, RestoreLog, RestoreSource
from domain.services.context import ServiceContext
from domain.services.retry import retry_on_conflict
from domain.services.worker_policy import WorkerPolicy, default_settle_seconds, settle_seconds
from domain.timeutil import format_utc

RESTORED = "restored_possibly_dispatched"
PAGE_SIZE = 100
HORIZON = timedelta(days=366 * 100)  # every due entry, however far ahead


@dataclass
class RestoreReport:
    """What settling one restore did: attempts marked, by delivery mode."""

    restore_id: str | None = None
    marked: Counter[str] = field(default_factory=Counter)
    outcome_unknown: int = 0

    @property
    def total(self) -> int:
        return sum(self.marked.values())


def record_restore(
    ctx: ServiceContext, *, source: RestoreSource, lost: dict[str, Any] | None = None
) -> str:
    """Append a restore to the log (creating it); returns the restore's id."""
    restore_id = ctx.tokens.new_id("rst")

    def record_once() -> str:
        at = format_utc(ctx.clock.now())
        log = ctx.store.get(RestoreLog, RESTORE_LOG_ID)
        if log is None:
            log = RestoreLog(at=at)
        log.record(restore_id=restore_id, source=source, at=at, lost=lost)
        ctx.store.commit(Commit(aggregates=[log]))
        return restore_id

    def exhausted() -> str:
        raise ConcurrencyConflict(RESTORE_LOG_ID)

    return retry_on_conflict(record_once, exhausted=exhausted)


def pending_restore(ctx: ServiceContext) -> str | None:
    """The id of a recorded restore that is not settled yet, if any (one read)."""
    log = ctx.store.get(RestoreLog, RESTORE_LOG_ID)
    return None if log is None else log.pending


def settle_pending_restore(ctx: ServiceContext, policy: WorkerPolicy) -> RestoreReport | None:
    """Settle every pending restore, oldest first; None when there was none."""
    report: RestoreReport | None = None
    for _ in range(100):  # a bound: each round settles one restore
        restore_id = pending_restore(ctx)
        if restore_id is None:
            return report
        report = settle_restore(ctx, policy, restore_id)
    return report


def settle_restore(ctx: ServiceContext, policy: WorkerPolicy, restore_id: str) -> RestoreReport:
    """Mark every attempt the due-work index holds that is unsettled, then record the
    restore as settled."""
    report = RestoreReport(restore_id)
    cursor: str | None = None
    horizon = ctx.clock.now() + HORIZON
    while True:
        page = ctx.store.due_work(horizon, PAGE_SIZE, cursor)
        for item in page.items:
            mode = _mark(ctx, policy, item.attempt_id, restore_id, report)
            if mode is not None:
                report.marked[mode] += 1
        if page.cursor is None:
            break
        cursor = page.cursor

    def settle_once() -> None:
        log = ctx.store.get(RestoreLog, RESTORE_LOG_ID)
        if log is None or log.restores.get(restore_id, {}).get("settled") is not None:
            return  # settled by another process meanwhile
        log.settle(
            restore_id=restore_id, marked=dict(report.marked), at=format_utc(ctx.clock.now())
        )
        ctx.store.commit(Commit(aggregates=[log]))

    retry_on_conflict(settle_once, exhausted=lambda: None)
    return report


def _window(ctx: ServiceContext, policy: WorkerPolicy, attempt: ExecutionAttempt) -> float:
    """How long after the restore a call of the lost history may still land: the
    build's settle window (the longest call a lease allows), its default without
    the build."""
    call = float(policy.lease_seconds - policy.deadline_margin_seconds)
    executor = (
        ctx.registry.get(attempt.capability, attempt.executor_build)
        if ctx.registry is not None
        else None
    )
    if executor is None:
        return default_settle_seconds(call)
    return max(settle_seconds(executor, call), call)


def _mark(
    ctx: ServiceContext,
    policy: WorkerPolicy,
    attempt_id: str,
    restore_id: str,
    report: RestoreReport,
) -> str | None:
    """Mark one attempt possibly dispatched; its delivery mode, or None (settled
    already, marked already, or gone)."""

    def mark_once() -> str | None:
        attempt = ctx.store.get(ExecutionAttempt, attempt_id)
        if attempt is None:
            return None
        now = ctx.clock.now()
        window = _window(ctx, policy, attempt)
        if not attempt.mark_possibly_dispatched(
            restore_id=restore_id, now=now, settle_seconds=window
        ):
            return None
        unknown = False
        if attempt.delivery_mode is DeliveryMode.OPERATOR_RECONCILIATION_ONLY:
            try:
                attempt.record_unknown(reason_code=RESTORED, now=now)
                unknown = True
            except IllegalTransition:
                pass  # a lease from before the restore runs on: recovery does it after
        ctx.store.commit(
            Commit(aggregates=[attempt], due=[DueWork(attempt.id, attempt.next_action_at())])
        )
        if unknown:
            report.outcome_unknown += 1
        return attempt.delivery_mode.value

    return retry_on_conflict(mark_once, exhausted=lambda: None)
