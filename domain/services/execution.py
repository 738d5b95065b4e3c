"""The worker (SPEC 5.3): lease, recheck, durable dispatch marker, call, record.

One conditional append takes the lease. The pre-dispatch recheck of I7 reads
every directory record from the exact ids stored on the attempt, and the
``DispatchStarted`` commit condition-checks that none of them changed, so the
authorization that dispatch relies on is the one in force at the marker. Only
the current, unexpired lease generation can record a result (I5); a stale
generation's result becomes a non-authoritative observation (I8).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from domain.attempt import AttemptStatus, ExecutionAttempt
from domain.directory import DeliveryMode
from domain.errors import (
    ConcurrencyConflict,
    ExecutorNoEffect,
    ExecutorReceiptUnusable,
    IllegalTransition,
    InvalidSpec,
    ReconcilerUnavailable,
    StoreUnavailable,
)
from domain.ports import (
    Commit,
    DueWork,
    ExecutionReceipt,
    ExecutionRequest,
    Executor,
    ReadCheck,
)
from domain.proposal import Proposal, ProposalStatus
from domain.redaction import validate_receipt
from domain.services.authorization import (
    Approver,
    Authorization,
    AuthorizationFailed,
    DirectoryReads,
    TargetDrift,
    authorize,
)
from domain.services.context import ServiceContext
from domain.services.deadline import CallRunner, DeadlineExceeded, ThreadedCalls
from domain.services.read_cache import commit
from domain.services.resolution import NOT_SETTLED, lookup_outcome
from domain.services.retry import retry_on_conflict
from domain.services.worker_policy import (
    CrashHook,
    CrashPoint,
    Outcome,
    SimulatedCrash,
    WorkerPolicy,
    settle_seconds,
)
from domain.spec import ProposalSpec, stored_spec
from domain.timeutil import parse_utc

__all__ = ["CrashHook", "CrashPoint", "Outcome", "SimulatedCrash", "Worker", "WorkerPolicy"]

_REASON_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")


@dataclass(frozen=True)
class Checked:
    """A passed pre-dispatch recheck."""

    spec: ProposalSpec
    executor: Executor
    authorization: Authorization


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
        if self.ctx.clock.now() < _time(attempt.not_before):
            return Outcome.SKIPPED
        return self._traced(attempt, "ledger.worker.process", self._lease_and_run,
                            trigger=trigger)

    def recover(self, attempt_id: str) -> Outcome:
        """Recovery mode for one due entry (SPEC 5.4)."""
        attempt = self.ctx.store.get(ExecutionAttempt, attempt_id)
        if attempt is None:
            return Outcome.MISSING
        now = self.ctx.clock.now()
        if attempt.is_terminal or attempt.status is AttemptStatus.OUTCOME_UNKNOWN:
            self._drop_stale_due(attempt)
            return Outcome.SKIPPED
        if attempt.status is AttemptStatus.QUEUED:
            if now < _time(attempt.not_before):
                return Outcome.SKIPPED
            return self._traced(attempt, "ledger.worker.recover", self._lease_and_run)
        if not attempt.lease_expired(now):
            return Outcome.SKIPPED
        if not attempt.dispatched:
            attempt.requeue(generation=None, reason="lease_expired", not_before=now, now=now)
            if not self._commit(attempt, due=now, durable=False):
                return Outcome.SKIPPED
            return self._traced(attempt, "ledger.worker.recover", self._lease_and_run)
        if attempt.delivery_mode is DeliveryMode.PROVIDER_IDEMPOTENCY:
            if attempt.dispatch_count >= self.policy.max_dispatches:
                attempt.record_unknown(reason_code="dispatch_limit", now=now)
                return self._settle(attempt, Outcome.OUTCOME_UNKNOWN)
            return self._traced(attempt, "ledger.worker.recover", self._lease_and_run)
        if attempt.delivery_mode is DeliveryMode.CORRELATION_LOOKUP:
            return self._traced(attempt, "ledger.worker.reconcile",
                                lambda a: self._reconcile_expired(a, now))
        attempt.record_unknown(reason_code="operator_reconciliation_required", now=now)
        return self._settle(attempt, Outcome.OUTCOME_UNKNOWN)

    # -- the leased run ----------------------------------------------------------

    def _traced(self, attempt: ExecutionAttempt, name: str,
                run: Callable[[ExecutionAttempt], Outcome], *,
                trigger: str = "recovery") -> Outcome:
        """Run one step in a span that continues the trace stored on ``Queued``."""
        attributes = {"ledger.attempt_id": attempt.id, "ledger.capability": attempt.capability,
                      "ledger.trigger": trigger}
        with self.ctx.tracer.span(name, attributes, parent=attempt.trace_context) as span:
            outcome = run(attempt)
            span.set("ledger.outcome", outcome.value)
            return outcome

    def _lease_and_run(self, attempt: ExecutionAttempt) -> Outcome:
        now = self.ctx.clock.now()
        limit = self.policy.max_predispatch_leases
        if not attempt.dispatched and attempt.predispatch_leases >= limit:
            attempt.fail_safe(reason_code="predispatch_lease_limit", now=now)
            return self._settle(attempt, Outcome.FAILED_SAFE)
        owner = self.ctx.tokens.new_id("lease")
        with self.ctx.tracer.span("ledger.worker.lease") as span:
            generation = attempt.lease(owner=owner, now=now,
                                       lease_seconds=self.policy.lease_seconds)
            span.set("ledger.lease_generation", generation)
            # Not durable: a lease lost to a power cut is taken again by recovery, and
            # the durable dispatch marker makes it durable before any executor call.
            if not self._commit(attempt, due=_time(attempt.lease_expires_at), durable=False):
                span.set("ledger.outcome", Outcome.SKIPPED.value)
                return Outcome.SKIPPED
        self.crash_hook(CrashPoint.AFTER_LEASE, attempt.id)

        marked = self._mark_dispatch(attempt, generation)
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
        status: AttemptStatus
        reason: str | None = None
        receipt: dict[str, Any] | None = None
        try:
            answer = self._call(checked.executor, request, generation)
        except ExecutorNoEffect as no_effect:
            status, reason = AttemptStatus.FAILED_SAFE, _bounded(no_effect.reason_code)
        except ExecutorReceiptUnusable as unusable:
            # Applied by the provider's word, but nothing safe to store: a human decides.
            status, reason = AttemptStatus.OUTCOME_UNKNOWN, _bounded(unusable.reason_code)
        except Exception:  # timeout, lost response, deadline, provider error: uncertain
            if attempt.delivery_mode is not DeliveryMode.OPERATOR_RECONCILIATION_ONLY:
                # Recovery retries with the same key, or looks it up, after the lease.
                return Outcome.PENDING
            status, reason = AttemptStatus.OUTCOME_UNKNOWN, "executor_outcome_uncertain"
        else:
            receipt = validate_receipt(answer.data)
            if receipt is None:
                status, reason = AttemptStatus.OUTCOME_UNKNOWN, "unsafe_receipt"
            else:
                status = AttemptStatus.SUCCEEDED
        self.crash_hook(CrashPoint.AFTER_RESPONSE, attempt.id)
        with self.ctx.tracer.span("ledger.worker.record_result",
                                  {"ledger.status": status.value}) as span:
            outcome = self._record(attempt, generation, status, reason, receipt)
            span.set("ledger.outcome", outcome.value)
            return outcome

    def _call(self, executor: Executor, request: ExecutionRequest,
              generation: int) -> ExecutionReceipt:
        """The executor call, abandoned at its deadline (then ambiguous).

        An abandoned call's late answer is observed, never recorded as the truth.
        """
        timeout = (request.deadline - self.ctx.clock.now()).total_seconds()
        if timeout <= 0:
            raise DeadlineExceeded()  # no time left to wait for an answer: do not call

        def late(result: Any, error: BaseException | None) -> None:
            self.late_answer(request.attempt_id, generation, result, error)

        return self.calls.run(lambda: executor.execute(request), timeout, late)

    def late_answer(self, attempt_id: str, generation: int, result: Any,
                    error: BaseException | None) -> None:
        """An abandoned call answered after all: keep what it says as an observation."""
        if error is None and isinstance(result, ExecutionReceipt):
            kind = AttemptStatus.SUCCEEDED
        elif isinstance(error, ExecutorNoEffect):
            kind = AttemptStatus.FAILED_SAFE
        else:
            return  # still ambiguous: nothing to add to what recovery will find
        # A background thread: if the store fails here, recovery settles the rest.
        with contextlib.suppress(Exception):
            self._observe(attempt_id, generation, kind)

    def _mark_dispatch(
        self, attempt: ExecutionAttempt, generation: int
    ) -> tuple[ExecutionAttempt, Checked, datetime] | Outcome:
        """Recheck I7 and commit the dispatch marker, or say what happened instead.

        The marker condition-checks every directory record the recheck used, at
        the version used. Those may come from the read cache or from the versions
        the approval stored on ``Queued``; if one has moved on since, the marker
        conflicts, the entries are dropped, and the recheck runs once more on
        fresh reads under the same lease. A second conflict backs off.
        """
        current, fresh = attempt, False

        def mark_once() -> tuple[ExecutionAttempt, Checked, datetime] | Outcome:
            nonlocal current, fresh
            try:
                checked = self._confirmed_recheck(current, fresh)
            except AuthorizationFailed as failed:
                return self._refuse(current, generation, failed.reason)
            except TargetDrift:
                return self._refuse(current, generation, "target_drift")
            except StoreUnavailable:
                return self._back_off(current, generation, "store_unavailable")
            now = self.ctx.clock.now()
            if checked.spec.expires_at <= now:
                # The recheck's reads take time: expiry is judged at the marker's own time.
                return self._refuse(current, generation, "spec_expired")
            deadline = _time(current.lease_expires_at) - timedelta(
                seconds=self.policy.deadline_margin_seconds
            )
            try:
                current.mark_dispatch(generation=generation, now=now, deadline=deadline,
                                      settle_seconds=settle_seconds(checked.executor))
            except IllegalTransition:
                return Outcome.STALE
            try:
                with self.ctx.tracer.span("ledger.worker.dispatch_marker",
                                          {"ledger.lease_generation": generation}):
                    commit(self.ctx.store, self.ctx.cache, Commit(
                        aggregates=[current],
                        read_set=checked.authorization.read_set,
                        due=[DueWork(current.id, _time(current.lease_expires_at))],
                    ))
            except ConcurrencyConflict as conflict:
                if conflict.stream_id == current.id:
                    return Outcome.SKIPPED
                # A directory record changed between the recheck and the marker.
                latest = self.ctx.store.get(ExecutionAttempt, current.id)
                if latest is None or not latest.holds_lease(generation, self.ctx.clock.now()):
                    return Outcome.SKIPPED
                current, fresh = latest, True
                raise
            return current, checked, deadline

        return retry_on_conflict(
            mark_once, limit=2,
            exhausted=lambda: self._back_off(current, generation, "directory_changed"),
        )

    def _confirmed_recheck(self, attempt: ExecutionAttempt, fresh: bool) -> Checked:
        """The recheck; a refusal judged on cached or pinned records is judged
        again on fresh reads (a stale entry must not refuse either)."""
        if fresh or not self.ctx.cache.enabled:
            return self._recheck(attempt, self.ctx.clock.now(), fresh=True)
        try:
            return self._recheck(attempt, self.ctx.clock.now(), fresh=False)
        except (AuthorizationFailed, TargetDrift):
            pass
        self.ctx.cache.forget([attempt.proposal_id, *(i for i, _ in attempt.authorized or ())])
        return self._recheck(attempt, self.ctx.clock.now(), fresh=True)

    def _recheck(self, attempt: ExecutionAttempt, now: datetime, *, fresh: bool) -> Checked:
        """I7 again, from the exact stored ids; I4: the stored spec, hashes intact.

        Not ``fresh`` and with what the approval stored on ``Queued``: the spec
        from there (its hash is the approved payload hash; a claimed proposal
        version never changes again and the attempt exists only with its
        claim, I3), and the directory records from the cache or, for those it
        lacks, one batched read of the versions the approval authorized."""
        if not fresh and attempt.spec is not None:
            spec = self._queued_spec(attempt)
            pins = attempt.authorized
        else:
            spec = self._claimed_spec(attempt)
            pins = None
        if spec.capability != attempt.capability or spec.executor_build != attempt.executor_build:
            raise AuthorizationFailed("executor_build_mismatch")
        who = Approver(
            attempt.actor_id,
            attempt.identity_binding_id,
            attempt.channel_binding_id,
            attempt.conversation_key,
        )
        reads = DirectoryReads(self.ctx, fresh=fresh, pins=pins)
        authorization = authorize(self.ctx, who, spec, now, reads)
        if authorization.delivery_mode != attempt.delivery_mode.value:
            raise AuthorizationFailed("delivery_mode_mismatch")
        if self.ctx.registry is None:
            raise AuthorizationFailed("executor_not_registered")
        executor = self.ctx.registry.get(attempt.capability, attempt.executor_build)
        if executor is None:
            raise AuthorizationFailed("executor_not_registered")
        return Checked(spec=spec, executor=executor, authorization=authorization)

    def _queued_spec(self, attempt: ExecutionAttempt) -> ProposalSpec:
        try:
            spec = stored_spec(attempt.spec, attempt.payload_hash)
        except InvalidSpec:
            raise AuthorizationFailed("stored_spec_invalid") from None
        if spec is None:
            raise AuthorizationFailed("hash_mismatch")
        return spec

    def _claimed_spec(self, attempt: ExecutionAttempt) -> ProposalSpec:
        proposal = self.ctx.store.get(Proposal, attempt.proposal_id)
        record = proposal.version_record(attempt.proposal_version) if proposal else None
        if (
            record is None
            or record["status"] != ProposalStatus.CLAIMED.value
            or record["attempt_id"] != attempt.id
        ):
            raise AuthorizationFailed("proposal_not_claimed")
        try:
            spec = stored_spec(record["spec"], attempt.payload_hash)
        except InvalidSpec:
            raise AuthorizationFailed("stored_spec_invalid") from None
        if (
            spec is None
            or record["payload_hash"] != attempt.payload_hash
            or record["view_hash"] != attempt.view_hash
        ):
            raise AuthorizationFailed("hash_mismatch")
        return spec

    # -- transitions ---------------------------------------------------------------

    def _refuse(self, attempt: ExecutionAttempt, generation: int, reason: str) -> Outcome:
        """The recheck failed: no executor call (I7)."""
        now = self.ctx.clock.now()
        try:
            if attempt.dispatched:
                # An earlier generation may have applied the effect: a human decides.
                attempt.record_unknown(reason_code=reason, now=now, generation=generation)
                return self._settle(attempt, Outcome.OUTCOME_UNKNOWN)
            attempt.fail_safe(reason_code=reason, now=now, generation=generation)
        except IllegalTransition:
            return Outcome.STALE
        return self._settle(attempt, Outcome.FAILED_SAFE)

    def _back_off(self, attempt: ExecutionAttempt, generation: int, reason: str) -> Outcome:
        """A transient failure before dispatch: requeue with bounded backoff."""
        if attempt.dispatched:
            return Outcome.PENDING
        now = self.ctx.clock.now()
        not_before = now + self.policy.backoff(attempt.predispatch_leases)
        try:
            attempt.requeue(generation=generation, reason=reason, not_before=not_before, now=now)
        except IllegalTransition:
            return Outcome.STALE
        # Not durable: if a power cut takes it back, the lease expires and recovery requeues.
        requeued = self._commit(attempt, due=not_before, durable=False)
        return Outcome.REQUEUED if requeued else Outcome.SKIPPED

    def _record(
        self,
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
                    generation=generation, status=status, now=self.ctx.clock.now(),
                    reason_code=reason, receipt=receipt,
                )
            except IllegalTransition:
                return self._observe(current.id, generation, status)
            try:
                self.ctx.store.commit(
                    Commit(aggregates=[current], due=[DueWork(current.id, None)])
                )
            except ConcurrencyConflict:
                fresh = self.ctx.store.get(ExecutionAttempt, current.id)
                if fresh is None:
                    return Outcome.MISSING
                current = fresh
                raise
            return Outcome(status.value)

        return retry_on_conflict(
            record_once, exhausted=lambda: self._observe(attempt.id, generation, status)
        )

    def _observe(self, attempt_id: str, generation: int, status: AttemptStatus) -> Outcome:
        def observe_once() -> Outcome:
            fresh = self.ctx.store.get(ExecutionAttempt, attempt_id)
            if fresh is None:
                return Outcome.MISSING
            try:
                fresh.observe_late_result(
                    generation=generation, kind=status.value, now=self.ctx.clock.now()
                )
            except IllegalTransition:
                return Outcome.STALE
            due = DueWork(fresh.id, fresh.next_action_at())
            self.ctx.store.commit(Commit(aggregates=[fresh], due=[due]))
            return Outcome.STALE

        return retry_on_conflict(observe_once, exhausted=lambda: Outcome.STALE)

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
                self.ctx.store.commit(Commit(
                    read_set=[ReadCheck(attempt.id, attempt.version)],
                    due=[DueWork(attempt.id, attempt.next_action_at())],
                    durable=False,  # lost: recovery finds the attempt due again
                ))
            return Outcome.PENDING
        try:
            attempt.record_reconciled(status=status, now=now, reason_code=reason, receipt=receipt)
        except IllegalTransition:
            return Outcome.SKIPPED
        return self._settle(attempt, Outcome(status.value))

    def _settle(self, attempt: ExecutionAttempt, outcome: Outcome) -> Outcome:
        return outcome if self._commit(attempt, due=attempt.next_action_at()) else Outcome.SKIPPED

    def _commit(self, attempt: ExecutionAttempt, *, due: datetime | None,
                durable: bool = True) -> bool:
        """Append the attempt's new events with its due-work entry; False on a lost race."""
        try:
            self.ctx.store.commit(Commit(aggregates=[attempt], due=[DueWork(attempt.id, due)],
                                         durable=durable))
        except ConcurrencyConflict:
            return False
        return True

    def _drop_stale_due(self, attempt: ExecutionAttempt) -> None:
        self.ctx.store.commit(Commit(due=[DueWork(attempt.id, None)], durable=False))


def _bounded(code: object) -> str:
    """An executor's reason code if it is a short code, else a generic one (I10)."""
    if isinstance(code, str) and _REASON_CODE.fullmatch(code):
        return code
    return "executor_reason_invalid"


def _time(text: str | None) -> datetime:
    if text is None:
        raise IllegalTransition("missing timestamp")
    return parse_utc(text)
