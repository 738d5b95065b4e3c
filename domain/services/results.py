"""What the worker writes to an attempt once it has decided: a result under the
current lease (I5), an observation when the lease is gone (I8), a refusal
before dispatch (I7), a requeue with backoff, and the due-work entry that goes
with each (design.md 5.3, 5.4)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.errors import ConcurrencyConflict, IllegalTransition
from domain.ports import Commit, DueWork
from domain.services.context import ServiceContext
from domain.services.retry import retry_on_conflict
from domain.services.worker_policy import Outcome, WorkerPolicy
from domain.timeutil import parse_utc

_REASON_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")


def bounded(code: object) -> str:
    """An executor's reason code if it is a short code, else a generic one (I10)."""
    if isinstance(code, str) and _REASON_CODE.fullmatch(code):
        return code
    return "executor_reason_invalid"


def stored_time(text: str | None) -> datetime:
    """A timestamp the attempt must carry at this point of its life."""
    if text is None:
        raise IllegalTransition("missing timestamp")
    return parse_utc(text)


def commit_attempt(
    ctx: ServiceContext, attempt: ExecutionAttempt, *, due: datetime | None, durable: bool = True
) -> bool:
    """Append the attempt's new events with its due-work entry; False on a lost race."""
    try:
        ctx.store.commit(
            Commit(aggregates=[attempt], due=[DueWork(attempt.id, due)], durable=durable)
        )
    except ConcurrencyConflict:
        return False
    return True


def settle(ctx: ServiceContext, attempt: ExecutionAttempt, outcome: Outcome) -> Outcome:
    """Commit a transition the attempt already took; SKIPPED when a racer won."""
    committed = commit_attempt(ctx, attempt, due=attempt.next_action_at())
    return outcome if committed else Outcome.SKIPPED


def drop_stale_due(ctx: ServiceContext, attempt: ExecutionAttempt) -> None:
    """Remove the due entry of an attempt that needs no further action."""
    ctx.store.commit(Commit(due=[DueWork(attempt.id, None)], durable=False))


def refuse(ctx: ServiceContext, attempt: ExecutionAttempt, generation: int, reason: str) -> Outcome:
    """The recheck failed: no executor call (I7)."""
    now = ctx.clock.now()
    try:
        if attempt.dispatched:
            # An earlier generation may have applied the effect: a human decides.
            attempt.record_unknown(reason_code=reason, now=now, generation=generation)
            return settle(ctx, attempt, Outcome.OUTCOME_UNKNOWN)
        attempt.fail_safe(reason_code=reason, now=now, generation=generation)
    except IllegalTransition:
        return Outcome.STALE
    return settle(ctx, attempt, Outcome.FAILED_SAFE)


def back_off(
    ctx: ServiceContext,
    policy: WorkerPolicy,
    attempt: ExecutionAttempt,
    generation: int,
    reason: str,
) -> Outcome:
    """A transient failure before dispatch: requeue with bounded backoff."""
    if attempt.dispatched:
        return Outcome.PENDING
    now = ctx.clock.now()
    not_before = now + policy.backoff(attempt.predispatch_leases)
    try:
        attempt.requeue(generation=generation, reason=reason, not_before=not_before, now=now)
    except IllegalTransition:
        return Outcome.STALE
    # Not durable: if a power cut takes it back, the lease expires and recovery requeues.
    requeued = commit_attempt(ctx, attempt, due=not_before, durable=False)
    return Outcome.REQUEUED if requeued else Outcome.SKIPPED


def release(
    ctx: ServiceContext, attempt: ExecutionAttempt, generation: int, reason: str
) -> Outcome:
    """Give a lease back at once, without backoff, for another worker (I11).

    Before dispatch it is queued again and due now; after one, the lease is
    left to expire and recovery hands the attempt to a worker that can serve it.
    """
    if attempt.dispatched:
        return Outcome.NOT_HOSTED
    now = ctx.clock.now()
    try:
        attempt.requeue(generation=generation, reason=reason, not_before=now, now=now)
    except IllegalTransition:
        return Outcome.STALE
    released = commit_attempt(ctx, attempt, due=now, durable=False)
    return Outcome.NOT_HOSTED if released else Outcome.SKIPPED


def record(
    ctx: ServiceContext,
    attempt: ExecutionAttempt,
    generation: int,
    status: AttemptStatus,
    reason: str | None,
    receipt: dict[str, Any] | None,
) -> Outcome:
    """Record the result if our lease still holds; otherwise only observe it.

    A lost commit race is not proof that the lease is gone: a stale
    generation's late observation also appends to the stream. So re-read and
    record again while the lease holds; only then fall back to observing.
    """
    current = attempt

    def record_once() -> Outcome:
        nonlocal current
        try:
            current.record_result(
                generation=generation,
                status=status,
                now=ctx.clock.now(),
                reason_code=reason,
                receipt=receipt,
            )
        except IllegalTransition:
            return observe(ctx, current.id, generation, status)
        try:
            ctx.store.commit(Commit(aggregates=[current], due=[DueWork(current.id, None)]))
        except ConcurrencyConflict:
            fresh = ctx.store.get(ExecutionAttempt, current.id)
            if fresh is None:
                return Outcome.MISSING
            current = fresh
            raise
        return Outcome(status.value)

    return retry_on_conflict(
        record_once, exhausted=lambda: observe(ctx, attempt.id, generation, status)
    )


def observe(
    ctx: ServiceContext, attempt_id: str, generation: int, status: AttemptStatus
) -> Outcome:
    """A result that may not be recorded as the truth: keep it as an observation (I8)."""

    def observe_once() -> Outcome:
        fresh = ctx.store.get(ExecutionAttempt, attempt_id)
        if fresh is None:
            return Outcome.MISSING
        try:
            fresh.observe_late_result(generation=generation, kind=status.value, now=ctx.clock.now())
        except IllegalTransition:
            return Outcome.STALE
        due = DueWork(fresh.id, fresh.next_action_at())
        ctx.store.commit(Commit(aggregates=[fresh], due=[due]))
        return Outcome.STALE

    return retry_on_conflict(observe_once, exhausted=lambda: Outcome.STALE)
