"""Execution attempts: status for the owner, reconcile and resolve for admins."""

from __future__ import annotations

from fastapi import APIRouter

from api.http.auth import Caller, Role
from api.http.deps import AdminCaller, AnyCaller, LedgerDep
from api.http.errors import error_responses
from api.http.schemas.attempts import AttemptOut, ReconcileIn, ResolveIn
from domain.attempt import ExecutionAttempt
from domain.errors import NotFound
from domain.services.resolution import reconcile, resolve
from projections.status import attempt_status_view

router = APIRouter(
    prefix="/execution-attempts",
    tags=["execution-attempts"],
    responses=error_responses(401, 403, 404, 409, 413, 422, 503),
)


def may_see(caller: Caller, attempt: ExecutionAttempt) -> bool:
    """The owning actor (directly or through its channel) and admins."""
    if caller.role is Role.ADMIN:
        return True
    if caller.role is Role.ACTOR:
        return caller.subject == attempt.actor_id
    if caller.role is Role.CHANNEL and caller.provenance is not None:
        return caller.provenance.actor_id == attempt.actor_id
    return False


@router.get("/{attempt_id}")
def get_attempt(attempt_id: str, caller: AnyCaller, ledger: LedgerDep) -> AttemptOut:
    """The redacted status; anyone else gets the same 404 as for a missing id."""
    attempt = ledger.store.get(ExecutionAttempt, attempt_id) if len(attempt_id) <= 80 else None
    if attempt is None or not may_see(caller, attempt):
        raise NotFound()
    return AttemptOut.model_validate(attempt_status_view(attempt))


@router.post("/{attempt_id}/reconcile")
def reconcile_attempt(
    attempt_id: str, body: ReconcileIn, caller: AdminCaller, ledger: LedgerDep
) -> AttemptOut:
    """Run the registered read-only reconciler for an uncertain attempt."""
    attempt = reconcile(
        ledger.context, attempt_id=attempt_id, expected_revision=body.expected_revision
    )
    return AttemptOut.model_validate(attempt_status_view(attempt))


@router.post("/{attempt_id}/resolve")
def resolve_attempt(
    attempt_id: str, body: ResolveIn, caller: AdminCaller, ledger: LedgerDep
) -> AttemptOut:
    """Settle ``outcome_unknown``; never calls the executor."""
    attempt = resolve(
        ledger.context,
        attempt_id=attempt_id,
        expected_revision=body.expected_revision,
        outcome=body.resolution,
        reason=body.reason,
        resolved_by=caller.subject,
        receipt=dict(body.receipt) if body.receipt is not None else None,
    )
    return AttemptOut.model_validate(attempt_status_view(attempt))
