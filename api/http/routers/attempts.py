"""Execution attempts: status for the owner, lists, audit, reconcile and resolve for admins."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import PlainTextResponse

from api.http.deps import AdminCaller, AnyCaller, LedgerDep
from api.http.errors import error_responses
from api.http.schemas.attempts import (
    AttemptEventsOut,
    AttemptListOut,
    AttemptOut,
    ReconcileIn,
    ResolveIn,
)
from api.service import attempts
from api.service.cursors import DEFAULT_PAGE, MAX_PAGE
from domain.attempt import AttemptStatus
from projections.attention import AttentionReason

router = APIRouter(
    prefix="/execution-attempts",
    tags=["execution-attempts"],
    responses=error_responses(400, 401, 403, 404, 409, 413, 422, 503),
)

MAX_WAIT_SECONDS = 30


@router.get("")
def list_attempts(
    caller: AdminCaller,
    ledger: LedgerDep,
    status: AttemptStatus | AttentionReason,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> AttemptListOut:
    """Attempts in one status, oldest change first (the attention list for
    ``outcome_unknown``, ``effect_after_no_effect`` and ``failed_safe``); paginated
    from the projection. ``waiting_for_build``: the queued attempts no worker with
    their build has taken for ``LEDGER_WAITING_FOR_BUILD_SECONDS`` (each item is
    its ordinary status view, status ``queued``)."""
    return attempts.list_attempts(ledger, caller, status, limit=limit, cursor=cursor)


@router.get("/{attempt_id}")
async def get_attempt(
    attempt_id: str,
    caller: AnyCaller,
    ledger: LedgerDep,
    wait: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_WAIT_SECONDS,
            description="Long poll: answer as soon as the attempt is settled (terminal or "
            "outcome_unknown), or after this many seconds with its status then.",
        ),
    ] = None,
) -> AttemptOut:
    """The redacted status; anyone else gets the same 404 as for a missing id.

    With ``wait`` the request waits on this process's view-change notification
    (no store reads while it waits, no connection held)."""
    if wait is None:
        return await run_in_threadpool(attempts.get_attempt, ledger, caller, attempt_id)
    return await attempts.wait_attempt_async(ledger, caller, attempt_id, wait)


@router.get("/{attempt_id}/events", response_model=None)
def get_attempt_events(
    attempt_id: str,
    caller: AdminCaller,
    ledger: LedgerDep,
    format: Literal["json", "mermaid"] = "json",
) -> AttemptEventsOut | PlainTextResponse:
    """The redacted, hash-verified event history (or a Mermaid state diagram)."""
    if format == "mermaid":
        return PlainTextResponse(attempts.attempt_diagram(ledger, caller, attempt_id))
    return attempts.attempt_events(ledger, caller, attempt_id)


@router.post("/{attempt_id}/reconcile")
def reconcile_attempt(
    attempt_id: str, body: ReconcileIn, caller: AdminCaller, ledger: LedgerDep
) -> AttemptOut:
    """Run the registered read-only reconciler for an uncertain attempt."""
    return attempts.reconcile(ledger, caller, attempt_id, body)


@router.post("/{attempt_id}/resolve")
def resolve_attempt(
    attempt_id: str, body: ResolveIn, caller: AdminCaller, ledger: LedgerDep
) -> AttemptOut:
    """Settle ``outcome_unknown`` (or ``effect_after_no_effect``); never calls the
    executor."""
    return attempts.resolve(ledger, caller, attempt_id, body)
