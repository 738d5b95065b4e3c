"""The worker (design.md 5.3): lease, recheck, durable dispatch marker, call, record.

A worker takes only attempts whose exact build it hosts (I11, ``hosting.py``):
any other worker leaves them, untouched and due, for one that has the build.
One conditional append takes the lease. The pre-dispatch recheck of I7
(``recheck.py``) reads every directory record from the exact ids stored on the
attempt, and the ``DispatchStarted`` commit (``dispatch.py``) condition-checks
that none of them changed, so the authorization that dispatch relies on is the
one in force at the marker. Only the current, unexpired lease generation can
record a result (I5); a stale generation's result becomes a non-authoritative
observation (I8) (``results.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.directory import DeliveryMode
from domain.errors import (
    ConcurrencyConflict,
    ExecutorNoEffect,
    IllegalTransition,
    InvalidSpec,
    ReconcilerUnavailable,
)
from domain.ports import (
    Commit,
    DueWork,
    ExecutionReceipt,
    ExecutionRequest,
    Executor,
    ReadCheck,
)
from domain.services.context import ServiceContext
from domain.services.deadline import CallRunner, DeadlineExceeded, ThreadedCalls
from domain.services.dispatch import judge_call, mark_dispatch
from domain.services.hosting import hosts, not_hosted
from domain.services.resolution import NOT_SETTLED, lookup_outcome
from domain.services.results import (
    commit_attempt,
    drop_stale_due,
    observe,
    record,
    settle,
    stored_time,
)
from domain.services.watch import look_again
from domain.services.worker_policy import (
    CrashHook,
    CrashPoint,
    Outcome,
    SimulatedCrash,
    WorkerPolicy,
    settle_seconds,
)

__all__ = [
    "CrashHook",
    "CrashPoint",
    "Outcome",
    "SimulatedCrash",
    "Worker",
    "WorkerPolicy",
    "settle_seconds",
]


def _no_crash(point: CrashPoint, attempt_id: str) -> None:
    return None


class Worker:
    """Processes attempts; the same code serves stream delivery and recovery."""

    def __init__(
        self,
        ctx: ServiceContext,
        policy: WorkerPolicy | None = None,
        *,
        crash_hook: CrashHook | None = None,
        calls: CallRunner | None = None,
    ) -> None:
        self.ctx = ctx
        self.policy = policy or WorkerPolicy()
        self.crash_hook = crash_hook or _no_crash
        self.calls = calls or ThreadedCalls()

    # -- entry points --------------------------------------------------------

    def process(self, attempt_id: str, *, trigger: str = "feed") -> Outcome:
        """Handle a queued attempt (a stream record or a due entry said so).

        ``trigger`` names what delivered it (``notification``, ``stream``) on the span.
        """
        attempt = self.ctx.store.get(ExecutionAttempt, attempt_id)
        if attempt is None:
            return Outcome.MISSING
        if attempt.status is not AttemptStatus.QUEUED:
            return Outcome.SKIPPED
        if self.ctx.clock.now() < stored_time(attempt.not_before):
            return Outcome.SKIPPED
        if not hosts(self.ctx, attempt):
            return not_hosted(self.ctx, attempt)
        return self._traced(attempt, "ledger.worker.process", self._lease_and_run, trigger=trigger)

    def recover(self, attempt_id: str) -> Outcome:
        """Recovery mode for one due entry (design.md 5.4).

        What needs the attempt's build (a lease, a retry, a lookup) is done only
        by a worker that hosts it (I11, ``hosting.py``); what needs none (an
        expired undispatched lease back to queued, the operator-only rule, the
        dispatch budget) by any worker.
        """
        attempt = self.ctx.store.get(ExecutionAttempt, attempt_id)
        if attempt is None:
            return Outcome.MISSING
        now = self.ctx.clock.now()
        if attempt.watch_due_at() is not None:
            return self._traced(attempt, "ledger.worker.watch", lambda a: look_again(self.ctx, a))
        if attempt.is_terminal or attempt.status is AttemptStatus.OUTCOME_UNKNOWN:
            drop_stale_due(self.ctx, attempt)
            return Outcome.SKIPPED
        if attempt.status is AttemptStatus.QUEUED:
            if now < stored_time(attempt.not_before):
                return Outcome.SKIPPED
            if not hosts(self.ctx, attempt):
                return not_hosted(self.ctx, attempt)
            return self._traced(attempt, "ledger.worker.recover", self._lease_and_run)
        if not attempt.lease_expired(now):
            return Outcome.SKIPPED
        if not attempt.dispatched:
            attempt.requeue(generation=None, reason="lease_expired", not_before=now, now=now)
            if not commit_attempt(self.ctx, attempt, due=now, durable=False):
                return Outcome.SKIPPED
            if not hosts(self.ctx, attempt):
                return not_hosted(self.ctx, attempt)  # queued again: woken hosts take it
            return self._traced(attempt, "ledger.worker.recover", self._lease_and_run)
        if attempt.delivery_mode is DeliveryMode.PROVIDER_IDEMPOTENCY:
            if attempt.dispatch_count >= self.policy.max_dispatches:
                attempt.record_unknown(reason_code="dispatch_limit", now=now)
                return settle(self.ctx, attempt, Outcome.OUTCOME_UNKNOWN)
            if not hosts(self.ctx, attempt):
                return not_hosted(self.ctx, attempt)
            return self._traced(attempt, "ledger.worker.recover", self._lease_and_run)
        if attempt.delivery_mode is DeliveryMode.CORRELATION_LOOKUP:
            if not hosts(self.ctx, attempt):
                return not_hosted(self.ctx, attempt)  # the lookup is the build's own
            return self._traced(
                attempt, "ledger.worker.reconcile", lambda a: self._reconcile_expired(a, now)
            )
        attempt.record_unknown(reason_code="operator_reconciliation_required", now=now)
        return settle(self.ctx, attempt, Outcome.OUTCOME_UNKNOWN)

    # -- the leased run ----------------------------------------------------------

    def _traced(
        self,
        attempt: ExecutionAttempt,
        name: str,
        run: Callable[[ExecutionAttempt], Outcome],
        *,
        trigger: str = "recovery",
    ) -> Outcome:
        """Run one step in a span that continues the trace stored on ``Queued``."""
        attributes = {
            "ledger.attempt_id": attempt.id,
            "ledger.capability": attempt.capability,
            "ledger.trigger": trigger,
        }
        with self.ctx.tracer.span(name, attributes, parent=attempt.trace_context) as span:
            outcome = run(attempt)
            span.set("ledger.outcome", outcome.value)
            return outcome

    def _lease_and_run(self, attempt: ExecutionAttempt) -> Outcome:
        now = self.ctx.clock.now()
        limit = self.policy.max_predispatch_leases
        if not attempt.dispatched and attempt.predispatch_leases >= limit:
            attempt.fail_safe(reason_code="predispatch_lease_limit", now=now)
            return settle(self.ctx, attempt, Outcome.FAILED_SAFE)
        owner = self.ctx.tokens.new_id("lease")
        with self.ctx.tracer.span("ledger.worker.lease") as span:
            generation = attempt.lease(
                owner=owner, now=now, lease_seconds=self.policy.lease_seconds
            )
            span.set("ledger.lease_generation", generation)
            # Not durable: a lease lost to a power cut is taken again by recovery, and
            # the durable dispatch marker makes it durable before any executor call.
            if not commit_attempt(
                self.ctx, attempt, due=stored_time(attempt.lease_expires_at), durable=False
            ):
                span.set("ledger.outcome", Outcome.SKIPPED.value)
                return Outcome.SKIPPED
        self.crash_hook(CrashPoint.AFTER_LEASE, attempt.id)

        marked = mark_dispatch(self.ctx, self.policy, attempt, generation)
        if isinstance(marked, Outcome):
            return marked
        attempt, checked, deadline = marked
        self.crash_hook(CrashPoint.AFTER_DISPATCH_MARKER, attempt.id)

        request = ExecutionRequest(
            spec=checked.spec,
            attempt_id=attempt.id,
            idempotency_key=attempt.idempotency_key,
            deadline=deadline,
        )
        answer = judge_call(lambda: self._call(checked.executor, request, generation), attempt)
        if answer is None:
            return Outcome.PENDING
        self.crash_hook(CrashPoint.AFTER_RESPONSE, attempt.id)
        with self.ctx.tracer.span(
            "ledger.worker.record_result", {"ledger.status": answer.status.value}
        ) as span:
            outcome = record(
                self.ctx, attempt, generation, answer.status, answer.reason, answer.receipt
            )
            span.set("ledger.outcome", outcome.value)
            return outcome

    def _call(
        self, executor: Executor, request: ExecutionRequest, generation: int
    ) -> ExecutionReceipt:
        """The executor call, abandoned at its deadline (then ambiguous).

        An abandoned call's late answer is observed, never recorded as the truth.
        """
        timeout = (request.deadline - self.ctx.clock.now()).total_seconds()
        if timeout <= 0:
            raise DeadlineExceeded()  # no time left to wait for an answer: do not call

        def late(result: Any, error: BaseException | None) -> None:
            self.late_answer(request.attempt_id, generation, result, error)

        return self.calls.run(lambda: executor.execute(request), timeout, late)

    def late_answer(
        self, attempt_id: str, generation: int, result: Any, error: BaseException | None
    ) -> None:
        """An abandoned call answered after all: keep what it says as an observation."""
        if error is None and isinstance(result, ExecutionReceipt):
            kind = AttemptStatus.SUCCEEDED
        elif isinstance(error, ExecutorNoEffect):
            kind = AttemptStatus.FAILED_SAFE
        else:
            return  # still ambiguous: nothing to add to what recovery will find
        # A background thread: if the store fails here, recovery settles the rest.
        with contextlib.suppress(Exception):
            observe(self.ctx, attempt_id, generation, kind)

    def _reconcile_expired(self, attempt: ExecutionAttempt, now: datetime) -> Outcome:
        """correlation_lookup after an expired dispatched lease: look it up first.

        Without a registered reconciler (or with a stored spec it cannot read)
        nothing can settle the outcome automatically: outcome_unknown.
        """
        try:
            status, reason, receipt = lookup_outcome(self.ctx, attempt)
        except ReconcilerUnavailable:
            status, reason, receipt = AttemptStatus.OUTCOME_UNKNOWN, "reconciler_unavailable", None
        except InvalidSpec:
            status, reason, receipt = AttemptStatus.OUTCOME_UNKNOWN, "stored_spec_invalid", None
        if reason == NOT_SETTLED:
            # The dispatching call may still land: stay due, look again after the window.
            # Only while the attempt is as read: a racing writer's own due entry wins.
            with contextlib.suppress(ConcurrencyConflict):
                self.ctx.store.commit(
                    Commit(
                        read_set=[ReadCheck(attempt.id, attempt.version)],
                        due=[DueWork(attempt.id, attempt.next_action_at())],
                        durable=False,  # lost: recovery finds the attempt due again
                    )
                )
            return Outcome.PENDING
        try:
            attempt.record_reconciled(
                status=status,
                now=now,
                reason_code=reason,
                receipt=receipt,
                watch=self.ctx.no_effect_watch,  # a "not applied" is looked at again (I12)
            )
        except IllegalTransition:
            return Outcome.SKIPPED
        return settle(self.ctx, attempt, Outcome(status.value))
