"""Dispatch: the durable marker before the executor call, and what the
executor's answer makes of the attempt (design.md 5.3).

The marker condition-checks every directory record the recheck used, at the
version used, so the authorization that dispatch relies on is the one in force
at the marker. The call itself is bounded by its deadline (``deadline.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.directory import DeliveryMode
from domain.errors import (
    ConcurrencyConflict,
    ExecutorKeyReused,
    ExecutorNoEffect,
    ExecutorReceiptUnusable,
    IllegalTransition,
    StoreUnavailable,
)
from domain.ports import Commit, DueWork, ExecutionReceipt
from domain.redaction import validate_receipt
from domain.services.authorization import AuthorizationFailed, TargetDrift
from domain.services.context import ServiceContext
from domain.services.read_cache import commit
from domain.services.recheck import Checked, NotHosted, confirmed_recheck
from domain.services.results import back_off, bounded, refuse, release, stored_time
from domain.services.retry import retry_on_conflict
from domain.services.worker_policy import Outcome, WorkerPolicy, settle_seconds

Marked = tuple[ExecutionAttempt, Checked, datetime]
"""The attempt with its marker committed, the passed recheck, the call's deadline."""


def mark_dispatch(
    ctx: ServiceContext, policy: WorkerPolicy, attempt: ExecutionAttempt, generation: int
) -> Marked | Outcome:
    """Recheck I7 and commit the dispatch marker, or say what happened instead.

    The records the recheck used may come from the read cache or from the
    versions the approval stored on ``Queued``; if one has moved on since, the
    marker conflicts, the entries are dropped, and the recheck runs once more
    on fresh reads under the same lease. A second conflict backs off.
    """
    current, fresh = attempt, False

    def mark_once() -> Marked | Outcome:
        nonlocal current, fresh
        try:
            checked = confirmed_recheck(ctx, current, fresh)
        except AuthorizationFailed as failed:
            return refuse(ctx, current, generation, failed.reason)
        except TargetDrift:
            return refuse(ctx, current, generation, "target_drift")
        except StoreUnavailable:
            return back_off(ctx, policy, current, generation, "store_unavailable")
        except NotHosted:
            return release(ctx, current, generation, "executor_not_hosted")
        now = ctx.clock.now()
        if checked.spec.expires_at <= now:
            # The recheck's reads take time: expiry is judged at the marker's own time.
            return refuse(ctx, current, generation, "spec_expired")
        deadline = stored_time(current.lease_expires_at) - timedelta(
            seconds=policy.deadline_margin_seconds
        )
        try:
            current.mark_dispatch(
                generation=generation,
                now=now,
                deadline=deadline,
                settle_seconds=settle_seconds(checked.executor, (deadline - now).total_seconds()),
            )
        except IllegalTransition:
            return Outcome.STALE
        try:
            with ctx.tracer.span(
                "ledger.worker.dispatch_marker", {"ledger.lease_generation": generation}
            ):
                commit(
                    ctx.store,
                    ctx.cache,
                    Commit(
                        aggregates=[current],
                        read_set=checked.authorization.read_set,
                        due=[DueWork(current.id, stored_time(current.lease_expires_at))],
                    ),
                )
        except ConcurrencyConflict as conflict:
            if conflict.stream_id == current.id:
                return Outcome.SKIPPED
            # A directory record changed between the recheck and the marker.
            latest = ctx.store.get(ExecutionAttempt, current.id)
            if latest is None or not latest.holds_lease(generation, ctx.clock.now()):
                return Outcome.SKIPPED
            current, fresh = latest, True
            raise
        return current, checked, deadline

    return retry_on_conflict(
        mark_once,
        limit=2,
        exhausted=lambda: back_off(ctx, policy, current, generation, "directory_changed"),
    )


@dataclass(frozen=True)
class Answer:
    """What an executor call makes of the attempt, to be recorded under the lease."""

    status: AttemptStatus
    reason: str | None = None
    receipt: dict[str, Any] | None = None


def judge_call(call: Callable[[], ExecutionReceipt], attempt: ExecutionAttempt) -> Answer | None:
    """Run the call and judge its answer; None when it is ambiguous and the delivery
    mode leaves it to recovery (a retry with the same key, or a lookup).

    ``attempt`` is the attempt with this call's dispatch marker: a "nothing was
    written" answer proves no effect only on its first dispatch.
    """
    mode = attempt.delivery_mode
    try:
        answer = call()
    except ExecutorNoEffect as no_effect:
        if attempt.no_write_is_proof:
            return Answer(AttemptStatus.FAILED_SAFE, bounded(no_effect.reason_code))
        if isinstance(no_effect, ExecutorKeyReused):
            # Evidence that an earlier dispatch landed: a lookup may confirm it; a
            # re-send would only be refused again.
            return uncertain(mode, "resend_key_reused", retry=False)
        # A refusal of this request alone (a rotated credential, a rule changed).
        return uncertain(mode, "resend_refused")
    except ExecutorReceiptUnusable as unusable:
        # Applied by the provider's word, but nothing safe to store: a human decides.
        return Answer(AttemptStatus.OUTCOME_UNKNOWN, bounded(unusable.reason_code))
    except Exception:  # timeout, lost response, deadline, provider error: uncertain
        return uncertain(mode, "executor_outcome_uncertain")
    receipt = validate_receipt(answer.data)
    if receipt is None:
        return Answer(AttemptStatus.OUTCOME_UNKNOWN, "unsafe_receipt")
    return Answer(AttemptStatus.SUCCEEDED, receipt=receipt)


def uncertain(mode: DeliveryMode, reason: str, *, retry: bool = True) -> Answer | None:
    """The delivery mode's rule for an outcome nobody can tell: recovery retries with
    the same key (``retry``, within the dispatch budget) or looks it up after the
    lease (None); otherwise a human decides."""
    if mode is DeliveryMode.CORRELATION_LOOKUP:
        return None
    if mode is DeliveryMode.PROVIDER_IDEMPOTENCY and retry:
        return None
    return Answer(AttemptStatus.OUTCOME_UNKNOWN, reason)
