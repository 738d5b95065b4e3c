"""Admin reconcile and resolve (design.md 5.5). Neither ever calls an executor (I6).

Reconcile runs only the attempt's registered read-only reconciler and accepts
no provider result from the caller. Resolve settles ``outcome_unknown`` by an
admin's verdict. A lookup build's "not applied" and ``no_effect`` are watched
afterwards (I12, ``watch.py``). Both require the current revision; one conditional append
wins a race; repeating a request that already took effect returns the stored
state.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from domain.attempt import RESOLVABLE, TERMINAL, AttemptStatus, ExecutionAttempt, Resolution
from domain.errors import (
    IllegalTransition,
    InvalidInput,
    NotFound,
    NotOutcomeUnknown,
    ReconcilerUnavailable,
    StaleRevision,
)
from domain.ports import Commit, DueWork, ExecutionRequest, ReconcileAnswer
from domain.proposal import Proposal
from domain.redaction import check_reason, validate_receipt
from domain.services.context import ServiceContext
from domain.services.retry import retry_on_conflict
from domain.spec import parse_spec

NOT_SETTLED = "lookup_before_settle"  # "not applied" while a call may still land


def ask_reconciler(ctx: ServiceContext, attempt: ExecutionAttempt) -> ReconcileAnswer | str:
    """The read-only reconciler's answer for the attempt's key, or a bounded reason
    code when there is none to be had (``proposal_missing``, ``lookup_failed``).

    Raises ``ReconcilerUnavailable`` when this process has no reconciler for the
    build. Never calls the executor (I6).
    """
    reconciler = (
        ctx.registry.reconciler(attempt.capability, attempt.executor_build)
        if ctx.registry is not None
        else None
    )
    if reconciler is None:
        raise ReconcilerUnavailable()
    proposal = ctx.store.get(Proposal, attempt.proposal_id)
    record = proposal.version_record(attempt.proposal_version) if proposal else None
    if record is None:
        return "proposal_missing"
    request = ExecutionRequest(
        spec=parse_spec(record["spec"]),
        attempt_id=attempt.id,
        idempotency_key=attempt.idempotency_key,
        deadline=ctx.clock.now() + timedelta(seconds=30),
    )
    try:
        return reconciler.lookup(request)
    except Exception:
        return "lookup_failed"


def lookup_outcome(
    ctx: ServiceContext, attempt: ExecutionAttempt
) -> tuple[AttemptStatus, str | None, dict[str, Any] | None]:
    """Ask the attempt's read-only reconciler; map its verdict to a status.

    "not applied" becomes ``failed_safe`` only once no call of the attempt can
    still be in flight (``ExecutionAttempt.not_applied_is_proof``); before that
    it is ``outcome_unknown`` with the reason ``lookup_before_settle``, which
    callers treat as "look again later", never as a settlement.
    """
    answer = ask_reconciler(ctx, attempt)
    if isinstance(answer, str):
        return AttemptStatus.OUTCOME_UNKNOWN, answer, None
    if answer.verdict == "applied":
        receipt = validate_receipt(answer.receipt)
        if receipt is None:
            return AttemptStatus.OUTCOME_UNKNOWN, "unsafe_receipt", None
        return AttemptStatus.SUCCEEDED, None, receipt
    if answer.verdict == "not_applied":
        if not attempt.not_applied_is_proof(ctx.clock.now()):
            return AttemptStatus.OUTCOME_UNKNOWN, NOT_SETTLED, None
        return AttemptStatus.FAILED_SAFE, "reconciled_not_applied", None
    return AttemptStatus.OUTCOME_UNKNOWN, "lookup_unknown", None


def _load(ctx: ServiceContext, attempt_id: str) -> ExecutionAttempt:
    attempt = ctx.store.get(ExecutionAttempt, attempt_id)
    if attempt is None:
        raise NotFound()
    return attempt


def reconcile(ctx: ServiceContext, *, attempt_id: str, expected_revision: int) -> ExecutionAttempt:
    """Run the registered read-only lookup for an uncertain attempt."""

    def reconcile_once() -> ExecutionAttempt:
        attempt = _load(ctx, attempt_id)
        if attempt.status in TERMINAL:
            return attempt  # settled already: a repeat sees the stored truth
        if attempt.status is not AttemptStatus.OUTCOME_UNKNOWN:
            raise NotOutcomeUnknown()
        attempt.check_revision(expected_revision)
        status, reason, receipt = lookup_outcome(ctx, attempt)
        if status is AttemptStatus.OUTCOME_UNKNOWN:
            return attempt
        try:
            attempt.record_reconciled(
                status=status,
                now=ctx.clock.now(),
                reason_code=reason,
                receipt=receipt,
                watch=ctx.no_effect_watch,
            )
        except IllegalTransition:
            return attempt
        # A "not applied" is watched: its first look is the due entry (I12).
        due = DueWork(attempt.id, attempt.next_action_at())
        ctx.store.commit(Commit(aggregates=[attempt], due=[due]))
        return attempt

    return retry_on_conflict(reconcile_once, exhausted=lambda: _load(ctx, attempt_id))


def resolve(
    ctx: ServiceContext,
    *,
    attempt_id: str,
    expected_revision: int,
    outcome: str,
    reason: str,
    resolved_by: str,
    receipt: dict[str, Any] | None = None,
) -> ExecutionAttempt:
    """Settle ``outcome_unknown`` by an admin's verdict; duplicates return stored state."""
    try:
        verdict = Resolution(outcome)
    except ValueError:
        raise InvalidInput.at("/resolution", "must be effect_applied or no_effect") from None
    safe_reason = check_reason(reason)
    if safe_reason is None:
        raise InvalidInput.at("/reason", "must be 1-500 characters with no secret-shaped content")
    safe_receipt = None
    if receipt is not None:
        safe_receipt = validate_receipt(receipt)
        if safe_receipt is None:
            raise InvalidInput.at(
                "/receipt", "must be small, flat and contain no secret-shaped data"
            )

    def resolve_once() -> ExecutionAttempt:
        attempt = _load(ctx, attempt_id)
        if attempt.status is AttemptStatus.MANUALLY_RESOLVED:
            resolution = attempt.resolution or {}
            if resolution.get("outcome") == verdict.value:
                return attempt  # a repeat, or a racing twin that agreed
            raise NotOutcomeUnknown()
        if attempt.status not in RESOLVABLE:
            raise NotOutcomeUnknown()
        if expected_revision != attempt.revision:
            raise StaleRevision()
        attempt.resolve(
            outcome=verdict,
            reason=safe_reason,
            resolved_by=resolved_by,
            now=ctx.clock.now(),
            receipt=safe_receipt,
            watch=ctx.no_effect_watch,
        )
        # A lookup build's no_effect is watched: its first look is the due entry (I12).
        due = DueWork(attempt.id, attempt.next_action_at())
        ctx.store.commit(Commit(aggregates=[attempt], due=[due]))
        return attempt

    return retry_on_conflict(resolve_once, exhausted=lambda: _load(ctx, attempt_id))


def acknowledge(
    ctx: ServiceContext, *, attempt_id: str, expected_revision: int, note: str, by: str
) -> ExecutionAttempt:
    """Record that an admin saw a ``failed_safe`` attempt and needs nothing more of
    it (it leaves the attention list); a repeat returns the stored state."""
    safe_note = check_reason(note)
    if safe_note is None:
        raise InvalidInput.at("/note", "must be 1-500 characters with no secret-shaped content")

    def acknowledge_once() -> ExecutionAttempt:
        attempt = _load(ctx, attempt_id)
        if attempt.acknowledgement is not None and attempt.status is AttemptStatus.FAILED_SAFE:
            return attempt  # a repeat, or a racing twin
        if attempt.status is not AttemptStatus.FAILED_SAFE:
            raise IllegalTransition("Only a failed_safe attempt can be acknowledged.")
        if expected_revision != attempt.revision:
            raise StaleRevision()
        attempt.acknowledge(acknowledged_by=by, note=safe_note, now=ctx.clock.now())
        ctx.store.commit(Commit(aggregates=[attempt]))
        return attempt

    return retry_on_conflict(acknowledge_once, exhausted=lambda: _load(ctx, attempt_id))
